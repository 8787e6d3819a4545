"""`bench follow`'s envelope part: training-dynamics envelopes (ladder.analysis.dynamics) over fresh draws of the smoke ladder's rungs: for
each ladder seed, the largest rung's every logged step of grad norm, MoE drop rate, load imbalance and
router-bias norm against the 90% envelope from the three smaller rungs. The default ladder's record of
seeds (experiments/tiny_record.md) keeps finals and fits, not the per-step metrics, so the draws are
trained here: the smoke rungs (the smallest ladder with four MoE rungs), no hero.

Run alone: python -m bench.follow_envelopes. BENCH_ENVELOPE_SEEDS picks the draws (default 0,1,2,3);
BENCH_ENVELOPE_ROOTS=SEED=ROOT,... reuses finished ones.
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
SPEC = str(REPO / "experiments" / "smoke.py")
LEVEL = 0.9


def _train(root: str, seed: int) -> None:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.run([str(Path(sys.executable).parent / "ladder"), "submit", SPEC, "--root", root, "--no-progress",
                           "--wandb", "disabled", "--set", f"seed={seed}", "--set", "train_hero=false"],
                          capture_output=True, text=True, timeout=3600, cwd=REPO, env=env)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"ladder submit (seed {seed}) failed: {proc.stderr[-500:]}")


def draw(root: str, seed: int) -> list[dict]:
    from ladder.analysis.dynamics import backtest, rung_frames
    from ladder.dag import queries
    from ladder.spec.load import load_spec

    spec = dataclasses.replace(load_spec(SPEC, [f"seed={seed}", "train_hero=false"]), root=root)
    dirs = queries.step_dirs(spec)
    return backtest(rung_frames(dirs, [r.name for r in spec.rungs]), LEVEL)


def main() -> None:
    seeds = [int(s) for s in os.environ.get("BENCH_ENVELOPE_SEEDS", "0,1,2,3").split(",") if s.strip()]
    given = dict(kv.split("=", 1) for kv in os.environ.get("BENCH_ENVELOPE_ROOTS", "").split(",") if "=" in kv)
    print(f"smoke rungs, largest from the 3 smaller, {LEVEL:.0%} envelope; draws: ladder seeds {seeds}")
    print("seed | metric | steps scored | inside | below | above | mean log half-width")
    pooled: dict[str, list[tuple[int, float]]] = {}
    with tempfile.TemporaryDirectory(prefix="bench-envelopes-") as tmp:
        for seed in seeds:
            root = given.get(str(seed))
            if root is None:
                root = str(Path(tmp) / f"seed{seed}")
                _train(root, seed)
            for r in draw(root, seed):
                pooled.setdefault(r["metric"], []).append((r["points"], r["inside"]))
                print(f"{seed} | {r['metric']} | {r['points']} | {r['inside']:.0%} | {r['below']:.0%} | {r['above']:.0%} | "
                      f"{r['mean_log_half_width']:.3f}")
    print("\nmetric | draws | inside per draw (min-max) | inside pooled over steps")
    for metric, rows in pooled.items():
        n = np.array([p for p, _ in rows], float)
        f = np.array([x for _, x in rows], float)
        print(f"{metric} | {len(rows)} | {f.min():.0%}-{f.max():.0%} | {float((n * f).sum() / n.sum()):.0%}")


if __name__ == "__main__":
    main()
