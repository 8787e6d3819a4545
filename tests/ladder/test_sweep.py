"""`ladder sweep` through the real CLI: rungs trained at several learning rates on real Ray, collected
into sweep.csv and fitted into rule.json; a second submit resumes instead of retraining."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from patience import HANG_S

from fits.hparams import fit_rule

REPO = Path(__file__).resolve().parents[2]
LADDER = str(Path(sys.executable).parent / "ladder")
SMOKE = str(REPO / "experiments" / "smoke.py")
MULTS = (0.5, 1.0, 2.0, 4.0)


def run_cli(*args: str, timeout: float = HANG_S) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONUNBUFFERED": "1"}
    return subprocess.run([LADDER, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO, env=env)


@pytest.mark.slow
def test_sweep_trains_collects_fits_and_resumes(tmp_path):
    args = ("sweep", SMOKE, "--rungs", "rung_1,rung_2", "--lr", ",".join(map(str, MULTS)), "--root", str(tmp_path),
            "--json")
    first = run_cli(*args)
    assert first.returncode == 0, first.stderr[-3000:]
    out = json.loads(first.stdout.strip().splitlines()[-1])
    sweep_dir = Path(out["dir"])
    assert sweep_dir.parent == tmp_path / "smoke-sweep"  # beside the ladder's own steps, never among them
    assert not (tmp_path / "smoke").exists()

    table = pd.read_csv(sweep_dir / "sweep.csv")
    assert len(table) == 2 * len(MULTS) and set(table["rung"]) == {"rung_1", "rung_2"}
    for rung, rows in table.groupby("rung"):
        base = rows.loc[rows["lr_mult"] == 1.0, "lr"].item()
        assert rows["lr"].to_numpy() == pytest.approx(base * rows["lr_mult"].to_numpy())
        assert rows["flops"].nunique() == 1 and rows["final_eval_loss"].nunique() == len(MULTS)
        # Each run is a real training run of that rung at that learning rate.
        run_dir = next((tmp_path / "smoke-sweep").glob(f"{rung}-lr2-*"))
        result = json.loads((run_dir / "result.json").read_text())
        assert result["lr"] == pytest.approx(2 * base) and result["status"] == "SUCCESS"
        assert not (run_dir / "branches").exists() or not any((run_dir / "branches").iterdir())

    # rule.json is what fits.hparams makes of sweep.csv, or says why the sweep cannot support a rule.
    (rule,) = json.loads((sweep_dir / "rule.json").read_text())["rules"]
    assert rule["batch"] == "own"
    try:
        expected = fit_rule(table["flops"], table["lr"], table["final_eval_loss"])
    except ValueError as exc:
        assert rule["error"] == str(exc)
    else:
        assert rule["exponent"] == pytest.approx(expected.exponent) and rule["coef"] == pytest.approx(expected.coef)
        assert len(rule["optima"]) == 2

    # Resubmitting trains nothing: every run and the collect step are already done.
    mtime = (sweep_dir / "sweep.csv").stat().st_mtime_ns
    again = run_cli(*args)
    assert again.returncode == 0, again.stderr[-3000:]
    assert json.loads(again.stdout.strip().splitlines()[-1])["dir"] == str(sweep_dir)
    assert (sweep_dir / "sweep.csv").stat().st_mtime_ns == mtime


def test_sweep_bad_input_is_one_line_and_writes_nothing(tmp_path):
    for args, needle in ((("--rungs", "rung_9"), "no rung named 'rung_9'"),
                         (("--rungs", "rung_1", "--lr", "0.5,-1"), "--lr: multiple -1 must be positive"),
                         (("--rungs", "rung_1", "--lr", "0.5,x"), "comma-separated numbers")):
        proc = run_cli("sweep", SMOKE, *args, "--root", str(tmp_path / "root"), timeout=HANG_S)
        assert proc.returncode == 2 and needle in proc.stderr, proc.stderr
        assert len(proc.stderr.strip().splitlines()) == 1 and "Traceback" not in proc.stderr
        assert not (tmp_path / "root").exists()
