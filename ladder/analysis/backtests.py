"""Backtests of the final-loss law (at the hero's own extrapolation ratio) and of the schedule-factor curve."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from ladder.analysis.curves import law_curve, schedule_factors
from ladder.analysis.finals import exactly_determined, fit_final_law, law_predict, min_rungs
from ladder.analysis.runs import rung_curve, smooth
from ladder.analysis.seeds import scale_losses, seed_noise
from ladder.spec import FitSpec


def backtest_at_ratio(points: pd.DataFrame, fit: FitSpec, ratio: float) -> dict[str, Any]:
    """Fit on the rungs at least `ratio` below the largest in compute, predict the largest.

    When too few rungs sit that far below, the smallest feasible gap is used and the record says
    how far it actually extrapolated, so the gate can refuse a backtest shorter than the hero's.
    """
    finals = points[points["kind"] == "final"]
    by_size = finals.groupby("size", sort=False).agg(flops=("flops", "mean"), params=("params", "mean"),
                                                     tokens=("tokens", "mean"), loss=("loss", "mean"),
                                                     runs=("name", list)).sort_values("flops")
    target = by_size.iloc[-1]
    below = by_size.iloc[:-1]
    chosen = below[below["flops"] <= target["flops"] / ratio * 1.05]
    if len(chosen) < min_rungs(fit):
        chosen = below.iloc[:max(min_rungs(fit), 1)]
    if len(chosen) < min_rungs(fit):
        return {"ok": False, "reason": f"{len(by_size)} finished rung sizes are too few to backtest the {fit.law} law"}
    fit_on = [n for runs in chosen["runs"] for n in runs]
    train = points[points["name"].isin(fit_on)]
    res = fit_final_law(train, fit)
    predicted = law_predict(res, target["params"], target["tokens"], target["flops"])
    achieved = float(target["flops"] / chosen["flops"].max())
    # With replicas the actual is the mean over the largest size's seeds.
    return {"ok": True, "fit_on": fit_on, "predict": target["runs"][0], "predict_runs": list(target["runs"]),
            "predicted": predicted, "actual": float(target["loss"]),
            "actual_runs": [float(x) for x in finals[finals["size"] == target.name]["loss"]],
            "relative_error": predicted / float(target["loss"]) - 1.0,
            "compute_ratio": achieved, "required_ratio": ratio, "decades": math.log10(achieved),
            "law": fit.law, "params": res.params,
            # As many budgets as free parameters: the law interpolates them, so its miss is their seed
            # noise carried out by the curvature (the tool refuses that for the hero's own law).
            "underdetermined": exactly_determined(train, fit)}


def backtest_noise(points: pd.DataFrame, fit: FitSpec, backtest: dict, full, n: int = 64, seed: int = 0) -> dict[str, Any] | None:
    """How far seed noise alone moves this backtest: the band its error falls in when the law is right.

    A parametric bootstrap under the law fitted to every size (`full`, the null hypothesis that it
    is right): each run is redrawn as that law's loss at its compute times its seed's luck (the
    measured sigma, the prior without replicas), the backtest refitted on the sizes below the cut
    and its target scored against the target's redrawn runs. The backtest's own fit cannot stand in
    for the law here: three budgets for three parameters often land on E = 0, a straight line that
    noise barely bends, while the full law's curvature carries the same noise far. Replica r shares
    its data order across sizes, so part of each run's luck is common to every size and cancels in a
    backtest; the draws treat runs as independent, so the band leans wide.
    """
    if not backtest.get("ok"):
        return None
    seeds = seed_noise(points, full)
    sigma = float(seeds["sigma"])
    finals = points[points["kind"] == "final"]
    truth = np.array([law_predict(full, r.params, r.tokens, r.flops) for r in finals.itertuples()])
    fitted = finals["name"].isin(backtest["fit_on"]).to_numpy()
    target = finals["name"].isin(backtest["predict_runs"]).to_numpy()
    t = finals[target].iloc[0]
    rng = np.random.default_rng(seed)
    errors = []
    for _ in range(n):
        drawn = scale_losses(finals, truth / finals["loss"].to_numpy(float) * np.exp(rng.normal(0.0, sigma, len(finals))))
        try:
            res = fit_final_law(drawn[fitted], fit)
        except ValueError:
            continue
        predicted = law_predict(res, t["params"], t["tokens"], t["flops"])
        errors.append(math.log(predicted / float(drawn.loc[target, "loss"].mean())))
    if len(errors) < 3:
        return None
    sd = float(np.std(errors, ddof=1))
    dof = seeds["dof"]
    q = band_quantile(fit.level, dof)
    return {"sigma_run": sigma, "source": seeds["source"], "draws": len(errors), "sigma": sd, "level": fit.level,
            "dof": dof, "quantile": q, "band": math.expm1(q * sd),
            "within": abs(math.log1p(backtest["relative_error"])) <= q * sd,
            "method": "parametric bootstrap under the law fitted to every size, runs redrawn at the seed sigma; "
                      + (f"Student's t at the seed sigma's {dof} degrees of freedom ({seeds['source']})" if dof
                         else "normal (the sigma a prior)")}


def band_quantile(level: float, dof: int | None) -> float:
    """The band's half-width in standard deviations of the redrawn backtests.

    The redraws run at the ladder's own seed sigma, measured on few degrees of freedom (a few replicated
    sizes, or one seed a size: seven sizes' scatter about a three-parameter law leaves four), and a ladder
    whose sigma happens to come out low gets a narrow band. So the band is Student's t at those degrees of
    freedom, not the normal quantile (python -m bench gate measures both block rates on ladders of the
    default layout drawn from a known law; experiments/tiny_record.md has the figures). Without a
    measured sigma it is a prior, not an estimate, and the normal quantile stands.
    """
    return float(_band_distribution(dof).ppf(0.5 + level / 2))


def _band_distribution(dof: int | None):
    """A right law's backtest miss over the band's sd: Student's t at the seed sigma's dof, normal for a prior."""
    from scipy.stats import norm, t

    return t(dof) if dof else norm


def false_block(noise: dict, max_error: float) -> float:
    """The chance that a right law's backtest misses by more than `max_error` (log loss; t at the band's dof)."""
    if noise["sigma"] <= 0:
        return 0.0
    return float(2.0 * _band_distribution(noise.get("dof")).sf(math.log1p(max_error) / noise["sigma"]))


def curve_backtest(points: pd.DataFrame, dep_dirs: dict[str, str], fit: FitSpec, backtest: dict) -> dict[str, Any]:
    """The curve method on the backtest's split: predict the largest rung's curve without it."""
    if not backtest.get("ok"):
        return {"ok": False, "reason": "no backtest"}
    target = points[(points["kind"] == "final") & (points["name"] == backtest["predict"])].iloc[0]
    train = points[points["name"].isin(backtest["fit_on"])]
    res = fit_final_law(train, fit)
    others = [n for n in points["name"].unique() if n not in backtest.get("predict_runs", [target["name"]])]
    factors = schedule_factors(points, dep_dirs, res, np.linspace(0.005, 1.0, 200), names=others)
    curve = rung_curve(dep_dirs[target["name"]])
    if factors.empty or len(curve) < 8:
        return {"ok": False, "reason": "the rungs have no loss curves (imported results?)"}
    steps = curve["step"].to_numpy()
    total = int(steps.max())
    pred, _ = law_curve(res, factors, target["params"], steps, total, int(curve["tokens"].iloc[-1] / total),
                        target["flops_per_token"])
    actual = smooth(curve["loss"].to_numpy(float), max(1, len(curve) // 25))
    second = steps >= total / 2
    err = pred / actual - 1.0
    return {"ok": True, "predict": target["name"], "fit_on": backtest["fit_on"], "factors_from": others,
            "mean_abs_rel_error_second_half": float(np.mean(np.abs(err[second]))),
            "mean_rel_error_second_half": float(np.mean(err[second]))}
