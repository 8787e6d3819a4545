"""Choosing a matched-progress law by backtests on the rungs, and its calibrated band.

Backtests: with runs ordered by compute, split k trains on all but the k largest and predicts the
k-th largest over every point it recorded (leave one out: d768-d1536 predict d2048 to its 80%;
leave two out: d768-d1024 predict d1536). The candidate (law x compute axis) with the least mean
absolute error, averaged over splits, is the one used; a candidate that cannot fit a split (a
per-fraction E from 2 runs) cannot be validated there and is not chosen.

Band: the backtests' log errors at each fraction, each scaled from its own extrapolation distance
(decades of compute beyond its largest training run) to the target's, their root mean square, plus
the fit's residual noise, plus the spread that the unrecorded tail of a partial run leaves in the
prediction (multiple imputation). The scaling is linear in decades: a wrong exponent's error grows
in proportion to ln(C_target / C_largest).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.stats import norm

from fits.matched_progress import fit_per_fraction, fit_progress
from fits.result import FitResult

FitFn = Callable[[pd.DataFrame], FitResult]

CANDIDATES: dict[str, FitFn] = {
    "progress_deg1": lambda p: fit_progress(p, degree=1),
    "progress_deg2": lambda p: fit_progress(p, degree=2),
    "progress_deg3": lambda p: fit_progress(p, degree=3),
    "per_fraction_shared_E": lambda p: fit_per_fraction(p, grid="frac_snap"),
}


@dataclass(frozen=True)
class Axis:
    """A compute convention: points with flops in it, and the target's total compute in it."""

    name: str
    points: pd.DataFrame  # run, frac, frac_snap, flops, loss, total_flops
    target_flops: float


def sizes(points: pd.DataFrame, total: str = "total_flops") -> list[list[str]]:
    """The runs grouped by their total compute (column ``total``), smallest first: replicas of one size (other
    seeds, the same compute) share a group, so no backtest predicts a run from its own size (zero decades out)."""
    groups: list[list[str]] = []
    last = None
    for run, flops in points.groupby("run")[total].first().sort_values().items():
        if last is not None and math.isclose(float(flops), last, rel_tol=1e-6):
            groups[-1].append(str(run))
        else:
            groups.append([str(run)])
        last = float(flops)
    return groups


def below(groups: list[list[str]], k: int) -> list[str]:
    """Every run of the ``k`` smallest sizes."""
    return [run for group in groups[:k] for run in group]


def splits(points: pd.DataFrame) -> list[tuple[list[str], str]]:
    """(train runs, target run): leave the largest size out, then the two largest, ... down to 2 training
    sizes; each run of the left-out size is a target (a replica, another check at the same distance)."""
    groups = sizes(points)
    n = len(groups)
    return [(below(groups, n - k), target) for k in range(1, n - 1) for target in groups[n - k]]


def calibration_pairs(points: pd.DataFrame) -> list[tuple[list[str], str]]:
    """splits() first, then every other (smaller sizes, a larger target) pair from 2 training sizes up:
    more than one distance per training set, so the band's growth with distance is measured, not assumed
    (on Marin's rungs d768-d1024 -> d2048 reaches 45x, 1.65 decades, beside the splits' 5.6x and 8x)."""
    groups = sizes(points)
    first = splits(points)
    rest = [(below(groups, k), t) for k in range(2, len(groups)) for group in groups[k:] for t in group
            if (below(groups, k), t) not in first]
    return first + rest


def calibration_backtests(points: pd.DataFrame, fit_fn: FitFn) -> list[dict]:
    """backtest() on every calibration pair that can be fitted (the band's calibration set)."""
    out = []
    for train, target in calibration_pairs(points):
        try:
            out.append(backtest(points, fit_fn, train, target))
        except (ValueError, np.linalg.LinAlgError):
            continue
    return out


def backtest(points: pd.DataFrame, fit_fn: FitFn, train: list[str], target: str) -> dict:
    """Fit on `train`, predict every recorded point of `target`: errors in log loss and the distance."""
    tr = points[points["run"].isin(train)]
    tg = points[points["run"] == target].sort_values("frac")
    res = fit_fn(tr)
    pred = res.model().predict(tg["frac"], tg["flops"])
    log_err = np.log(pred) - np.log(tg["loss"].to_numpy(float))
    c_train = float(tr["total_flops"].max())
    c_target = float(tg["total_flops"].iloc[0])
    return {"fit_on": list(train), "predict": target, "decades": math.log10(c_target / c_train),
            "compute_ratio": c_target / c_train, "frac": tg["frac"].tolist(), "actual": tg["loss"].tolist(),
            "predicted": pred.tolist(), "log_error": log_err.tolist(),
            "relative_error": (np.exp(log_err) - 1).tolist(),
            "mean_abs_rel_error": float(np.mean(np.abs(np.exp(log_err) - 1))),
            "mean_rel_error": float(np.mean(np.exp(log_err) - 1)), "E": res.params.get("E"),
            "last_frac": float(tg["frac"].max())}


def sigma_extrapolation(backtests: list[dict], decades: float, fracs: np.ndarray) -> np.ndarray:
    """RMS over backtests of |log error| scaled to `decades`, at each fraction (held flat past a backtest's points)."""
    scaled, have = [], []
    for bt in backtests:
        f, e = np.asarray(bt["frac"]), np.abs(np.asarray(bt["log_error"]))
        s = np.interp(fracs, f, e) * max(decades, 0.0) / max(bt["decades"], 1e-3)
        scaled.append(s)
        # beyond a backtest's last point (a partial target) it says nothing: weight 0 there
        have.append((fracs <= f.max() + 1e-9).astype(float))
    if not scaled:
        return np.zeros_like(fracs, dtype=float)
    s, w = np.array(scaled), np.array(have)
    w_sum = w.sum(axis=0)
    # where no backtest reaches (none, when the smallest split's target is complete) all count
    w = np.where(w_sum > 0, w, 1.0)
    return np.sqrt((w * s ** 2).sum(axis=0) / w.sum(axis=0))


def missing_tail_sigma(points: pd.DataFrame, fit_fn: FitFn, complete_runs: dict[str, bool], sigma_tail: float,
                       predict: Callable[[FitResult], np.ndarray], n: int = 16, seed: int = 0) -> np.ndarray | None:
    """Spread (std of log prediction) from the unrecorded part of partial runs, by multiple imputation.

    Each partial run's missing fractions (those the complete runs recorded past its last point) are
    filled from the fit on what was recorded, shifted by one common log factor drawn from
    N(0, sigma_tail) per imputation (a missing tail is off as a whole, not point by point), refitted;
    the spread of the refits' predictions is what the missing part leaves uncertain.
    """
    partial = [r for r, ok in complete_runs.items() if not ok and r in set(points["run"])]
    if not partial:
        return None
    base = fit_fn(points).model()
    done = points[points["run"].isin([r for r, ok in complete_runs.items() if ok])]
    rng = np.random.default_rng(seed)
    preds = []
    for _ in range(n):
        fills = []
        for run in partial:
            mine = points[points["run"] == run]
            grid = np.unique(done.loc[done["frac_snap"] > mine["frac_snap"].max() + 1e-9, "frac_snap"])
            if grid.size == 0:
                continue
            total = float(mine["total_flops"].iloc[0])
            shift = math.exp(rng.normal(0.0, sigma_tail))
            fills.append(pd.DataFrame({"run": run, "frac": grid, "frac_snap": grid, "flops": total * grid,
                                       "total_flops": total, "loss": base.predict(grid, total * grid) * shift}))
        if not fills:
            return None
        preds.append(np.log(predict(fit_fn(pd.concat([points, *fills], ignore_index=True)))))
    return np.std(np.array(preds), axis=0, ddof=1)


def band(central: np.ndarray, sigma: np.ndarray, level: float) -> tuple[np.ndarray, np.ndarray]:
    z = float(norm.ppf(0.5 + level / 2))
    return central * np.exp(-z * sigma), central * np.exp(z * sigma)


def nested_coverage(backtests: list[dict], level: float, nested: bool = True) -> list[dict]:
    """Each backtest's band built only from the other backtests that never saw its target, and how
    many of its target's points it covers: the band's coverage measured on runs it never saw.

    nested: only backtests inside its training runs calibrate it (strict); else every other
    backtest whose runs exclude its target (each backtest is then scored by all the evidence that
    is blind to it)."""
    out = []
    for i, bt in enumerate(backtests):
        if nested:
            inner = [b for b in backtests[i + 1:] if set(b["fit_on"]) | {b["predict"]} <= set(bt["fit_on"])]
        else:
            inner = [b for j, b in enumerate(backtests) if j != i and bt["predict"] not in set(b["fit_on"]) | {b["predict"]}]
        if not inner:
            out.append({"predict": bt["predict"], "coverage": None,
                        "reason": "no backtest inside its training runs (too few rungs)"})
            continue
        fr = np.asarray(bt["frac"])
        sig = sigma_extrapolation(inner, bt["decades"], fr)
        lo, hi = band(np.asarray(bt["predicted"]), sig, level)
        actual = np.asarray(bt["actual"])
        inside = (actual >= lo) & (actual <= hi)
        out.append({"predict": bt["predict"], "fit_on": bt["fit_on"], "coverage": float(inside.mean()),
                    "n_points": int(inside.size), "mean_half_width": float(np.mean((hi - lo) / 2 / np.asarray(bt["predicted"]))),
                    "calibrated_on": [b["predict"] for b in inner]})
    return out


def choose(axes: list[Axis], candidates: dict[str, FitFn] | None = None) -> tuple[list[dict], dict | None]:
    """Every candidate on every axis, backtested; returns (table, best) with best = least mean MAE."""
    candidates = CANDIDATES if candidates is None else candidates
    table = []
    for axis in axes:
        for name, fn in candidates.items():
            row = {"candidate": name, "axis": axis.name, "backtests": []}
            for train, target in splits(axis.points):
                try:
                    row["backtests"].append(backtest(axis.points, fn, train, target))
                except (ValueError, np.linalg.LinAlgError) as exc:
                    row["backtests"].append({"fit_on": train, "predict": target, "error": str(exc)})
            ok = [b for b in row["backtests"] if "error" not in b]
            row["validated"] = bool(ok) and len(ok) == len(row["backtests"])
            row["score"] = float(np.mean([b["mean_abs_rel_error"] for b in ok])) if row["validated"] else None
            table.append(row)
    valid = [r for r in table if r["validated"]]
    best = min(valid, key=lambda r: r["score"]) if valid else None
    return table, best
