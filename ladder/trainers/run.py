"""What a training step hands its trainer, whichever kind it is (ladder.trainers.registry)."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from ladder.spec import DataSpec, RungSpec


@dataclass(frozen=True)
class TrainRun:
    """One run to train: the resolved run, its step's config and the step's handles.

    ``callbacks(out_dir)``: the trainer callbacks writing beside the run's files in ``out_dir`` (the hero's
    live forecast, W&B; picklable, so a gang's first process makes its own). ``progress(row)``: the step's
    progress line (step, total_steps, tokens, loss, tokens_per_s, eta_s). ``should_stop()``: the driver asks
    the run to checkpoint and end; polled every ``heartbeat_s`` seconds at most."""

    rung: RungSpec
    data: DataSpec
    config: Mapping[str, Any]
    out_dir: str
    dep_dirs: Mapping[str, str]
    shard_dirs: Mapping[str, str]
    callbacks: Callable[[str], list]
    progress: Callable[[dict], None]
    should_stop: Callable[[], bool]
    heartbeat_s: float
    # The tokenizer.json a ``bpe:`` ladder trained (its tokenizer step), which also encodes ``data.tasks``.
    tokenizer_file: str | None = None

    @property
    def trainer(self) -> Mapping[str, Any]:
        """The trainer's entry of the step's config (``{"kind": "builtin"}`` when it has none)."""
        return self.config.get("trainer") or {"kind": "builtin"}
