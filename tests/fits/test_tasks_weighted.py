"""The weighted task rule (fits.tasks_weighted): weights by hand, the forecast as the weighted methods, its
interval's spread term, and the rule's name checked."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from test_tasks import COLS, TRUE_ACC, TRUE_LOSS, ladder

from fits.errors import InputError
from fits.tasks_forecast import fit_method, forecast_task
from fits.tasks_weighted import method_weights, weighted_backtest


def test_weights_are_inverse_squared_backtest_errors_by_hand():
    w = method_weights({"a": 1.0, "b": 2.0, "c": float("nan"), "d": None})
    assert set(w) == {"a", "b"}  # a method without a backtest weighs nothing
    assert w["a"] == pytest.approx(0.8) and w["b"] == pytest.approx(0.2)  # 1 : 1/4
    # an exact backtest is floored at 0.1 points: it cannot take all the weight
    assert method_weights({"a": 0.0, "b": 0.1}) == pytest.approx({"a": 0.5, "b": 0.5})
    assert method_weights({"a": float("nan")}) == {}


def test_the_weighted_backtest_weighs_each_held_out_run_by_hand():
    bt = pd.DataFrame([
        {"method": m, "cut": 1.0, "run": "r", "params": 4.0, "tokens": 9.0, "predicted": p, "actual": 0.5,
         "error": 100 * (p - 0.5), "decades": 0.6, "primary": True} for m, p in (("a", 0.6), ("b", 0.4), ("c", 0.9))])
    out = weighted_backtest(bt, {"a": 0.75, "b": 0.25})  # c has no weight: left out
    assert len(out) == 1 and out["method"].iloc[0] == "weighted"
    assert out["predicted"].iloc[0] == pytest.approx(0.75 * 0.6 + 0.25 * 0.4)
    assert out["error"].iloc[0] == pytest.approx(100 * (0.55 - 0.5))


def test_the_weighted_forecast_is_its_methods_weighted_and_its_band_carries_their_spread():
    pts = ladder()
    N, D = 4e9, 1e12
    res = forecast_task(pts, COLS, N, D, n_resamples=10, rule="weighted")
    diag, f = res.diagnostics, res.diagnostics["forecast"]
    weights = diag["choice"]["weights"]
    assert diag["method"] == "weighted" and sum(weights.values()) == pytest.approx(1.0)
    assert weights == pytest.approx(method_weights(diag["choice"]["mae"]))
    preds = {m: float(fit_method(pts, COLS, m).predict(N, D)) for m in weights}
    centre = sum(weights[m] * preds[m] for m in weights)
    assert f["predicted"] == pytest.approx(centre, abs=1e-9)
    spread = np.sqrt(sum(weights[m] * (preds[m] - centre) ** 2 for m in weights))
    assert f["spread"] == pytest.approx(spread, abs=1e-9)
    assert f["sigma"] ** 2 == pytest.approx(f["sd_bootstrap"] ** 2 + f["scatter"] ** 2
                                            + (f["per_decade"] * f["decades"]) ** 2 + spread ** 2)
    # the result's law is the heaviest method's, whose chain the report draws
    assert f["drawn"] == max(weights, key=weights.get)
    truth = float(TRUE_ACC.predict(TRUE_LOSS.predict(N, D)))
    assert f["lower"] <= truth <= f["upper"]
    # the weighted backtest rows ride along with the methods' own
    assert "weighted" in {r["method"] for r in diag["backtest"]}
    # the best rule on the same rungs: one method's prediction, no spread term
    best = forecast_task(pts, COLS, N, D, n_resamples=10, rule="best").diagnostics
    assert best["method"] in weights and "spread" not in best["forecast"]
    assert best["forecast"]["predicted"] == pytest.approx(preds[best["method"]], abs=1e-9)


def test_an_unknown_rule_is_one_line_naming_the_rules():
    with pytest.raises(InputError, match="weighted, best"):
        forecast_task(ladder(), COLS, 4e9, 1e12, n_resamples=0, rule="vote")
