"""The shape centre: the hero's latest point carried along the largest rung's loss-curve shape.

A live snapshot's other candidate centre beside the refitted curve law (ladder.analysis.follow_forecast):
loss(g) = loss_seen(a) * rung(g) / rung(a), with rung() the largest rung's points by fraction of its run.
Its error is measured the way the law's is (ladder.analysis.follow_bands): every smaller rung's shape
carried along a larger rung from its point at each 5% snapshot, scored on the larger rung's later
points, pooled by horizon per sqrt(decade) of the pair's distance. On a tiny ladder whose rungs and hero
share one schedule the shape carries the schedule's late drop, which a law refitted on a few early
points misses (experiments/follow_record.md, "One rule for a hero trained here").
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ladder.analysis.follow_bands import SNAP_GRID, rung_errors_profile


def _log_shape(points: pd.DataFrame, run: str) -> tuple[np.ndarray, np.ndarray]:
    r = points[points["run"] == run].sort_values("frac")
    return r["frac"].to_numpy(float), np.log(r["loss"].to_numpy(float))


def largest_run(points: pd.DataFrame) -> str:
    return str(points.groupby("run")["total_flops"].first().idxmax())


def carried(points: pd.DataFrame, run: str, at: float, seen_loss: float, fracs: np.ndarray) -> np.ndarray:
    """The loss at `fracs` from `seen_loss` at fraction `at`, along `run`'s shape (held past its ends)."""
    f, log_l = _log_shape(points, run)
    return seen_loss * np.exp(np.interp(fracs, f, log_l) - float(np.interp(at, f, log_l)))


def shape_errors(points: pd.DataFrame) -> pd.DataFrame:
    """Every (smaller rung's shape -> larger rung) snapshot backtest's later points: the columns of
    follow_bands.rung_horizon_errors, so the two are pooled and compared the same way."""
    from fits.matched_progress_choice import sizes

    totals = points.groupby("run")["total_flops"].first()
    groups = sizes(points)
    rows = []
    pairs = [(src, tgt) for i, group in enumerate(groups) for src in group
             for larger in groups[i + 1:] for tgt in larger]  # a larger size: never a replica of its own
    for src, tgt in pairs:
        decades = math.log10(float(totals[tgt]) / float(totals[src]))
        f, log_l = _log_shape(points, tgt)
        for at in SNAP_GRID:
            seen = f <= at + 1e-9
            if not seen.any() or seen.all():
                continue
            a = float(f[seen][-1])  # the target's latest point at the snapshot, as a hero's would be
            g = f[~seen]
            pred = np.log(carried(points, src, a, math.exp(log_l[seen][-1]), g))
            rows += [{"predict": tgt, "fit_on": src, "decades": decades, "at": a, "frac": float(x),
                      "h": math.log(x / a), "log_error": float(e)} for x, e in zip(g, pred - log_l[~seen], strict=True)]
    return pd.DataFrame(rows, columns=["predict", "fit_on", "decades", "at", "frac", "h", "log_error"])


def shape_profile(errs: pd.DataFrame) -> dict:
    """The shape rule's horizon profile (follow_bands.rung_errors_profile of shape_errors)."""
    prof = rung_errors_profile(errs)
    prof["pairs"] = int(errs[["predict", "fit_on"]].drop_duplicates().shape[0]) if not errs.empty else 0
    return prof
