"""The contract's input JSON (docs/trainers.md) as this trainer uses it: one frozen record, read once."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path


def cadence(total_steps: int, every: int, n: int) -> frozenset[int]:
    """The steps a run evaluates (or saves) at, the end included: the multiples of ``every`` when it is set,
    else ``n`` points spaced evenly and ending on the last step (the built-in trainer's rule)."""
    if every:
        return frozenset(range(every, total_steps, every)) | {total_steps}
    n = max(1, min(int(n), total_steps))
    return frozenset(max(1, round(total_steps * k / n)) for k in range(1, n + 1))


@dataclass(frozen=True)
class RunConfig:
    name: str
    model: dict
    seq_len: int
    batch_size: int
    total_steps: int
    lr: float
    schedule: dict
    optim: dict
    seed: int
    data: dict
    shard_dirs: dict
    log_every: int
    eval_steps: frozenset[int]
    eval_tokens: int
    final_tokens: int
    checkpoint_steps: frozenset[int]
    out: Path
    resume: bool

    def mixture(self):
        """The run's batches and eval windows from the project's data pipeline (numpy, no JAX): the same
        windows every trainer of the ladder reads, from token shards when the ladder tokenized them."""
        from ladder.spec import data_from_dict
        from ladder.trainers.builtin.stream import open_mixture

        return open_mixture(data_from_dict(self.data), self.seq_len, self.seed, self.shard_dirs or None)


def load(path: str | Path) -> RunConfig:
    c = json.loads(Path(path).read_text())
    run = c["run"]
    total = int(c["steps"])
    data = c["data"]
    return RunConfig(
        name=run["name"],
        model=run["model"],
        seq_len=int(run["seq_len"]),
        batch_size=int(run["batch_size"]),
        total_steps=total,
        lr=float(run["optim"]["lr"]),
        schedule=run["schedule"],
        optim=run["optim"],
        seed=int(run["seed"]),
        data=data,
        shard_dirs=c.get("shard_dirs") or {},
        log_every=int(run.get("log_every", 10)),
        eval_steps=cadence(total, int(run.get("eval_every", 0)), int(run.get("n_evals", 10))),
        eval_tokens=int(data["eval_tokens"]),
        final_tokens=int(data.get("final_eval_tokens") or data["eval_tokens"]),
        checkpoint_steps=cadence(total, int(run.get("checkpoint_every", 0)), int(run.get("n_checkpoints", 10))),
        out=Path(c["out"]),
        resume=bool(c.get("resume", True)),
    )
