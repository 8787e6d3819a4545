"""Marin's 535B forecast from a fresh root, through the CLI a user runs: wall time of each command
beside the target (the three in under a minute on a 2-core CPU, no training, no network), and the
forecast's figures beside Marin's own.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPEC = str(REPO / "experiments" / "marin_moe_535b.py")


def _run(*args: str) -> tuple[subprocess.CompletedProcess, float]:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    t = time.perf_counter()
    proc = subprocess.run([str(Path(sys.executable).parent / "ladder"), *args], capture_output=True, text=True,
                          timeout=600, cwd=REPO, env=env)
    if proc.returncode != 0:
        raise RuntimeError(f"ladder {args[0]} failed: {proc.stderr[-500:]}")
    return proc, time.perf_counter() - t


def main() -> None:
    from fits import reference

    curves = str(reference.data_dir() / "marin_moe_535b" / "rung_curves.csv")
    with tempfile.TemporaryDirectory(prefix="bench-marin-") as tmp:
        root = str(Path(tmp) / "root")
        _, t_import = _run("import-results", SPEC, curves, "--root", root)
        _, t_submit = _run("submit", SPEC, "--root", root, "--no-progress", "--wandb", "disabled")
        proc, t_report = _run("report", SPEC, "--root", root, "--json")
        rep = json.loads(proc.stdout)
        hero_csv = Path(tmp) / "hero.csv"
        reference.marin_hero_eval().assign(name="d6144")[["name", "step", "tokens", "loss"]].to_csv(hero_csv, index=False)
        _run("import-results", SPEC, str(hero_csv), "--root", root)
        _run("submit", SPEC, "--root", root, "--no-progress", "--wandb", "disabled")
        scored = json.loads(_run("report", SPEC, "--root", root, "--json")[0].stdout)
    hero, marin = scored["hero"], scored["baselines"]["marin"]
    rec, mrec = hero["recorded"], marin["recorded"]
    rows = [
        ("import-results (rung curves)", f"{t_import:.1f} s", ""),
        ("submit (fit, predict, gate, report)", f"{t_submit:.1f} s", ""),
        ("report --json", f"{t_report:.1f} s", ""),
        ("  the three", f"{t_import + t_submit + t_report:.1f} s", "< 60 s"),
        ("law chosen by the rung backtests", rep["hero"]["law"], ""),
        ("hero final, ours (90%)", f"{hero['predicted_final_loss']:.4f} [{hero['lower']:.4f}, {hero['upper']:.4f}]", ""),
        ("hero final, Marin's", f"{marin['predicted_final_loss']:.4f}", "2.0388"),
        (f"mean |error| on the hero's points {rec['from_frac']:.0%}-{rec['to_frac']:.1%}, ours",
         f"{rec['mean_abs_rel_error']:.2%}", f"< Marin's {mrec['mean_abs_rel_error']:.2%}"),
        ("  inside our 90% band", f"{rec['inside_band']:.0%}", "100%"),
    ]
    rows += [(f"band coverage on {c['predict']} from {','.join(c['fit_on'])} (calibrated on {','.join(c['calibrated_on'])})",
              f"{c['coverage']:.0%} of {c['n_points']}", "~90%") for c in hero["coverage"] if c.get("coverage") is not None]
    rows.append(("seed noise carried (one seed per size: a prior)", f"{hero['seeds']['sigma']:.2%} per run", "said"))
    snaps = [s for s in hero.get("snapshots") or [] if s.get("later_points")]
    rows += [(f"snapshot at {s['at_frac']:.0%}: final, later |error|, inside",
              f"{s['predicted_final']:.4f} {s['later_mean_abs_rel_error']:.2%} {s['later_inside_band']:.0%}", "~90% inside")
             for s in snaps]
    width = max(len(r[0]) for r in rows)
    print(f"{'measure':<{width}}  {'measured':>32}  target")
    for name, value, target in rows:
        print(f"{name:<{width}}  {value:>32}  {target}")


if __name__ == "__main__":
    main()
