"""Matched-progress curve laws: a ladder's loss at the same fraction of each run, across sizes.

Rungs of one recipe share a schedule shape, so the loss at fraction g of every run (the same point
of the learning-rate schedule) follows a compute law of its own; a family of those laws over g is
a law for the whole curve of any larger run of the recipe. Points are a DataFrame with columns
run, frac (step / total steps), flops (compute spent up to that point) and loss.

ProgressLaw     L(g, C) = E + exp(a(u) + b(u) (ln C - ln C0)),  u = ln g, a and b polynomials of
                one degree; one E for every fraction (the asymptote does not move along the run).
PerFractionLaw  L(g, C) = E + A_g C^-alpha_g on a grid of fractions, linear in g between; one E
                (profiled, or pinned as Marin pins 1.5), one (A_g, alpha_g) per fraction.

Both fit log loss by least squares; E is estimated unless pinned.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy.optimize import least_squares, minimize_scalar

from fits.laws.matched_progress import LOG_C0
from fits.result import FitResult
from fits.threads import one_blas_thread


def _check(points: pd.DataFrame) -> pd.DataFrame:
    missing = {"run", "frac", "flops", "loss"} - set(points.columns)
    if missing:
        raise ValueError(f"progress points need columns run, frac, flops, loss; missing {sorted(missing)}")
    pts = points.dropna(subset=["frac", "flops", "loss"])
    pts = pts[(pts["frac"] > 0) & (pts["flops"] > 0) & (pts["loss"] > 0)]
    if pts["run"].nunique() < 2:
        raise ValueError(f"a progress law needs points from 2 runs, got {pts['run'].nunique()}")
    return pts


def fit_progress(points: pd.DataFrame, degree: int = 3, pin_E: float | None = None) -> FitResult:
    """ProgressLaw on these points, E estimated (bounded below the smallest loss) unless pinned.

    Multi-start over E; the polynomial coefficients start flat (the per-run mean level and a
    common exponent), which least squares leaves quickly. An optional ``weight`` column scales
    each point's residual.
    """
    pts = _check(points)
    u = np.log(pts["frac"].to_numpy(float))
    x = np.log(pts["flops"].to_numpy(float)) - LOG_C0
    logL = np.log(pts["loss"].to_numpy(float))
    w = pts["weight"].to_numpy(float) if "weight" in pts else np.ones_like(logL)
    k = degree + 1
    e_hi = float(pts["loss"].min()) - 1e-3

    def unpack(th):
        e = pin_E if pin_E is not None else th[0]
        rest = th if pin_E is not None else th[1:]
        return e, rest[:k], rest[k:]

    powers = np.vander(u, k)  # u^(k-1) ... u^0, polyval order

    def parts(th):
        e, a, b = unpack(th)
        ez = np.exp(powers @ a + (powers @ b) * x)
        return e, ez, e + ez

    def resid(th):
        _, _, total = parts(th)
        return w * (np.log(total) - logL)

    def jac(th):
        _, ez, total = parts(th)
        da = powers * (ez / total)[:, None]
        cols = [da, da * x[:, None]]
        if pin_E is None:
            cols.insert(0, (1.0 / total)[:, None])
        return w[:, None] * np.hstack(cols)

    best = None
    e_starts = [pin_E] if pin_E is not None else [s for s in (0.25, 0.5, 1.0, 1.5, 2.0) if s < e_hi]
    for e0 in e_starts or [0.5 * e_hi]:
        level = math.log(max(float(np.mean(pts["loss"])) - e0, 1e-3))
        a0 = np.r_[np.zeros(degree), level]
        b0 = np.r_[np.zeros(degree), -0.1]
        th0 = np.r_[a0, b0] if pin_E is not None else np.r_[e0, a0, b0]
        lo = np.full(th0.size, -np.inf)
        hi = np.full(th0.size, np.inf)
        if pin_E is None:
            lo[0], hi[0] = 0.0, e_hi
        try:
            with one_blas_thread():
                res = least_squares(resid, th0, jac=jac, bounds=(lo, hi), x_scale="jac")
        except ValueError:
            continue
        if np.isfinite(res.cost) and (best is None or res.cost < best.cost):
            best = res
    if best is None:
        raise ValueError("the progress law did not fit these points")
    e, a, b = unpack(best.x)
    params = {"E": float(e), **{f"a{i}": float(v) for i, v in enumerate(a)}, **{f"b{i}": float(v) for i, v in enumerate(b)}}
    return FitResult(law="progress", params=params, objective=float(best.cost), n_points=len(pts),
                     n_starts=len(e_starts) or 1, converged=bool(best.success),
                     config={"degree": degree, "pin_E": pin_E, "runs": sorted(pts["run"].unique().tolist())},
                     diagnostics={"loss": "0.5 * sum of squared log-loss residuals",
                                  "rms_log_residual": float(math.sqrt(2 * best.cost / len(pts)))})


def per_fraction_fits(points: pd.DataFrame, E: float, grid: str = "frac") -> pd.DataFrame:
    """One least-squares fit of ln(L - E) = ln A - alpha ln C per fraction with 2 or more runs."""
    return _FractionGroups(points, grid).fits(E)


class _FractionGroups:
    """Points grouped by fraction once, so a profile over E refits every fraction with array sums."""

    def __init__(self, points: pd.DataFrame, grid: str):
        self.keys, self.group = np.unique(points[grid].to_numpy(float), return_inverse=True)
        self.x = np.log(points["flops"].to_numpy(float))
        self.loss = points["loss"].to_numpy(float)
        runs = pd.factorize(points["run"])[0]
        pairs = np.unique(np.column_stack([self.group, runs]), axis=0)
        self.n_runs = np.bincount(pairs[:, 0], minlength=len(self.keys))

    def _sums(self, v):
        return np.bincount(self.group, weights=v, minlength=len(self.keys))

    def fits(self, E: float) -> pd.DataFrame:
        above = self.loss > E
        bad = self._sums((~above).astype(float)) > 0
        y = np.log(np.where(above, self.loss - E, 1.0))
        n = self._sums(np.ones_like(y))
        sx, sy = self._sums(self.x), self._sums(y)
        sxx, sxy = self._sums(self.x * self.x), self._sums(self.x * y)
        var = sxx - sx * sx / np.maximum(n, 1)
        ok = (self.n_runs >= 2) & ~bad & (var > 0)
        slope = np.where(ok, (sxy - sx * sy / np.maximum(n, 1)) / np.where(var > 0, var, 1.0), np.nan)
        icpt = (sy - slope * sx) / np.maximum(n, 1)
        return pd.DataFrame({"frac": self.keys[ok], "log_A": icpt[ok], "alpha": -slope[ok], "n_runs": self.n_runs[ok]})

    def sse(self, E: float) -> float:
        f = self.fits(E)
        if len(f) < len(self.keys):
            return math.inf
        pred = E + np.exp(f["log_A"].to_numpy()[self.group] - f["alpha"].to_numpy()[self.group] * self.x)
        return float(np.sum((np.log(pred) - np.log(self.loss)) ** 2))


def fit_per_fraction(points: pd.DataFrame, pin_E: float | None = None, grid: str = "frac") -> FitResult:
    """PerFractionLaw: E profiled (the E whose per-fraction fits leave the least log residual) unless pinned.

    ``grid`` names the column that groups points into fractions (runs must share its values, e.g.
    Marin's 5% snapping). Profiling E needs a fraction with 3 or more runs: with 2 every E fits.
    """
    pts = _check(points)
    if pin_E is None:
        if pts.groupby(grid)["run"].nunique().max() < 3:
            raise ValueError("a per-fraction fit cannot estimate E from 2 runs per fraction; pin E or add a rung")
        e_hi = float(pts["loss"].min()) - 1e-3
        groups = _FractionGroups(pts, grid)
        res = minimize_scalar(groups.sse, bounds=(0.0, e_hi), method="bounded",
                              options={"xatol": 1e-6})
        E = float(res.x)
    else:
        E = float(pin_E)
    fits_ = per_fraction_fits(pts, E, grid)
    if fits_.empty:
        raise ValueError(f"no fraction has 2 runs with loss above E={E:.3f}")
    sse = _FractionGroups(pts, grid).sse(E)
    return FitResult(law="per_fraction", params={"E": E}, objective=0.5 * sse, n_points=len(pts),
                     config={"pin_E": pin_E, "grid": grid, "fracs": fits_["frac"].tolist(),
                             "log_A": fits_["log_A"].tolist(), "alpha": fits_["alpha"].tolist(),
                             "n_runs": fits_["n_runs"].tolist(), "runs": sorted(pts["run"].unique().tolist())},
                     diagnostics={"loss": "0.5 * sum of squared log-loss residuals"})
