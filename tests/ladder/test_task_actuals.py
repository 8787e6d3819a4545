"""A hero recorded elsewhere (followed, or imported as hero_actual) is scored on its task evals as they
arrive: the report's task rows take its latest evals from imported/hero*/metrics.jsonl (issue 57)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from ladder.analysis.tasks import add_tasks

N_SIZES = (1e8, 2e8, 4e8)


def _rungs(root: Path) -> dict[str, str]:
    """Three sizes x four token multiples, 8 evals each: a task loss on a Chinchilla law of (N, D) and
    an accuracy on a sigmoid of it (the smallest backtest cut, two sizes, has the six runs it needs)."""
    dirs = {}
    for N in N_SIZES:
        for k in (1, 2, 5, 10):
            name = f"r{N:.0e}-{k}x"
            d = root / name
            d.mkdir(parents=True)
            (d / "result.json").write_text(json.dumps({"params_active": N}))
            rows = []
            for D in 20.0 * k * N * np.linspace(0.2, 1.0, 8):
                L = 0.6 + 60.0 * N ** -0.3 + 45.0 * D ** -0.25
                acc = 0.25 + 0.75 / (1.0 + np.exp(9.0 * (L - 0.95)))
                rows.append({"step": int(D // 1e6), "tokens": float(D), "eval_loss": 1.4 * L + 0.9,
                             "task_bpb/toy": float(L), "task_acc/toy": float(acc)})
            (d / "eval.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
            dirs[name] = str(d)
    return dirs


def test_a_followed_hero_s_task_actual_refreshes_as_its_evals_arrive(tmp_path):
    dirs = _rungs(tmp_path / "ladder")
    predict = tmp_path / "ladder" / "predict-x"
    predict.mkdir()
    followed = tmp_path / "ladder" / "imported" / "hero_actual"
    followed.mkdir(parents=True)
    config = {"rungs": list(dirs), "hero": "hero", "level": 0.9,
              "tasks": {"task_chance": {"toy": 0.25}, "hero_task_evals": 2, "bootstrap": 0}}
    prediction = {"hero": {"params": 1.6e9, "tokens": 3.2e11, "level": 0.9}}

    def report_after(accs: list[float]) -> dict:
        rows = [{"step": 100 * (i + 1), "tokens": 1e9 * (i + 1), "loss": 2.0, "task_acc/toy": a} for i, a in enumerate(accs)]
        (followed / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
        report: dict = {}
        add_tasks(report, prediction, {**dirs, "predict": str(predict)}, config)
        return report

    first = report_after([0.40, 0.50])
    row = first["tasks"][0]
    assert row["actual"] == pytest.approx(0.45)  # the mean of its last hero_task_evals evals
    assert row["error"] == pytest.approx(100 * (row["predicted"] - 0.45))
    later = report_after([0.40, 0.50, 0.70])  # one more eval arrived
    again = later["tasks"][0]
    assert again["predicted"] == row["predicted"]  # the rungs' forecast is unchanged (cached), its score refreshes
    assert again["actual"] == pytest.approx(0.60) and later["tasks_summary"]["scored"] == 1
