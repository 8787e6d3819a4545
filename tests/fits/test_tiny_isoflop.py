"""The default recipe's recorded IsoFLOP sweep (experiments/tiny_isoflop.csv) says what
experiments/tiny_isoflop.py claims of it: changing the recorded runs or the claims alone fails here."""

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

import fits

CSV = Path(__file__).resolve().parents[2] / "experiments" / "tiny_isoflop.csv"


def test_the_recorded_frontier_and_the_default_rungs_distance_from_it():
    runs = pd.read_csv(CSV)
    runs = runs[runs["seed"] == 0]
    res = fits.fit(runs, "isoflop")
    assert res.params["a"] == pytest.approx(0.545, abs=0.005)
    vertices = res.diagnostics["vertices"]
    assert len(vertices) == 3
    # Trained tokens per active parameter at each vertex, interpolated in the budget's own runs.
    per_param = []
    for v, (budget, group) in zip(vertices, runs.groupby("budget"), strict=True):
        slope, icpt = np.polyfit(np.log(group["active_params"]), np.log(group["tokens"]), 1)
        per_param.append(float(np.exp(icpt + slope * np.log(v["N_opt"]))) / v["N_opt"])
        # The default ladder's rung at this budget (50 tokens per parameter) is within 0.5% of the vertex.
        rung = group.iloc[np.argmin(np.abs(group["tokens"] / group["active_params"] - 50))]
        assert rung["loss"] / v["L_opt"] - 1 < 0.005, (budget, rung["d_model"])
    np.testing.assert_allclose(per_param, [98, 118, 118], rtol=0.03)


def test_the_recorded_frontiers_interval_holds_chinchillas_exponent():
    res = fits.bootstrap(fits.read_runs(str(CSV)), "isoflop", n_resamples=200, seed=0)
    lo, hi = res.ci["a"]
    assert lo < 0.5 < hi


def test_the_second_seed_moves_the_frontier_within_its_interval():
    """Both seeds of the sweep: each seed's exponent inside the pooled interval, and the default rungs
    within 1.1% of the pooled vertices (their two seeds' mean)."""
    runs = pd.read_csv(CSV)
    assert sorted(runs["seed"].unique()) == [0, 1]
    assert runs.groupby("seed").size().tolist() == [13, 13]
    pooled = fits.fit(runs, "isoflop")
    assert pooled.params["a"] == pytest.approx(0.577, abs=0.005)
    lo, hi = fits.bootstrap(fits.read_runs(str(CSV)), "isoflop", n_resamples=200, seed=0).ci["a"]
    per_seed = [fits.fit(group, "isoflop").params["a"] for _, group in runs.groupby("seed")]
    np.testing.assert_allclose(per_seed, [0.545, 0.629], atol=0.005)
    assert all(lo < a < hi for a in per_seed)
    gaps = []
    for v, (_, group) in zip(pooled.diagnostics["vertices"], runs.groupby("budget"), strict=True):
        means = group.assign(per_param=group["tokens"] / group["active_params"]).groupby("d_model").agg(
            loss=("loss", "mean"), per_param=("per_param", "first"))
        rung = means.iloc[np.argmin(np.abs(means["per_param"] - 50))]
        gaps.append(rung["loss"] / v["L_opt"] - 1)
    np.testing.assert_allclose(gaps, [-0.0104, -0.0041, 0.0091], atol=0.0005)
