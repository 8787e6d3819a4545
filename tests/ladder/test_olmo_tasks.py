"""OLMo's task ladder through the commands (issue 57): `ladder import-results SPEC DIR` reads OLMo's own
CSVs, `ladder submit` forecasts, `ladder report --json` carries one row per task; bad input is one line,
exit 2, nothing written."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from patience import HANG_S

REPO = Path(__file__).resolve().parents[2]
LADDER = str(Path(sys.executable).parent / "ladder")
SPEC = str(REPO / "experiments" / "olmo_7b.py")
DATA = REPO / "fits" / "reference_data" / "olmo_ladder"
TASKS = ("mmlu", "hellaswag", "arc_challenge", "arc_easy", "piqa", "csqa", "socialiqa", "openbookqa")
# The end-to-end case carries two of the eight (a 4-choice and a 2-choice task) and a 10-resample bootstrap:
# the commands' path is the same for every task, and tests/fits/test_tasks_paper.py and test_tasks.py cover
# all eight and the methods in pure fits, so the suite's slowest setup does not fit eight tasks twice over.
E2E_TASKS = ("arc_challenge", "piqa")
E2E_SET = ("--set", f"fit.forecast_tasks={list(E2E_TASKS)}", "--set", "fit.bootstrap=10")
FIELDS = ("task", "predicted", "lower", "upper", "level", "actual", "method", "backtest")


def run_cli(*args: str) -> subprocess.CompletedProcess:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    return subprocess.run([LADDER, *args], capture_output=True, text=True, timeout=HANG_S, cwd=REPO, env=env)


@pytest.fixture(scope="module")
def report(tmp_path_factory) -> tuple[dict, Path]:
    root = tmp_path_factory.mktemp("olmo-root")
    proc = run_cli("import-results", SPEC, str(DATA), "--root", str(root), "--json")
    assert proc.returncode == 0, proc.stderr
    doc = json.loads(proc.stdout)
    assert doc["kind"] == "curves" and len(doc["names"]) == 17  # 16 rungs and the hero
    proc = run_cli("submit", SPEC, "--root", str(root), "--no-progress", "--wandb", "disabled", *E2E_SET)
    assert proc.returncode in (0, 1), proc.stderr[-2000:]  # the gate of a hero trained elsewhere is advisory
    proc = run_cli("report", SPEC, "--root", str(root), "--json", *E2E_SET)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout), root


@pytest.mark.slow  # 16 imported rungs through Ray, and two tasks' backtests and bootstraps in the report step
def test_the_report_carries_one_row_per_task_with_its_method_and_backtest(report):
    rep, root = report
    rows = {r["task"]: r for r in rep["tasks"]}
    assert set(rows) == set(E2E_TASKS)
    for r in rows.values():
        assert set(FIELDS) <= set(r)
        assert 0.0 <= r["lower"] <= r["predicted"] <= r["upper"] <= 1.0 and r["level"] == 0.9
        # the spec's default rule weighs every method by its backtest: the lower its error, the more it weighs
        mae, weights = r["backtest"]["mae_by_method"], r["backtest"]["weights"]
        assert r["method"] == "weighted" and set(weights) <= set(mae) and sum(weights.values()) == pytest.approx(1.0)
        ranked = sorted(weights, key=lambda m: mae[m])
        assert [weights[m] for m in ranked] == sorted(weights.values(), reverse=True)
        assert r["drawn"] == ranked[0] and r["interval"]["spread"] >= 0.0
        assert set(r["backtest"]["predict"]) == {"1B-1xC", "1B-2xC", "1B-5xC", "1B-10xC"}  # the largest size
        # from the smallest cut: the farthest backtest the rungs allow
        assert {x.split("-")[0] for x in r["backtest"]["fit_on"]} == {"190M", "370M"}
        assert 0.2 < r["actual"] < 0.95  # the hero's anneal row, imported with it
        assert r["error"] == pytest.approx(100 * (r["predicted"] - r["actual"]))
    s = rep["tasks_summary"]
    assert s["scored"] == 2 and s["within_2_points"] <= 2 and s["inside_interval"] <= 2
    html = next(root.glob("olmo_7b/report-*/report.html")).read_text()
    assert "Task accuracy forecasts (2 tasks)" in html and "f-task-arc-challenge" in html


def test_a_metric_column_missing_from_an_import_is_one_line_and_writes_nothing(tmp_path):
    src = tmp_path / "olmo"
    src.mkdir()
    frame = pd.read_csv(DATA / "190M-1xC.csv")
    frame.drop(columns=["eval/downstream/piqa_val_rc_5shot_len_norm"]).to_csv(src / "190M-1xC.csv", index=False)
    shutil.copy(DATA / "190M-2xC.csv", src / "190M-2xC.csv")
    root = tmp_path / "root"
    proc = run_cli("import-results", SPEC, str(src), "--root", str(root))
    assert proc.returncode == 2, proc.stderr
    line = proc.stderr.strip()
    assert "\n" not in line and "190M-1xC.csv" in line and "eval/downstream/piqa_val_rc_5shot_len_norm" in line
    assert not (root / "olmo_7b" / "imported_results.csv").exists()


def test_a_task_with_no_rung_points_is_one_line_and_runs_nothing(tmp_path):
    src = tmp_path / "olmo"
    src.mkdir()
    for size in ("190M", "370M", "760M", "1B"):  # every rung imported (with piqa's metrics only), no hero
        for k in (1, 2, 5, 10):
            shutil.copy(DATA / f"{size}-{k}xC.csv", src / f"{size}-{k}xC.csv")
    root = tmp_path / "root"
    proc = run_cli("import-results", SPEC, str(src), "--root", str(root), "--set", "fit.forecast_tasks=['piqa']")
    assert proc.returncode == 0, proc.stderr
    before = sorted(p.name for p in (root / "olmo_7b").iterdir())
    proc = run_cli("submit", SPEC, "--root", str(root), "--no-progress", "--wandb", "disabled",
                   "--set", "fit.forecast_tasks=['piqa', 'boolq']", "--set", "fit.task_chance={'boolq': 0.5}")
    assert proc.returncode == 2, proc.stderr[-2000:]
    line = proc.stderr.strip()
    assert "\n" not in line and "'boolq'" in line and "no points on any rung" in line
    assert sorted(p.name for p in (root / "olmo_7b").iterdir()) == before


def test_a_task_the_rungs_cannot_carry_gets_a_row_that_says_why(tmp_path):
    """Two sizes cannot backtest a method: the task's row says so, and the report goes on."""
    import numpy as np

    from ladder.analysis.tasks import forecasts

    rows = []
    for N in (1e8, 2e8):
        for k in (1, 2, 5, 10):
            D = 20.0 * k * N * np.linspace(0.1, 1.0, 5)
            rows.append(pd.DataFrame({"run": f"{N:.0e}-{k}x", "params": N, "tokens": D, "loss": 3.0 - 0.1 * np.log10(D),
                                      "task_bpb/toy": 1.0 - 0.05 * np.log10(D), "task_acc/toy": 0.3 + 0.01 * np.log10(D)}))
    out = forecasts(pd.concat(rows, ignore_index=True), {"params": 1e9, "tokens": 2e10}, {"task_chance": {"toy": 0.25}},
                    0.9, tmp_path)
    assert len(out) == 1 and out[0]["task"] == "toy" and out[0]["predicted"] is None
    assert "three sizes" in out[0]["note"]
