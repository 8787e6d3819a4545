"""Replicas (the same size on other seeds): the backtest predicts a size's mean from sizes far enough
below it, and the bootstrap resamples sizes, never splitting a size's seeds."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ladder.analysis import backtest_at_ratio, bootstrap_fits, fit_final_law, n_sizes
from ladder.spec import FitSpec

E, A, ALPHA = 0.7, 190.0, 0.19


def _points(noise: dict[tuple[int, int], float]) -> pd.DataFrame:
    rows = []
    for i, n in enumerate((8e3, 18e3, 32e3, 49e3, 71e3)):
        tokens = 50 * n
        flops = 6.5 * n * tokens
        for replica in (0, 1):
            loss = (E + A * flops ** -ALPHA) * (1 + noise.get((i, replica), 0.0))
            rows.append({"name": f"rung_{i + 1}" + (f"_r{replica}" if replica else ""), "size": f"{n:.0f}x{tokens:.0f}",
                         "kind": "final", "params": n, "tokens": tokens, "flops": flops, "loss": loss,
                         "flops_per_token": flops / tokens})
    return pd.DataFrame(rows)


def test_backtest_predicts_the_mean_of_the_largest_size_from_sizes_far_below():
    # Opposite errors on the two seeds of the largest size: their mean is the law's value.
    points = _points({(4, 0): 0.03, (4, 1): -0.03})
    fit = FitSpec(law="compute", bootstrap=0)
    bt = backtest_at_ratio(points, fit, ratio=4.0)
    assert bt["ok"]
    assert sorted(bt["predict_runs"]) == ["rung_5", "rung_5_r1"]
    assert bt["actual"] == pytest.approx(np.mean(bt["actual_runs"]))
    assert not set(bt["fit_on"]) & set(bt["predict_runs"])
    # rung_4 is only 1.9x below rung_5: too close for a 4x backtest
    assert {n.split("_r")[0] for n in bt["fit_on"]} == {"rung_1", "rung_2", "rung_3"}
    assert len(bt["fit_on"]) == 6
    assert abs(bt["relative_error"]) < 0.005, bt
    # one seed alone would have missed by the noise
    single = backtest_at_ratio(points[~points["name"].str.endswith("_r1")], fit, ratio=4.0)
    assert single["relative_error"] < -0.02


def test_bootstrap_resamples_sizes_not_seeds():
    # Each size's two seeds straddle the law by +-3%: a resample of whole sizes always sees their
    # mean, so with E pinned every resample recovers the exponent; resampling single runs would not.
    points = _points({(i, r): (0.03 if r else -0.03) for i in range(5) for r in (0, 1)})
    fit = FitSpec(law="compute", bootstrap=0, pin_E=E)
    assert n_sizes(points) == 5
    base = fit_final_law(points, fit)
    assert base.params["alpha"] == pytest.approx(ALPHA, rel=0.01)
    samples = bootstrap_fits(points, fit, base, n=30, seed=1)
    assert len(samples) >= 20
    assert np.ptp([s["alpha"] for s in samples]) < 0.01 * ALPHA


def test_seed_spread_is_the_noise_floor_of_sizes_with_replicas():
    from ladder.analysis import seed_spread

    points = _points({(0, 1): 0.02, (3, 1): 0.004})
    spread = seed_spread(points)
    assert spread["sizes"] == 5
    assert spread["max"] == pytest.approx(0.02 / 1.01, rel=1e-6)
    assert spread["median"] == pytest.approx(0.0)
    assert seed_spread(points[~points["name"].str.endswith("_r1")]) is None
