"""`ladder compare` (laws side by side, and B's effect against A) and `ladder export` on a real ladder
root: Marin's 535B ladder fit and predicted from recorded rung results (Hoffmann's law at its rung
sizes, so no training), through the CLI."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from patience import HANG_S

REPO = Path(__file__).resolve().parents[2]
LADDER = str(Path(sys.executable).parent / "ladder")
MARIN = str(REPO / "experiments" / "marin_moe_535b.py")


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    return subprocess.run([LADDER, *args], capture_output=True, text=True, timeout=HANG_S, cwd=REPO, env=env)


@pytest.fixture(scope="module")
def marin_root(tmp_path_factory):
    from ladder.spec import load_spec

    spec = load_spec(MARIN)
    tmp = tmp_path_factory.mktemp("marin")
    rows = [{"name": r.name, "loss": 1.69 + 406.4 / r.model.params_active ** 0.34 + 410.7 / r.tokens ** 0.28,
             "tokens": r.tokens} for r in spec.rungs]
    pd.DataFrame(rows).to_csv(tmp / "results.csv", index=False)
    root = tmp / "root"
    assert run_cli("import-results", MARIN, str(tmp / "results.csv"), "--root", str(root)).returncode == 0
    proc = run_cli("submit", MARIN, "--root", str(root), "--no-progress", "--wandb", "disabled",
                   "--set", "fit.bootstrap=20", "--json")
    assert proc.returncode in (0, 1), proc.stderr[-2000:]  # the gate may block the (untrained) hero
    d = json.loads(proc.stdout)
    assert {s["step"]: s["status"] for s in d["steps"]}["predict"] == "SUCCESS"
    return root


def test_compare_puts_two_ladders_side_by_side(marin_root):
    proc = run_cli("compare", MARIN, MARIN, "--root", str(marin_root), "--set-a", "fit.bootstrap=20", "--json",
                   "--draws", "40")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    a, b = d["a"], d["b"]
    assert a["law"] == "compute" and a["predicted_final_loss"] < a["upper"] and a["lower"] < a["predicted_final_loss"]
    assert set(a) == set(b)
    assert b["predicted_final_loss"] is None  # B (the default 200 resamples) has not been run: shown as such
    # the effect reads the rungs' results from their (submitted) steps: the ladder against itself is 1x at every size
    effect = d["effect"]
    assert [r["size"] for r in effect["per_size"]] == ["d768", "d1024", "d1536", "d2048"]
    assert all(r["multiplier"] == pytest.approx(1.0, abs=1e-12) and r["delta"] == 0 for r in effect["per_size"])
    assert effect["noise"]["mode"] == "prior" and d["verdict"].startswith("B shows no effect")
    proc = run_cli("compare", MARIN, MARIN, "--root", str(marin_root), "--set-a", "fit.bootstrap=20", "--draws", "40")
    assert proc.returncode == 0 and "predicted_final_loss" in proc.stdout and "verdict: B shows no effect" in proc.stdout


def test_export_writes_parquet_a_user_reads_with_pandas(marin_root, tmp_path):
    out = tmp_path / "export"
    proc = run_cli("export", MARIN, "--root", str(marin_root), "--out", str(out), "--set", "fit.bootstrap=20", "--json")
    assert proc.returncode == 0, proc.stderr
    d = json.loads(proc.stdout)
    assert {"steps", "fit_points"} <= set(d["tables"])
    steps = pd.read_parquet(out / "steps.parquet")
    assert (steps.set_index("step").loc["predict", "status"]) == "SUCCESS"
    points = pd.read_parquet(out / "fit_points.parquet")
    assert len(points) == d["tables"]["fit_points"]["rows"] >= 4 and "loss" in points.columns
    assert not list(out.glob(".*.tmp"))
