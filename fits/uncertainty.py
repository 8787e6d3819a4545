"""How sure a fit is: bootstrap over runs, backtests, and intervals calibrated for extrapolation.

- bootstrap: resample the runs with replacement and refit. Resamples are expressed as count
  weights on the points, so the objective of every candidate start under every resample is one
  matrix product (weights @ per-point Huber terms); each resample then refines only its best few
  candidates, and all resamples' refinements run as one batched L-BFGS. Percentile intervals for
  parameters and for any prediction follow.
- backtest: leave the largest runs out (by compute), fit the rest, predict them; nested
  backtests repeat this at decreasing compute cut-offs. Errors are relative (pred / actual - 1).
- calibrate / calibrated_interval: a bootstrap only sees parameter noise, so its band is far too
  narrow for a prediction 100x beyond the data. The nested backtests measure how the error of
  extrapolating grows with distance (decades of compute beyond the fitted runs); the band is
  widened by that error, so a prediction at d decades out gets sigma(d)^2 = sigma_boot^2 +
  sigma_0^2 + (s d)^2 in log loss, with s the RMS error per decade of the backtests and sigma_0 the
  scatter of single runs about the fit.
"""

from __future__ import annotations

from statistics import NormalDist

import numpy as np
import pandas as pd

from fits.defaults import DEFAULT_LEVEL
from fits.laws.registry import law_entry, resample_function
from fits.lbfgs import minimize_batched
from fits.result import FitResult
from fits.runs import as_runs, fit, n_of, predict_with


def resample_weights(n_points: int, n_resamples: int, seed: int = 0) -> np.ndarray:
    """(n_resamples, n_points) counts of each point in each resample (multinomial = bootstrap)."""
    rng = np.random.default_rng(seed)
    return rng.multinomial(n_points, np.full(n_points, 1.0 / n_points), size=n_resamples).astype(np.float64)


def _candidates(base: FitResult, theta_of) -> np.ndarray:
    """Starting points for each resample: the base optimum and the other distinct optima it saw."""
    rows = [theta_of(base.params)]
    for opt in base.diagnostics.get("optima", []):
        rows.append(theta_of(opt))
    return np.unique(np.round(np.array(rows), 12), axis=0)


def _batched_bootstrap(objective, candidates: np.ndarray, W: np.ndarray, n_refine: int):
    """objective(theta (K, P), weights (K, n) or None) -> (f, g). Returns (B, P) optima and (B,) f."""
    n_b = W.shape[0]
    # Per-point terms of every candidate: objective with unit weights per point, one point at a time,
    # is the same as the unweighted per-point Huber values, which the weights then combine linearly.
    n_pts = W.shape[1]
    H = np.empty((candidates.shape[0], n_pts))
    eye = np.eye(n_pts)
    for k, th in enumerate(candidates):
        H[k] = objective(np.repeat(th[None, :], n_pts, axis=0), eye)[0]
    scores = W @ H.T  # (B, K): every candidate under every resample, one matrix product
    k_ref = min(n_refine, candidates.shape[0])
    best_k = np.argsort(scores, axis=1)[:, :k_ref]
    x0 = candidates[best_k].reshape(n_b * k_ref, -1)
    Wr = np.repeat(W, k_ref, axis=0)

    def fun(X, rows):
        return objective(X, Wr[rows])

    res = minimize_batched(fun, x0, gtol=1e-10, ftol=1e-13, max_iter=1000)
    f = res.f.reshape(n_b, k_ref)
    pick = np.argmin(np.where(np.isfinite(f), f, np.inf), axis=1)
    X = res.x.reshape(n_b, k_ref, -1)[np.arange(n_b), pick]
    return X, f[np.arange(n_b), pick], res.converged.reshape(n_b, k_ref)[np.arange(n_b), pick]


def configurations(runs: pd.DataFrame, use_active: bool = True) -> tuple[np.ndarray, int]:
    """Each run's configuration index (same N and tokens: the seeds of one run) and how many there are."""
    keys = np.stack([n_of(runs, use_active), runs["tokens"].to_numpy(float)], axis=1)
    _, index = np.unique(keys, axis=0, return_inverse=True)
    index = np.asarray(index).reshape(-1)
    return index, int(index.max()) + 1


def bootstrap(runs, law: str = "chinchilla", *, n_resamples: int = 1000, seed: int = 0,
              base: FitResult | None = None, n_refine: int = 3, level: float = DEFAULT_LEVEL,
              pin_E: float | None = None, E_prior: tuple[float, float] | None = None) -> FitResult:
    """Bootstrap over configurations: the base fit with `samples` (one refit per resample) and `ci`
    (percentile interval at `level` for each parameter, default the 5th and 95th percentiles).

    A law with as many free parameters as configurations interpolates every resample, so the
    resamples all land on one curve and the interval would have zero width: that raises
    ValueError naming what the data cannot pin, rather than returning false certainty.

    The unit resampled is a configuration (one N and token count), with all its replicate seeds
    together: seeds of one configuration share its size-level luck, so resampling them one by one
    would count ten seeds of a size as ten independent sizes and narrow the interval. A table of
    single runs resamples exactly as before."""
    runs = as_runs(runs)
    if base is None:
        base = fit(runs, law, pin_E=pin_E, E_prior=E_prior)
    index, n_conf = configurations(runs, base.config.get("use_active", True))
    _require_residual_freedom(runs, base, law, n_conf)
    W_conf = resample_weights(n_conf, n_resamples, seed)
    W = W_conf[:, index]  # every run of a drawn configuration, as often as it was drawn
    batched = resample_function(law)
    if batched is not None:
        laws, conv = batched(runs, base, W, n_conf, n_refine)
    else:
        # e.g. IsoFLOP, closed form per resample: a loop of cheap least-squares fits.
        laws, conv = [], []
        for w in W:
            idx = np.repeat(np.arange(len(runs)), w.astype(int))
            try:
                laws.append(fit(runs.iloc[idx], law).params)
                conv.append(True)
            except ValueError:  # a resample that lost a whole budget cannot be fit: it is skipped
                conv.append(False)
        conv = np.array(conv)
    samples = {k: [float(p[k]) for p in laws] for k in base.params}
    lo, hi = 50 * (1 - level), 50 * (1 + level)
    ci = {k: [float(np.nanpercentile(v, lo)), float(np.nanpercentile(v, hi))] for k, v in samples.items()}
    diag = dict(base.diagnostics)
    diag["bootstrap"] = {"n_resamples": int(n_resamples), "seed": int(seed), "level": level,
                         "refined_per_resample": int(n_refine), "converged": int(np.sum(conv)),
                         "resampling": "configurations with replacement, replicate seeds together",
                         "n_configurations": n_conf}
    return base.with_(samples=samples, ci=ci, diagnostics=diag)


def _require_residual_freedom(runs: pd.DataFrame, base: FitResult, law: str, n_conf: int) -> None:
    free = [k for k in base.params if not (k == "E" and base.config.get("pin_E") is not None)]
    entry = law_entry(law)
    if entry.units == "budgets":
        units, what = int(np.unique(runs["flops"].to_numpy(float)).size), "compute budgets"
    elif entry.units == "configurations":
        units, what = n_conf, "(N, D) configurations"
    else:
        return  # e.g. isoFLOP fits per budget; a resample that loses a budget is skipped, not refit
    if units > len(free):
        return
    hint = " or pin E (--pin-E / pin_E=)" if entry.pin_E and "E" in free else ""
    raise ValueError(f"{units} {what} for the {law} law's {len(free)} free parameters ({', '.join(free)}) "
                     "leave no residual: every resample is interpolated exactly, so a bootstrap cannot "
                     f"measure how uncertain they are; add runs at more {what.split(' (')[0]}{hint}")


def resample_chinchilla(runs: pd.DataFrame, base: FitResult, W: np.ndarray, n_conf: int, n_refine: int):
    """Every resample's Chinchilla refit at once (the registry's `resample` for chinchilla)."""
    from fits import chinchilla as ch

    # Each resample's weights sum to the number of configurations, not of runs: the objective's
    # scale, and so where the optimiser stops, is then the same with one seed per configuration or
    # ten (a table of single runs is unchanged: its rows already sum to that).
    W = W * (n_conf / W.sum(axis=1, keepdims=True))
    L = runs["loss"].to_numpy(float)
    logN, logD, logL = np.log(n_of(runs, base.config.get("use_active", True))), np.log(runs["tokens"]), np.log(L)
    logN, logD = np.asarray(logN, float), np.asarray(logD, float)

    def objective(X, weights):
        return ch.objective(X, logN, logD, logL, weights)

    def theta_of(p):
        return np.array([np.log(p["A"]), np.log(p["B"]), np.log(p["E"]), p["alpha"], p["beta"]])

    X, _, conv = _batched_bootstrap(objective, _candidates(base, theta_of), W, n_refine)
    return [ch.ChinchillaLaw.from_theta(x).params() for x in X], conv


def resample_compute(runs: pd.DataFrame, base: FitResult, W: np.ndarray, n_conf: int, n_refine: int):
    """Every resample's compute-law refit at once (the registry's `resample` for compute)."""
    from fits import compute as cp

    L = runs["loss"].to_numpy(float)
    logC = np.log(runs["flops"].to_numpy(float))
    pin = base.config.get("pin_E")
    pin_e = None if pin is None else float(np.log(pin))
    # As in the fit: one point per budget at its runs' mean log loss, weighted by their count,
    # centred on the budgets' mean log compute.
    budgets, at, counts = np.unique(logC, return_inverse=True, return_counts=True)
    centre = float(budgets.mean())
    logL_budget = np.bincount(at, weights=np.log(L)) / counts
    W = W @ np.eye(budgets.size)[at]  # resampled runs per budget
    W *= budgets.size / W.sum(axis=1, keepdims=True)  # the fit's weights, relative to their mean

    def objective(X, weights):
        return cp._objective(X, budgets - centre, logL_budget, pin_e, weights, prior=base.config.get("E_prior"),
                             delta=cp.prior_delta(base.config))

    def theta_of(p):
        a = np.log(p["A"]) - p["alpha"] * centre
        return np.array([a, p["alpha"]]) if pin_e is not None else np.array([a, np.log(p["E"]), p["alpha"]])

    X, _, conv = _batched_bootstrap(objective, _candidates(base, theta_of), W, n_refine)
    return [cp.law_from_theta(x, centre, pin_e).params() for x in X], conv


def calibrated_interval(result: FitResult, points, level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """prediction_band for a result that carries an extrapolation calibration (see calibrate)."""
    if not result.calibration:
        raise ValueError("this fit has no calibration; call fits.calibrate(result, runs) first")
    return prediction_band(result, points, level)


def prediction_band(result: FitResult, runs, level: float = DEFAULT_LEVEL) -> pd.DataFrame:
    """loss (the fit), lower and upper (bootstrap percentiles at `level`) for each row of runs;
    widened for extrapolation when the result carries a calibration (see calibrate)."""
    runs = as_runs(runs)
    loss = predict_with(result.model(), result, runs)
    z = NormalDist().inv_cdf(0.5 + level / 2)
    sig_boot = np.zeros_like(loss)
    if result.samples:
        preds = np.array([predict_with(m, result, runs) for m in result.sample_models()])
        lp = np.log(preds[np.all(np.isfinite(preds), axis=1)])
        lo, hi = np.percentile(lp, [50 * (1 - level), 50 * (1 + level)], axis=0)
        sig_boot = (hi - lo) / (2 * z)  # the percentile band as an equivalent normal width
    sig = sig_boot
    cal = result.calibration
    if cal:
        d = decades_beyond(runs, cal["max_flops"])
        sig = np.sqrt(sig_boot ** 2 + cal["sigma0"] ** 2 + (cal["per_decade"] * d) ** 2)
    return pd.DataFrame({"loss": loss, "lower": loss * np.exp(-z * sig), "upper": loss * np.exp(z * sig)})


def decades_beyond(runs, max_flops: float) -> np.ndarray:
    """Extrapolation distance: log10 of compute beyond the largest fitted run (0 inside)."""
    return np.maximum(0.0, np.log10(as_runs(runs)["flops"].to_numpy(float) / max_flops))


def backtest(runs, law: str = "chinchilla", *, holdout: int | None = None, cutoffs=None,
             pin_E: float | None = None, E_prior: tuple[float, float] | None = None) -> pd.DataFrame:
    """Fit on the smaller runs, predict the larger ones; one row per (cut-off, predicted run).

    holdout: leave the `holdout` largest runs (by flops) out, one cut-off (default 1: LOO of the
    largest). cutoffs: flops values; for each, fit on runs with flops < cutoff and predict the rest.
    Columns: cutoff, n_fit, the predicted run's params/tokens/flops/loss, predicted, rel_err
    (predicted / loss - 1), decades (log10 of its flops over the largest fitted run's).
    """
    runs = as_runs(runs).sort_values("flops").reset_index(drop=True)
    if cutoffs is None:
        k = 1 if holdout is None else int(holdout)
        if not 0 < k < len(runs):
            raise ValueError(f"holdout={k} must leave at least one run to fit and one to predict")
        cutoffs = [float(runs["flops"].iloc[-k])]
    rows = []
    for cut in cutoffs:
        train, test = runs[runs["flops"] < cut], runs[runs["flops"] >= cut]
        if test.empty:
            continue
        res = fit(train, law, pin_E=pin_E, E_prior=E_prior)
        pred = predict_with(res.model(), res, test)
        out = test[["params", "tokens", "flops", "loss"]].copy()
        out.insert(0, "n_fit", len(train))
        out.insert(0, "cutoff", float(cut))
        out["predicted"] = pred
        out["rel_err"] = pred / out["loss"].to_numpy() - 1.0
        out["decades"] = np.log10(out["flops"].to_numpy() / train["flops"].max())
        rows.append(out)
    return pd.concat(rows, ignore_index=True) if rows else pd.DataFrame()


def nested_cutoffs(runs, step_dex: float = 0.5, min_fit: int = 20, max_folds: int = 4) -> list[float]:
    """Compute cut-offs every `step_dex` decades below the largest run, keeping >= min_fit runs."""
    C = as_runs(runs)["flops"].to_numpy(float)
    top = np.log10(C.max())
    out = []
    for j in range(1, max_folds + 1):
        cut = 10 ** (top - j * step_dex)
        if np.sum(C < cut) >= min_fit:
            out.append(float(cut))
    return out


def calibrate(result: FitResult, runs, law: str | None = None, *, step_dex: float = 0.5,
              min_fit: int | None = None, max_folds: int = 4) -> FitResult:
    """Attach an extrapolation-error model measured by nested backtests on `runs`.

    For each cut-off (every step_dex decades below the largest run), fit on the runs below it
    and predict those above; the RMS of log(pred/actual) / decades over all those predictions is
    `per_decade`, and the RMS in-sample log residual of `result` is `sigma0`.
    """
    runs = as_runs(runs)
    law = law or result.law
    from fits.runs import MIN_POINTS

    min_fit = min_fit or max(4 * MIN_POINTS.get(law, 5), 8)
    cuts = nested_cutoffs(runs, step_dex, min_fit, max_folds)
    if not cuts:
        raise ValueError(f"calibration needs at least {min_fit} runs more than {step_dex} decades of compute "
                         "below the largest run; add smaller runs or pass a smaller step_dex/min_fit")
    prior = result.config.get("E_prior")
    bt = backtest(runs, law, cutoffs=cuts, pin_E=result.config.get("pin_E"),
                  E_prior=(prior["mean"], prior["sd"]) if prior else None)
    lr = np.log1p(bt["rel_err"].to_numpy())
    d = np.maximum(bt["decades"].to_numpy(), 0.0)
    resid = np.log(predict_with(result.model(), result, runs) / runs["loss"].to_numpy(float))
    sigma0 = float(np.sqrt(np.mean(resid ** 2)))
    cal = {
        "method": "nested backtests: fit below each cut-off, predict above; sigma(d)^2 = "
                  "sigma_boot^2 + sigma0^2 + (per_decade * d)^2 in log loss, per_decade by maximum "
                  "likelihood on the backtests' log errors",
        "per_decade": _per_decade(lr, d, sigma0),
        "sigma0": sigma0,
        "cutoffs": cuts,
        "n_predictions": int(len(bt)),
        "mean_abs_rel_err": float(np.mean(np.abs(bt["rel_err"]))),
        "max_flops": float(runs["flops"].max()),
    }
    return result.with_(calibration=cal)


def _per_decade(log_err: np.ndarray, d: np.ndarray, sigma0: float) -> float:
    """Scale s of the normal model log_err ~ N(0, sigma0^2 + (s d)^2), by maximum likelihood.

    A ratio such as RMS(err / d) would be dominated by the predictions just past the cut-off,
    whose error is run-to-run scatter, not extrapolation; the likelihood gives those their due
    weight through sigma0.
    """
    from scipy.optimize import minimize_scalar

    def nll(log_s):
        var = sigma0 ** 2 + (np.exp(log_s) * d) ** 2 + 1e-12
        return float(np.sum(log_err ** 2 / var + np.log(var)))

    res = minimize_scalar(nll, bounds=(np.log(1e-6), np.log(10.0)), method="bounded")
    return float(np.exp(res.x))
