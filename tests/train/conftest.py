"""Fixtures for the trainer tests: tiny real models on real built-in text."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

os.environ.setdefault("JAX_PLATFORMS", "cpu")
os.environ.setdefault("JAX_COMPILATION_CACHE_DIR", os.path.join(tempfile.gettempdir(), "ladder-test-jax-cache"))
os.environ.setdefault("LADDER_PEAK_FLOPS", "1e11")  # skip the peak measurement in tests

import pytest  # noqa: E402

# Child processes import this file by path (sys.path holds tests/train/, not tests/): patience beside it.
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from patience import HANG_S  # noqa: E402

from ladder.spec import DataSpec, DomainSpec, ModelSpec, OptimSpec, RungSpec, ScheduleSpec  # noqa: E402

DENSE = ModelSpec(d_model=32, n_layers=2, n_heads=2)
MOE = ModelSpec(d_model=32, n_layers=2, n_heads=2, n_experts=4, top_k=2, n_shared=1, expert_d_ff=32,
                tie_embeddings=False, qk_norm=True, z_loss=1e-4)


def make_rung(model=DENSE, steps=24, batch=4, seq=32, **kw) -> RungSpec:
    base = dict(name="t", model=model, tokens=steps * batch * seq, batch_size=batch, seq_len=seq, seed=3,
                log_every=1, optim=OptimSpec(lr=3e-3), schedule=ScheduleSpec(kind="wsd", warmup_steps=2))
    base.update(kw)
    return RungSpec(**base)


def resumable_rung(model, steps: int) -> RungSpec:
    """A rung whose run crosses every boundary a resume must replay: checkpoints every 4 steps, evals
    every 8, a WSD cooldown branch at half the run, a metrics row per step."""
    return make_rung(model, steps=steps, checkpoint_every=4, eval_every=8, log_every=1,
                     schedule=ScheduleSpec(kind="wsd", warmup_steps=2, decay_frac=0.25, branch_fracs=(0.5,)))


@pytest.fixture(scope="session")
def data_spec() -> DataSpec:
    return DataSpec(
        domains=(DomainSpec("prose", "builtin:kjv", 0.6), DomainSpec("docs", "builtin:pydoc_topics", 0.4)),
        eval_tokens=512,
    )


@pytest.fixture
def dense_spec():
    return DENSE


@pytest.fixture
def moe_spec():
    return MOE


@pytest.fixture
def rung_factory():
    return make_rung


REPO = Path(__file__).resolve().parents[2]


def ladder_train(root: Path, run: str, steps: int, env: dict[str, str | None]) -> dict:
    """``ladder train experiments/smoke.py RUN --steps STEPS`` in a fresh process (so JAX starts there,
    after the CLI set up its flags and cache); ``env`` overrides the environment (None removes).
    Returns the run's result.json."""
    child = {**os.environ, "JAX_PLATFORMS": "cpu"}
    for key, value in env.items():
        if value is None:
            child.pop(key, None)
        else:
            child[key] = value
    ladder = str(Path(sys.executable).parent / "ladder")
    proc = subprocess.run([ladder, "train", str(REPO / "experiments" / "smoke.py"), run, "--root", str(root),
                           "--steps", str(steps)], capture_output=True, text=True, timeout=HANG_S, cwd=REPO, env=child)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    return json.loads((root / "smoke" / f"train-{run}" / "result.json").read_text())
