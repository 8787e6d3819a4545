"""The final-loss laws on the rungs (fits' compute, Chinchilla and tied Chinchilla laws), their
bootstrap over sizes, and the seeds' spread."""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

from fits.laws.registry import final_law_min_rungs, in_compute, law_entry
from ladder.analysis.runs import DOMAIN_LOSS, DOMAIN_WEIGHT, domain_columns
from ladder.spec import FitSpec, RungSpec
from ladder.spec.runs import FINAL_LAW_MIN_RUNGS

COMPUTE_LAWS = tuple(n for n in final_law_min_rungs() if in_compute(n))  # laws in C alone, fitted on final losses only


def fit_final_law(points: pd.DataFrame, fit: FitSpec, starts: np.ndarray | None = None, n_polish: int = 4):
    """The final-loss law on these points (FitResult); `starts` seeds the multi-start (bootstrap refits)."""
    import fits

    if fit.law == "compute":
        finals = points[points["kind"] == "final"]
        return fits.fit(finals[["params", "tokens", "flops", "loss"]], fit.law, pin_E=fit.pin_E, E_prior=fit.E_prior)
    if fit.law == "compute_domains":
        return fit_per_domain(points[points["kind"] == "final"])
    if fit.law == "chinchilla_tied":
        from fits.chinchilla_tied import fit_chinchilla_tied

        return fit_chinchilla_tied(points["params"].to_numpy(), points["tokens"].to_numpy(), points["loss"].to_numpy(),
                                   starts=starts, n_polish=n_polish)
    return fits.fit(points[["params", "tokens", "flops", "loss"]], "chinchilla", starts=starts)


def fit_per_domain(finals: pd.DataFrame):
    """One compute law per eval domain, summed with the mixture's weights (fits.domains)."""
    from fits.domains import fit_compute_domains

    columns = domain_columns(finals)
    if not columns or finals[columns].isna().any().any():
        raise ValueError("the compute_domains law needs every rung's eval loss per domain "
                         "(final_eval_loss_by_domain in result.json); imported finals lack it: use fit.law=compute")
    C = finals["flops"].to_numpy(float)
    domains = [c[len(DOMAIN_LOSS):] for c in columns]
    weights = {d: float(finals[DOMAIN_WEIGHT + d].iloc[0]) for d in domains if DOMAIN_WEIGHT + d in finals}
    return fit_compute_domains(C, {d: finals[DOMAIN_LOSS + d].to_numpy(float) for d in domains}, weights)


def _bootstrap_starts(base, fit: FitSpec) -> np.ndarray | None:
    """Starts for a bootstrap refit: the full fit's optimum and a few neighbours, not the whole grid."""
    if fit.law in COMPUTE_LAWS:
        return None
    p = base.params
    theta = np.array([math.log(max(p["A"], 1e-30)), math.log(max(p["B"], 1e-30)), math.log(max(p["E"], 1e-30)), p["alpha"]]
                     + ([p["beta"]] if "beta" in law_entry(fit.law).params else []))
    rng = np.random.default_rng(0)
    jitter = rng.normal(0.0, 1.0, (3, theta.size)) * np.array([2.0, 2.0, 0.5] + [0.1] * (theta.size - 3))
    return np.vstack([theta, theta + jitter])


def law_predict(result, params: float, tokens: float, flops: float) -> float:
    if in_compute(result.law):
        return float(result.model().predict(np.array([flops]))[0])
    return float(result.model().predict(np.array([params]), np.array([tokens]))[0])


def bootstrap_fits(points: pd.DataFrame, fit: FitSpec, base, n: int, seed: int = 0) -> list[dict[str, float]]:
    """Law parameters refitted on rungs resampled with replacement (n resamples).

    Resampling is over sizes (a rung, its branches and its replicas travel together), not over
    points, because a rung's branches share its model and its noise. Resamples with too few
    distinct sizes for the law are skipped.
    """
    by_size = {size: group for size, group in points.groupby("size", sort=False)}
    sizes = list(by_size)
    rng = np.random.default_rng(seed)
    starts = _bootstrap_starts(base, fit)
    # A law fitted on one point per budget (the registry's units "budgets": the compute law) depends on a
    # resample's multiset of sizes alone, bit for bit (each budget enters as its mean log loss, summed in
    # the same order whatever the sizes' order), so a repeated
    # multiset reuses its refit: 5 sizes have only 126 multisets, so a few hundred resamples repeat many
    # (the fit.json is byte-identical either way).
    refits: dict[object, dict[str, float] | None] = {}
    out = []
    for _ in range(n):
        pick = rng.choice(sizes, size=len(sizes), replace=True)
        if len(set(pick)) < min_rungs(fit):
            continue
        key = tuple(sorted(pick.tolist())) if law_entry(fit.law).units == "budgets" else object()  # object(): never reused
        if key not in refits:
            sample = pd.concat([by_size[p] for p in pick], ignore_index=True)
            try:
                refits[key] = fit_final_law(sample, fit, starts=starts, n_polish=1).params
            except ValueError:
                refits[key] = None
        if refits[key] is not None:
            out.append(dict(refits[key]))
    return out


def predict_samples(base, samples: list[dict[str, float]], targets: list[tuple[float, float, float]]) -> np.ndarray:
    """(len(samples), len(targets)) predictions of the law at each bootstrap sample's parameters."""
    out = []
    for params in samples:
        res = base.with_(params=params)
        out.append([law_predict(res, *t) for t in targets])
    return np.array(out)


def n_sizes(points: pd.DataFrame) -> int:
    return int(points.loc[points["kind"] == "final", "size"].nunique())


def seed_spread(points: pd.DataFrame) -> dict[str, Any] | None:
    """How far a size's runs on different seeds differ: (max - min) / mean of their final losses.

    This is the ladder's noise floor: a backtest error or hero miss within it is noise, not a
    wrong law. None when no size has more than one run.
    """
    finals = points[points["kind"] == "final"]
    groups = finals.groupby("size")["loss"]
    spread = (groups.max() - groups.min()) / groups.mean()
    spread = spread[groups.count() > 1]
    if spread.empty:
        return None
    return {"sizes": int(len(spread)), "median": float(spread.median()), "max": float(spread.max())}


def min_rungs(fit: FitSpec) -> int:
    return FINAL_LAW_MIN_RUNGS[fit.law]


def _targets_along(points: pd.DataFrame, flops_grid: np.ndarray, hero: RungSpec | None) -> list[tuple[float, float, float]]:
    """(N, D, C) along the ladder's own allocation (tokens per parameter of the rungs), for plots."""
    finals = points[points["kind"] == "final"]
    tpp = float(np.median(finals["tokens"] / finals["params"]))
    fpt_per_n = float(np.median(finals["flops_per_token"] / finals["params"]))
    out = []
    for c in flops_grid:
        n = math.sqrt(c / (fpt_per_n * tpp))
        out.append((n, n * tpp, float(c)))
    return out


def exactly_determined(points: pd.DataFrame, fit: FitSpec) -> str | None:
    """What the data cannot pin when the final-loss law has as many free parameters as distinct points, else None."""
    finals = points[points["kind"] == "final"]
    if fit.law in COMPUTE_LAWS:
        free = ["A", "alpha"] + ([] if fit.pin_E is not None and law_entry(fit.law).pin_E else ["E"])
        units, what = int(finals["flops"].nunique()), "compute budgets"
    else:
        free = [k for k in ("A", "B", "E", "alpha", "beta") if k in law_entry(fit.law).params]
        units, what = int(points[["params", "tokens"]].drop_duplicates().shape[0]), "(N, D) points"
    if units > len(free):
        return None
    return (f"{units} {what} for {len(free)} free parameters ({', '.join(sorted(free))}): the law passes through "
            "every point, so no residual is left to say how uncertain its parameters are (a bootstrap would give "
            "[x, x]); add a rung" + (" or pin E" if "E" in free else ""))
