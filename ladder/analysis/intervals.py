"""The interval of a final-loss prediction, calibrated for extrapolation and carrying seed noise."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.stats import norm

from ladder.analysis.finals import law_predict
from ladder.analysis.seeds import MEASURED_SOURCES, propagate_final, residual_sigma


def prediction_interval(central: float, boot: np.ndarray, backtest: dict, decades: float, level: float,
                        seed: dict | None = None, model: float = 0.0) -> tuple[float, float, dict]:
    """An interval calibrated for extrapolation, in log loss.

    With the seed spread measured (on replicas, or with one seed per size as the sizes' scatter about the
    law, ladder.analysis.seeds.seed_noise) (parametric):
        sigma^2 = sigma_seed_fit^2 + (e_sys * decades / decades_bt)^2 + sigma_seed^2 + sigma_model^2
    sigma_seed_fit is every rung's luck carried through the refit to the target, at the larger of the
    replicas' sigma and the sizes' scatter about the law (ladder.analysis.seeds.residual_sigma);
    e_sys is the part of the backtest's log miss beyond its own seed noise, sqrt(e^2 - s_bt^2) (s_bt
    the backtest's seed-noise sigma, ladder.analysis.backtests.backtest_noise), since the noise part
    is the same luck sigma_seed_fit already carries; sigma_seed is the target's own run. The
    bootstrap over sizes is reported beside it, not added: it resamples five or so sizes and measures
    that same luck a second time (python -m bench intervals sets both against heroes of ladders of the
    default layout drawn from a known law; experiments/tiny_record.md has what they covered).
    Without replicas (the spread a prior, not a measurement):
        sigma^2 = sigma_boot^2 + (e_bt * decades / decades_bt)^2 + sigma_seed_fit^2 + sigma_seed^2 + sigma_model^2
    with the whole backtest miss: resampling alone captures parameter noise, not the error of
    extrapolating (on Chinchilla a plain bootstrap band covered 18% of held-out runs).
    sigma_model (`model`, see model_sigma) is the two laws' disagreement at this distance: one
    backtest cannot see a bend that starts past the largest rung, and where the whole-curve law and
    the final-loss law part ways the rungs do not say which is right.
    """
    z = float(norm.ppf(0.5 + level / 2))
    sig_boot = 0.0
    if boot.size > 10:
        lo, hi = np.percentile(np.log(boot), [50 * (1 - level), 50 * (1 + level)])
        sig_boot = float((hi - lo) / (2 * z))
    seed = seed or {}
    measured = seed.get("source") in MEASURED_SOURCES
    noise = (backtest.get("noise") or {}) if backtest.get("ok") else {}
    sig_bt = 0.0
    if backtest.get("ok"):
        e = abs(math.log1p(backtest["relative_error"]))
        if measured and noise:
            e = math.sqrt(max(e * e - float(noise["sigma"]) ** 2, 0.0))
        sig_bt = max(e, 0.005) * max(decades, 0.0) / max(backtest["decades"], 1e-3)
    sig_seed = float(seed.get("sigma") or 0.0)
    sig_seed_fit = float(seed.get("sigma_fit") or 0.0)
    summed_boot = 0.0 if measured else sig_boot
    sig = math.sqrt(summed_boot ** 2 + sig_bt ** 2 + sig_seed ** 2 + sig_seed_fit ** 2 + model ** 2)
    info = {"sigma_bootstrap": sig_boot, "bootstrap_in_sum": not measured, "sigma_extrapolation": sig_bt,
            "sigma_seed": sig_seed, "sigma_seed_fit": sig_seed_fit, "sigma_residual": seed.get("sigma_residual"),
            "sigma_model": model, "seed_source": seed.get("source"), "z": z,
            "method": ("rungs' luck carried through the refit (at the larger of the replicas' spread and the sizes' scatter "
                       "about the law) (+) the backtest's miss beyond its seed noise, scaled by extrapolation distance (+) "
                       "the target's own seed; the bootstrap over sizes reported, not added" if measured else
                       "bootstrap over rungs (+) backtest log error scaled by extrapolation distance (+) seed noise: "
                       "the target's own seed and every rung's carried through the refit")
                      + (f" ({seed['source']})" if seed.get("source") else "")
                      + (" (+) the final-loss and whole-curve laws' disagreement, scaled by extrapolation distance"
                         if model > 0 else "")}
    return central * math.exp(-z * sig), central * math.exp(z * sig), info


def model_sigma(final_law: float, curve_law: float | None, decades_hero: float) -> dict | None:
    """The two laws' disagreement at the hero, |ln(curve / final)|, as the log sigma it adds there;
    None without a whole-curve estimate. Along compute it grows with the distance past the largest
    rung in proportion (decades / decades_hero), as the backtest's miss does."""
    if curve_law is None or not (final_law > 0 and curve_law > 0):
        return None
    return {"log_ratio": math.log(curve_law / final_law), "decades": decades_hero}


def hero_disagreement(points: pd.DataFrame, result, hero, doc: dict, fit) -> tuple[tuple | None, dict | None]:
    """(curves.curve_law_final_eval's result, model_sigma's) for the hero: what the fit's band and the
    predict step's interval both widen by, computed one way. model_sigma's dict says whether it is in
    the band (fit.disagreement "band"); target_intervals widens by it only then."""
    from ladder.analysis.curves import curve_law_final_eval

    second = curve_law_final_eval(hero, doc) if hero else None
    if second is None:
        return None, None
    largest = float(points.loc[points["kind"] == "final", "flops"].max())
    final_law = law_predict(result, hero.model.params_active, hero.tokens, hero.flops)
    model = model_sigma(final_law, second[2], math.log10(hero.flops / largest))
    return second, None if model is None else {**model, "in_band": fit.disagreement == "band"}


def carried_luck(points: pd.DataFrame, fit, result, targets: list[tuple[float, float, float]],
                 seeds: dict) -> tuple[np.ndarray, float | None]:
    """(the rungs' luck carried through the refit to each target, the sizes' residual sigma): the costly
    part of target_intervals (a refit per redraw), computable before the whole-curve law is known."""
    # With replicas the rungs' luck is carried at the larger of their spread and the sizes' scatter about the law.
    resid = residual_sigma(points, result) if seeds["source"] in MEASURED_SOURCES else None
    return propagate_final(points, fit, result, targets, max(float(seeds["sigma"]), resid or 0.0)), resid


def target_intervals(points: pd.DataFrame, fit, result, backtest: dict, targets: list[tuple[float, float, float]],
                     boot: np.ndarray, seeds: dict, level: float, disagreement: dict | None = None,
                     carried: tuple[np.ndarray, float | None] | None = None) -> list[tuple[float, float, float, dict]]:
    """(central, lower, upper, info) of the law at each target (params, tokens, flops), each interval
    `prediction_interval`'s, with the rungs' luck carried through the refit to that target and the
    laws' `disagreement` (model_sigma) at its distance.

    The hero's interval and the law's band over compute (law_curve.csv, what the dashboard and the
    report draw) both come from here, so the band a user sees at the hero's compute is its interval.
    `boot` holds the bootstrap's predictions, one column per target (empty without a bootstrap);
    `carried` is carried_luck's result where it was computed ahead.
    """
    largest = float(points.loc[points["kind"] == "final", "flops"].max())
    carried, resid = carried if carried is not None else carried_luck(points, fit, result, targets, seeds)
    in_band = bool(disagreement) and disagreement.get("in_band", True)  # model_sigma's dict alone: in the band
    out = []
    for i, (n, d, c) in enumerate(targets):
        central = law_predict(result, n, d, c)
        seed = {"sigma": seeds["sigma"], "sigma_fit": float(carried[i]), "source": seeds["source"], "sigma_residual": resid}
        decades = math.log10(c / largest)
        model = 0.0
        if in_band:
            model = abs(disagreement["log_ratio"]) * max(decades, 0.0) / max(disagreement["decades"], 1e-3)
        lower, upper, info = prediction_interval(central, boot[:, i] if boot.size else boot, backtest,
                                                 decades, level, seed, model)
        if disagreement and not in_band and decades > 0:
            # The same figure as the report's line: the curve law's forecast relative to the final law's.
            info["method"] += (f"; the whole-curve law's distance ({math.expm1(disagreement['log_ratio']):+.1%} at the hero) "
                               "is reported beside the band, not in it (fit.disagreement 'report')")
        out.append((central, lower, upper, info))
    return out
