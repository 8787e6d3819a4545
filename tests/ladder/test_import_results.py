"""Marin's 535B ladder planned and predicted from recorded rung results, with no training.

The recorded losses here are Hoffmann et al.'s published law evaluated at Marin's rung sizes, so
the prediction for the hero has a known answer: the compute law fitted on them must land near the
same law at the hero.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest

REPO = Path(__file__).resolve().parents[2]
LADDER = str(Path(sys.executable).parent / "ladder")
MARIN = str(REPO / "experiments" / "marin_moe_535b.py")


def hoffmann(n: float, d: float) -> float:
    return 1.69 + 406.4 / n ** 0.34 + 410.7 / d ** 0.28


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    return subprocess.run([LADDER, *args], capture_output=True, text=True, timeout=600, cwd=REPO, env=env)


def test_plan_prices_the_hero():
    proc = run_cli("plan", MARIN, "--json")
    assert proc.returncode == 0, proc.stderr
    rows = {r["step"]: r for r in json.loads(proc.stdout)["steps"]}
    assert "hero" not in rows  # train_hero=False: predicted here, trained elsewhere
    assert rows["rung_4"]["flops"] == pytest.approx(8.4e21, rel=0.1)


def test_predict_and_report_from_imported_results(tmp_path):
    from ladder.spec import load_spec

    spec = load_spec(MARIN)
    rows = [{"name": r.name, "loss": hoffmann(r.model.params_active, r.tokens), "tokens": r.tokens} for r in spec.rungs]
    results = tmp_path / "results.csv"
    pd.DataFrame(rows).to_csv(results, index=False)
    root = tmp_path / "root"
    proc = run_cli("import-results", MARIN, str(results), "--root", str(root))
    assert proc.returncode == 0, proc.stderr
    proc = run_cli("submit", MARIN, "--root", str(root), "--no-progress", "--wandb", "disabled", "--set", "fit.bootstrap=20")
    # The gate may block (4 points leave little room for a backtest); prediction and report still run.
    assert proc.returncode in (0, 1), proc.stderr[-2000:]
    rep = json.loads(run_cli("report", MARIN, "--root", str(root), "--json", "--set", "fit.bootstrap=20").stdout)
    hero = rep["hero"]
    truth = hoffmann(spec.hero.model.params_active, spec.hero.tokens)
    assert hero["predicted_final_loss"] == pytest.approx(truth, rel=0.03)
    assert hero["actual_final_loss"] is None
    assert rep["targets"] and rep["targets"][0]["name"] == "hero_2x_tokens"
    assert rep["targets"][0]["loss"] < hero["predicted_final_loss"]


@pytest.mark.parametrize("content,needle", [
    ("name,loss\nrung_9,2.0\n", "is not a run of marin_moe_535b"),
    ("name,tokens\nrung_1,100\n", "missing column 'loss'"),
    ("name,loss\nrung_1,-1\n", "loss must be a positive number"),
])
def test_bad_results_csv(tmp_path, content, needle):
    bad = tmp_path / "bad.csv"
    bad.write_text(content)
    proc = run_cli("import-results", MARIN, str(bad), "--root", str(tmp_path / "root"))
    assert proc.returncode == 2 and needle in proc.stderr and len(proc.stderr.strip().splitlines()) == 1
    assert not (tmp_path / "root").exists()
