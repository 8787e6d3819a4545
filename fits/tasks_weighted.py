"""The weighted task forecast: every method's prediction, weighted by how well it did on the ladder's own
farthest backtest, in place of the one method that did best there.

Why: on OLMo's ladder the farthest backtest (the 1B runs from the 190M-370M runs, 0.54 decades of N) ranks
methods on four held-out runs each, so its winner is partly luck, and a near-tie between two methods that
part ways at the target turns into a coin flip. Weighting each method by 1 / (its backtest's mean absolute
error)^2 keeps the backtest's verdict (a method that missed by 20 points weighs 1/400 of one that missed by
1) without betting the forecast on one ranking. The rule was chosen against the best-method rule on OLMo's
3B runs, which no fit or choice sees (experiments/olmo_tasks_record.md, round 3), before the targets were
scored with it.

The interval at level p is prediction +- z_p sigma, clipped to [0, 1], with
sigma^2 = sd_boot^2 + scatter^2 + (per_decade * d)^2 + spread^2:
- sd_boot: the heaviest method's bootstrap of the runs (fits.tasks_forecast; one method's, since refitting
  every method per resample costs five times as much);
- scatter: the methods' residual scatters about their own fits, weighted;
- per_decade: the weighted forecast's own backtest error per decade of N beyond the largest fitted size
  (every cut, each method's predictions weighted as at the target);
- spread: the methods' weighted standard deviation at the target: where the laws part ways, the rungs do
  not say which is right.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pandas as pd

from fits.result import FitResult


def method_weights(mae: dict[str, float]) -> dict[str, float]:
    """Each method's weight: 1 / (its primary-backtest mean absolute error)^2, normalised over the methods
    that have one (a method without a backtest weighs nothing). An error is floored at 0.1 points so a
    lucky exact backtest cannot take all the weight."""
    raw = {m: 1.0 / max(float(v), 0.1) ** 2 for m, v in mae.items() if v is not None and np.isfinite(v)}
    total = sum(raw.values())
    return {m: w / total for m, w in raw.items()} if total > 0 else {}


def weighted_backtest(bt: pd.DataFrame, weights: dict[str, float]) -> pd.DataFrame:
    """The weighted forecast's backtest: per cut and held-out run, the methods' predictions weighted
    (renormalised over the methods that predicted that run). Same columns as fits.tasks_forecast.backtest's,
    method "weighted"."""
    use = bt[bt["method"].isin(weights) & np.isfinite(bt["predicted"].to_numpy(float))]
    rows = []
    for (cut, run), part in use.groupby(["cut", "run"], sort=False):
        w = part["method"].map(weights).to_numpy(float)
        pred = float(np.sum(w * part["predicted"].to_numpy(float)) / np.sum(w))
        first = part.iloc[0]
        rows.append({"method": "weighted", "cut": float(cut), "run": run, "params": float(first["params"]),
                     "tokens": float(first["tokens"]), "predicted": pred, "actual": float(first["actual"]),
                     "error": 100.0 * (pred - float(first["actual"])), "decades": float(first["decades"]),
                     "primary": bool(first["primary"])})
    return pd.DataFrame(rows, columns=bt.columns)


def weighted_forecast(fits_by_method: dict[str, FitResult], weights: dict[str, float], N: float, D: float, *,
                      per_decade: float, distance: float, sd_boot: float, level: float) -> dict:
    """The weighted prediction at (N, D) and its interval's terms (the module's docstring); per_decade: the
    weighted backtest's error per decade (fits.tasks_forecast.per_decade of weighted_backtest's rows)."""
    names = [m for m in weights if m in fits_by_method]
    w = np.array([weights[m] for m in names], float)
    w = w / w.sum()
    preds = np.array([float(fits_by_method[m].predict(N, D)) for m in names], float)
    predicted = float(np.sum(w * preds))
    spread = float(np.sqrt(np.sum(w * (preds - predicted) ** 2)))
    scatter = float(np.sum(w * np.array([float(fits_by_method[m].diagnostics["scatter"]) for m in names])))
    sigma = float(np.sqrt(sd_boot ** 2 + scatter ** 2 + (per_decade * max(distance, 0.0)) ** 2 + spread ** 2))
    z = NormalDist().inv_cdf(0.5 + level / 2)
    return {"predicted": predicted, "lower": max(0.0, predicted - z * sigma), "upper": min(1.0, predicted + z * sigma),
            "sigma": sigma, "sd_bootstrap": sd_boot, "scatter": scatter, "per_decade": per_decade, "spread": spread,
            "members": {m: {"weight": float(wi), "predicted": float(p)} for m, wi, p in zip(names, w, preds, strict=True)}}
