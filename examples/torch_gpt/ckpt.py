"""Checkpoints in the run's ``checkpoint.dir`` (under its output directory): ``step-<N>.pt`` with the model, the optimizer, the
RNG states and the data position (the step: a batch is a pure function of the seed and its step), each written
whole through a temporary file and a rename, so a kill mid-save leaves the previous one readable. The newest
that loads is the one a restart resumes from."""

from __future__ import annotations

import os
import re
from pathlib import Path

import torch

KEEP = 2  # the newest two: a torn newest file still leaves one to resume from
_NAME = re.compile(r"step-(\d+)\.pt$")


def saved_steps(folder: Path) -> list[int]:
    if not folder.is_dir():
        return []
    return sorted(int(m.group(1)) for p in folder.iterdir() if (m := _NAME.fullmatch(p.name)))


def save(folder: Path, step: int, model: torch.nn.Module, optimizer, extra: dict) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    state = {
        "step": step,
        "model": model.state_dict(),
        "optimizer": optimizer.state_dict(),
        "torch_rng": torch.get_rng_state(),
        "cuda_rng": torch.cuda.get_rng_state_all() if torch.cuda.is_available() else None,
        **extra,
    }
    tmp = folder / f".step-{step}.pt.tmp"
    torch.save(state, tmp)
    os.replace(tmp, folder / f"step-{step}.pt")
    for old in saved_steps(folder)[:-KEEP]:
        (folder / f"step-{old}.pt").unlink(missing_ok=True)


def load_newest(folder: Path, model: torch.nn.Module, optimizer) -> dict | None:
    """Restore the newest checkpoint that loads into ``model`` and ``optimizer``; its extra fields, or None
    when there is none (a fresh run)."""
    for step in reversed(saved_steps(folder)):
        path = folder / f"step-{step}.pt"
        try:
            state = torch.load(path, map_location="cpu", weights_only=False)
        except (OSError, RuntimeError, EOFError) as exc:  # torn by a kill: the one before it serves
            print(f"[torch_gpt] {path.name} does not load ({type(exc).__name__}); trying an older checkpoint", flush=True)
            continue
        model.load_state_dict(state.pop("model"))
        optimizer.load_state_dict(state.pop("optimizer"))
        torch.set_rng_state(state.pop("torch_rng"))
        cuda_rng = state.pop("cuda_rng")
        if cuda_rng is not None and torch.cuda.is_available():
            torch.cuda.set_rng_state_all(cuda_rng)
        return state
    return None
