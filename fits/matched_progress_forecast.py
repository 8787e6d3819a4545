"""A target run's whole curve from the rungs' curves (a chosen matched-progress law), with its band,
and the forecast refreshed from the target's own points as it trains (snapshots).

sigma(g)^2 = sigma_extrapolation(g)^2 + sigma_fit^2 + sigma_missing(g)^2, in log loss:
  extrapolation  the backtests' errors scaled to the target's distance (fits.matched_progress_choice)
  fit            the law's RMS residual on the points it fitted (eval noise the law cannot follow)
  missing        what a partial run's unrecorded tail leaves uncertain (multiple imputation, with
                 the tail error measured by truncating each complete run where the partial one
                 stopped and predicting the rest)
"""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np
import pandas as pd

from fits.matched_progress_choice import Axis, FitFn, band, missing_tail_sigma, sigma_extrapolation
from fits.result import FitResult


def _rms_residual(res, points: pd.DataFrame) -> float:
    pred = res.model().predict(points["frac"], points["flops"])
    return float(np.sqrt(np.mean((np.log(pred) - np.log(points["loss"].to_numpy(float))) ** 2)))


def tail_error(points: pd.DataFrame, fit_fn: FitFn, cut: float, runs: list[str]) -> dict:
    """Truncate each of `runs` at fraction `cut` (the others whole), fit, predict its rest: RMS log error."""
    errs, per_run = [], {}
    for run in runs:
        keep = (points["run"] != run) | (points["frac"] <= cut + 1e-9)
        rest = points[~keep]
        if rest.empty:
            continue
        model = fit_fn(points[keep]).model()
        e = np.log(model.predict(rest["frac"], rest["flops"])) - np.log(rest["loss"].to_numpy(float))
        errs.append(e)
        per_run[run] = float(np.sqrt(np.mean(e ** 2)))
    if not errs:
        return {"cut": cut, "rms_log_error": 0.0, "per_run": {}}
    return {"cut": cut, "rms_log_error": float(np.sqrt(np.mean(np.concatenate(errs) ** 2))), "per_run": per_run}


def seed_carried(points: pd.DataFrame, fit_fn: FitFn, sigma: float, predict: Callable[[FitResult], np.ndarray],
                 n: int = 12, seed: int = 0) -> np.ndarray:
    """Std of the log prediction when each run's whole curve moves by its own seed luck, N(0, sigma), refit per draw."""
    if sigma <= 0:
        return np.zeros_like(predict(fit_fn(points)))
    rng = np.random.default_rng(seed)
    runs = points["run"].to_numpy()
    names = np.unique(runs)
    preds = []
    for _ in range(n):
        shift = dict(zip(names, rng.normal(0.0, sigma, names.size), strict=True))
        moved = points.assign(loss=points["loss"].to_numpy(float) * np.exp([shift[r] for r in runs]))
        preds.append(np.log(predict(fit_fn(moved))))
    return np.std(np.array(preds), axis=0, ddof=1)


def forecast(axis: Axis, fit_fn: FitFn, backtests: list[dict], fracs: np.ndarray, level: float,
             complete: dict[str, bool], seed_sigma: float = 0.0) -> tuple[pd.DataFrame, dict]:
    """The target's curve at `fracs` (frac, flops, loss, lower, upper) from the rungs alone, and how the band was made.

    seed_sigma: one run's seed noise in log loss (measured on replicas, or a prior): the target is
    one seed (added as is) and every rung was one (carried through the refit, seed_carried).
    """
    pts = axis.points
    res = fit_fn(pts)
    flops = axis.target_flops * fracs
    central = res.model().predict(fracs, flops)
    decades = math.log10(axis.target_flops / float(pts["total_flops"].max()))
    sig_ext = sigma_extrapolation(backtests, decades, fracs)
    sig_fit = _rms_residual(res, pts)
    partial = [r for r, ok in complete.items() if not ok and r in set(pts["run"])]
    tail = None
    sig_miss = np.zeros_like(fracs)
    if partial:
        cut = float(pts.loc[pts["run"].isin(partial), "frac"].max())
        tail = tail_error(pts, fit_fn, cut, [r for r, ok in complete.items() if ok and r in set(pts["run"])])
        miss = missing_tail_sigma(pts, fit_fn, complete, tail["rms_log_error"],
                                  lambda r: r.model().predict(fracs, flops))
        sig_miss = np.zeros_like(fracs) if miss is None else miss
    sig_seed = np.sqrt(seed_sigma ** 2 + seed_carried(pts, fit_fn, seed_sigma, lambda r: r.model().predict(fracs, flops)) ** 2)
    sigma = np.sqrt(sig_ext ** 2 + sig_fit ** 2 + sig_miss ** 2 + sig_seed ** 2)
    lower, upper = band(central, sigma, level)
    curve = pd.DataFrame({"frac": fracs, "flops": flops, "loss": central, "lower": lower, "upper": upper,
                          "sigma": sigma, "sigma_extrapolation": sig_ext, "sigma_missing": sig_miss,
                          "sigma_seed": sig_seed})
    info = {"fit": res.to_dict(), "E": res.params.get("E"), "decades": decades, "level": level,
            "sigma_fit": sig_fit, "partial_runs": partial, "tail_error": tail,
            "seed_sigma": seed_sigma,
            "method": "backtest log errors scaled linearly to the target's decades beyond the largest rung (RMS over "
                      "backtests, per fraction) (+) the fit's RMS residual (+) the spread a partial run's missing "
                      "tail leaves (multiple imputation) (+) seed noise: the target's own and the rungs' carried "
                      "through the refit"}
    return curve, info


def _refit_with_target(points: pd.DataFrame, fit_fn: FitFn, target_flops: float, target_points: pd.DataFrame,
                       at_frac: float) -> tuple[FitResult, pd.DataFrame]:
    """The law refitted with the target's points up to `at_frac` as one more run at its own compute."""
    # points before the rungs' first fraction lie outside the law's support (warmup, the early drop)
    first = float(points.groupby("run")["frac"].min().max())
    seen = target_points[(target_points["frac"] <= at_frac + 1e-12) & (target_points["frac"] >= first - 1e-3)]
    own = pd.DataFrame({"run": "__target__", "frac": seen["frac"].to_numpy(float),
                        "frac_snap": np.round(seen["frac"].to_numpy(float) * 20) / 20,
                        "flops": target_flops * seen["frac"].to_numpy(float),
                        "total_flops": target_flops, "loss": seen["loss"].to_numpy(float)})
    return fit_fn(pd.concat([points, own], ignore_index=True)), own


def snapshot_calibration(points: pd.DataFrame, fit_fn: FitFn, at_frac: float, fracs: np.ndarray,
                         pairs: list[tuple[list[str], str]]) -> dict:
    """The snapshot's error measured on the rungs: for each (smaller runs, larger target) pair, refit with
    the target's own points up to `at_frac` and predict its later points; RMS over pairs of the log error
    at each of `fracs` past `at_frac` (a pair counts where its target has points, held flat past its last).

    The calibration set for the hero's snapshot band: a rung standing in for the hero, beyond the rungs
    it is fitted with, seen up to the same fraction. Nothing of the hero enters it.
    """
    scaled, have, per_pair = [], [], []
    for train, target in pairs:
        tp = points[points["run"] == target].sort_values("frac")
        later = tp[tp["frac"] > at_frac + 1e-9]
        if later.empty or (tp["frac"] <= at_frac + 1e-9).sum() < 1:
            continue
        total = float(tp["total_flops"].iloc[0])
        try:
            res, _ = _refit_with_target(points[points["run"].isin(train)], fit_fn, total, tp[["frac", "loss"]], at_frac)
        except (ValueError, np.linalg.LinAlgError):
            continue
        e = np.abs(np.log(res.model().predict(later["frac"], total * later["frac"].to_numpy(float)))
                   - np.log(later["loss"].to_numpy(float)))
        f = later["frac"].to_numpy(float)
        scaled.append(np.interp(fracs, f, e))
        have.append((fracs <= f.max() + 1e-9).astype(float))
        per_pair.append({"fit_on": list(train), "predict": target, "rms_log_error": float(np.sqrt(np.mean(e ** 2)))})
    if not scaled:
        return {"sigma": None, "pairs": []}
    e2, w = np.array(scaled) ** 2, np.array(have)
    w = np.where(w.sum(axis=0) > 0, w, 1.0)
    return {"sigma": np.sqrt((w * e2).sum(axis=0) / w.sum(axis=0)), "pairs": per_pair}


def snapshot(axis: Axis, fit_fn: FitFn, target_points: pd.DataFrame, at_frac: float, fracs: np.ndarray,
             level: float, prior_sigma: np.ndarray, decades: float,
             pairs: list[tuple[list[str], str]] | None = None) -> tuple[pd.DataFrame, dict]:
    """Refit with the target's own points up to `at_frac` and forecast the rest of its curve.

    The target's points enter the fit as one more run at its own compute, so the law is pinned at
    its scale where it has been seen. The band past `at_frac`, with `pairs` (rung backtests, see
    snapshot_calibration): the error of the same refit on rungs standing in for the target, seen
    up to the same fraction, and the target's own scatter about the refit. Without pairs (the
    earlier rule, which covered 41-100% of the 535B hero's later points): the prior's extrapolation
    sigma rescaled to the distance from the target's own last point, the error of predicting a
    rung's rest from its points up to `at_frac` (truncation backtests) and the scatter. Never
    wider than the prior band.
    """
    res, hero = _refit_with_target(axis.points, fit_fn, axis.target_flops, target_points, at_frac)
    central = res.model().predict(fracs, axis.target_flops * fracs)
    # the target's own scatter about the refit: its points are noisier than the law (eval noise, changes mid-run)
    own = np.log(res.model().predict(hero["frac"], hero["flops"])) - np.log(hero["loss"].to_numpy(float))
    noise = float(np.sqrt(np.mean(own ** 2))) if own.size else 0.0
    tail, calib = None, None
    if pairs:
        calib = snapshot_calibration(axis.points, fit_fn, at_frac, fracs, pairs)
    if calib is not None and calib["sigma"] is not None:
        ahead = np.sqrt(calib["sigma"] ** 2 + noise ** 2)
        rule = "rung snapshot backtests (+) own scatter"
    else:
        full = axis.points.groupby("run")["frac"].max()
        tail = tail_error(pd.concat([axis.points, hero], ignore_index=True), fit_fn, at_frac,
                          [r for r, f in full.items() if f > 0.99])
        # The prior's extrapolation error, by the same linear-in-decades rule, now measured from the
        # target's own last point (log10(g / at_frac)) instead of from the largest rung (`decades`).
        dist = np.log10(np.maximum(fracs / at_frac, 1.0)) / max(decades, 1e-3)
        ahead = np.sqrt((prior_sigma * dist) ** 2 + tail["rms_log_error"] ** 2 + noise ** 2)
        rule = "prior rescaled to the distance from the last point (+) truncation backtests (+) own scatter"
    sigma = np.where(fracs > at_frac, np.minimum(prior_sigma, ahead), noise)
    if hero.empty:  # none of its points in the law's range yet: the refit is the prior, and so is its band
        sigma, rule = prior_sigma, "no own points in the law's range yet: the prior band"
    lower, upper = band(central, sigma, level)
    curve = pd.DataFrame({"frac": fracs, "flops": axis.target_flops * fracs, "loss": central, "lower": lower,
                          "upper": upper})
    return curve, {"at_frac": at_frac, "n_points": int(len(hero)), "E": res.params.get("E"), "sigma_own_points": noise,
                   "predicted_final": float(central[-1]), "lower": float(lower[-1]), "upper": float(upper[-1]),
                   "tail_error": tail, "band_rule": rule,
                   "calibration_pairs": (calib or {}).get("pairs")}
