"""The shape centre (ladder.analysis.shape_centre) and the choice between it and the refitted law
(follow_forecast.choose_centre), on synthetic rungs whose shapes are known."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

FRACS = np.round(np.arange(0.05, 1.0001, 0.05), 2)


def _rungs(drop_growth: float) -> pd.DataFrame:
    """Four rungs 2x apart in compute: loss = c_k * s(f) ** (1 + drop_growth * k), s falling over the run."""
    shape = 1.0 + 0.6 * np.exp(-4.0 * FRACS)
    rows = []
    for k in range(4):
        loss = (3.0 - 0.2 * k) * shape ** (1.0 + drop_growth * k)
        rows += [{"run": f"rung_{k + 1}", "frac": f, "loss": x, "total_flops": 1e15 * 2 ** k} for f, x in zip(FRACS, loss, strict=True)]
    return pd.DataFrame(rows)


def test_a_shape_shared_by_every_rung_is_carried_without_error():
    from ladder.analysis.shape_centre import carried, largest_run, shape_errors

    pts = _rungs(0.0)
    assert largest_run(pts) == "rung_4"
    errs = shape_errors(pts)
    assert len(errs) > 0 and set(errs["fit_on"]) == {"rung_1", "rung_2", "rung_3"}
    assert np.abs(errs["log_error"]).max() < 1e-12
    r4 = pts[pts["run"] == "rung_4"]
    got = carried(pts, "rung_1", 0.25, float(r4[r4["frac"] == 0.25]["loss"].iloc[0]), r4["frac"].to_numpy(float))
    assert got == pytest.approx(r4["loss"].to_numpy(float), rel=1e-12)


def test_a_shape_that_steepens_with_size_is_measured_as_a_miss_growing_with_horizon():
    from ladder.analysis.follow_bands import profile_sigma
    from ladder.analysis.shape_centre import shape_errors, shape_profile

    errs = shape_errors(_rungs(0.3))
    # a smaller rung's shallower drop carried along a larger rung over-predicts its later loss
    assert (errs["log_error"] > 0).all()
    near, far = errs[errs["h"] < 0.2], errs[errs["h"] > 1.0]
    assert np.abs(far["log_error"]).mean() > 3 * np.abs(near["log_error"]).mean()
    prof = shape_profile(errs)
    assert prof["pairs"] == 6 and profile_sigma(prof, np.array([1.5]))[0] > profile_sigma(prof, np.array([0.15]))[0]


def test_the_centre_is_the_one_that_backtests_better_on_the_largest_rung_at_the_finals_horizon():
    from ladder.analysis.follow_bands import horizon_profile
    from ladder.analysis.follow_forecast import choose_centre

    def prof(near: float, far: float) -> dict:
        h = np.array([0.1] * 3 + [1.2] * 3)
        return horizon_profile(h, np.array([near] * 3 + [far] * 3))

    # the law is better far ahead, the shape near: an early snapshot takes the law, a late one the shape
    rungs = {"choice": {"law": prof(0.05, 0.08), "shape": prof(0.01, 0.2), "shape_from_frac": 0.1}}
    assert choose_centre(rungs, 0.3)[0] == "law"  # h = ln(1/0.3) = 1.2
    rule, errs = choose_centre(rungs, 0.9)  # h = 0.105
    assert rule == "shape" and errs == pytest.approx({"law": 0.05, "shape": 0.01})
    # before the largest rung's first point its shape is not measured there: the law
    assert choose_centre({"choice": {**rungs["choice"], "shape_from_frac": 0.95}}, 0.9) == ("law", {})
    # a profile cached before the shape rule (a follow directory from an earlier version) has the law alone
    assert choose_centre(prof(0.05, 0.08), 0.9)[0] == "law"


def test_a_replica_is_no_shape_source_for_its_own_size():
    """Replicas (another seed, the same compute) carry no shape to each other: zero decades is no backtest."""
    from ladder.analysis.shape_centre import shape_errors

    pts = _rungs(0.1)
    twins = pd.concat([pts, pts.assign(run=pts["run"] + "_r1", loss=pts["loss"] * 1.01)], ignore_index=True)
    errs = shape_errors(twins)
    assert len(errs) > 0 and (errs["decades"] > 0.25).all()  # 2x apart at least
    assert set(errs["fit_on"]) == {"rung_1", "rung_1_r1", "rung_2", "rung_2_r1", "rung_3", "rung_3_r1"}
