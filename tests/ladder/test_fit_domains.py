"""The per-domain compute law (fit.law = "compute_domains") on a real ladder's rungs: the fit step
reads each rung's per-domain eval losses and the mixture weights it was scored with."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from fits.result import FitResult
from ladder.analysis.fit import fit_ladder
from ladder.analysis.runs import collect_runs


def _fit_step(root: str) -> dict:
    (step_json,) = Path(root).glob("*/fit-*/step.json")
    return json.loads(step_json.read_text())


def test_per_domain_law_on_the_smoke_ladders_rungs(ladder_smoke_root, tmp_path):
    step = _fit_step(ladder_smoke_root)
    dep_dirs = {d["step"]: d["path"] for d in step["deps"]}
    points, _ = collect_runs(step["config"]["rungs"], dep_dirs)
    finals = points[points["kind"] == "final"]
    # Each rung's mixture loss is its domains' losses weighted as the trainer weighted them.
    mixed = 0.5 * finals["loss@code"] + 0.5 * finals["loss@prose"]
    np.testing.assert_allclose(mixed, finals["loss"], rtol=1e-6)
    assert set(finals["weight@code"]) == {0.5}

    config = {**step["config"], "fit": {**step["config"]["fit"], "law": "compute_domains", "curve_law": "none",
                                        "bootstrap": 20}}
    out = fit_ladder(config, dep_dirs, str(tmp_path))
    doc = json.loads((tmp_path / "fit.json").read_text())
    assert out["law"] == doc["law"]["law"] == "compute_domains"
    assert sorted(doc["law"]["config"]["domains"]) == ["code", "prose"]
    assert doc["law"]["config"]["weights"] == pytest.approx([0.5, 0.5])
    assert doc["backtest"]["ok"] and doc["backtest"]["law"] == "compute_domains"
    # The summed law follows the rungs it was fitted on: within the smoke rungs' seed noise (up to
    # 7.5% per run, ladder/analysis/seeds.py) of each size's loss, and its band brackets its own curve.
    law = FitResult.from_dict(doc["law"])
    by_size = finals.groupby("flops")["loss"].mean()
    rel = law.predict(by_size.index.to_numpy()) / by_size.to_numpy() - 1
    assert np.max(np.abs(rel)) < 0.08, rel
    curve = pd.read_csv(tmp_path / "law_curve.csv")
    assert list(curve.columns) == ["flops", "loss", "lower", "upper", "boot_lower", "boot_upper"]
    assert (curve["lower"] <= curve["loss"]).all() and (curve["loss"] <= curve["upper"]).all()
    assert (curve["upper"] > curve["lower"]).any()
