"""Whole-curve laws: loss as a function of the learning-rate schedule.

- Multi-Power Law (Luo et al. 2025, "A Multi-Power Law for Loss Curve Prediction Across Learning
  Rate Schedules", ICLR 2025):
      L(t) = L0 + A (S1(t) + S_W)^-alpha - LD(t),
      LD(t) = B sum_k (eta_{k-1} - eta_k) G(eta_k^-gamma S_k(t)),  G(x) = 1 - (C x + 1)^-beta,
      S_k(t) = sum_{tau=k..t} eta_tau.
  Here S1(t) + S_W is the running sum of lr from step 0, warmup included, and the sum over k runs
  over the decay after the peak lr.
- LR-annealing law (Tissue et al. 2024, "Scaling Law with Learning Rate Annealing"):
      L(s) = L0 + A S1^-alpha - C S2,  S1 = sum_{i<=s} eta_i,  S2 = sum_{i<=s} m_i,
      m_i = lam m_{i-1} + (eta_{i-1} - eta_i)   (lam = 0.999 by default, not fitted).

Both are fit on one or more (step, lr, loss) curves with the paper's loss: Huber (delta 1e-3) on
log loss residuals, summed over points, parameters in log space (all are positive), L-BFGS with
analytic gradients from a small grid of starts; and predict the curve of any other schedule.
"""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd

from fits.chinchilla import HUBER_DELTA
from fits.laws.curves import (
    DEFAULT_BLOCK,
    MULTIPOWER_PARAMS,
    TISSUE_PARAMS,
    mpl_logpred,
    prepare_curve,
    tissue_logpred,
)
from fits.laws.registry import min_points
from fits.lbfgs import best_starts, multistart
from fits.result import FitResult

MIN_POINTS = {law: min_points(law) for law in ("multipower", "tissue")}


def _objective_single(theta, curves, logpred_fn, delta=HUBER_DELTA):
    f = 0.0
    g = np.zeros(theta.size)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for c in curves:
            lp, J = logpred_fn(theta, c, True)
            r = lp - c.logL
            cl = np.clip(r, -delta, delta)
            f += float(np.sum(cl * (r - 0.5 * cl)))
            g += cl @ J
    if not np.isfinite(f) or not np.all(np.isfinite(g)):
        return np.inf, np.zeros_like(g)
    return f, g


def curve_starts(curves_df: list[pd.DataFrame], law: str) -> np.ndarray:
    """A small grid around a power-law fit of the constant-lr part of the data."""
    loss = np.concatenate([d["loss"].to_numpy(float) for d in curves_df])
    lmin = loss.min()
    rows = []
    if law == "multipower":
        for f0, alpha, B, C, beta, gamma in itertools.product(
            (0.75, 0.9), (0.3, 0.5), (300.0, 600.0), (1.0, 3.0), (0.5,), (0.5,)
        ):
            L0 = f0 * lmin
            A = (loss.max() - L0) * 0.1  # rough: S1 ~ 0.5 at the first logged point
            rows.append(np.log([L0, A, alpha, B, C, beta, gamma]))
    else:
        for f0, alpha, C in itertools.product((0.7, 0.85, 0.95), (0.3, 0.5, 0.8), (1.0, 30.0)):
            L0 = f0 * lmin
            A = (loss.max() - L0) * 0.1
            rows.append(np.log([L0, A, alpha, C]))
    return np.array(rows)


def fit_curves(curves, law: str = "multipower", *, names=None, warmup: str = "linear",
               block: int = DEFAULT_BLOCK, lam: float = 0.999, starts=None, n_polish: int = 4) -> FitResult:
    """Fit a whole-curve law to curves: DataFrames (or dicts) with step, lr, loss.

    Returns a FitResult (law "multipower" or "tissue"); result.model().predict(step, lr) gives
    the loss curve of any schedule, and predict_schedule(result, df) does the same for a frame.
    """
    if law not in MIN_POINTS:
        raise ValueError(f"unknown curve law {law!r}; choose multipower or tissue")
    frames = [pd.DataFrame(c) for c in curves]
    if not frames:
        raise ValueError("no curves given")
    for i, d in enumerate(frames):
        for col in ("step", "lr", "loss"):
            if col not in d.columns:
                raise ValueError(f"curve {i} has no '{col}' column")
    n_points = sum(len(d) for d in frames)
    if n_points < MIN_POINTS[law]:
        raise ValueError(f"{n_points} points; the {law} law needs at least {MIN_POINTS[law]}")
    prepared = [prepare_curve(d["step"], d["lr"], d["loss"], law=law, warmup=warmup, block=block, lam=lam)
                for d in frames]
    logpred_fn = mpl_logpred if law == "multipower" else tissue_logpred
    x0 = curve_starts(frames, law) if starts is None else np.log(np.asarray(starts, dtype=np.float64))

    def fun(X, rows):
        out = [_objective_single(x, prepared, logpred_fn) for x in X]
        return np.array([o[0] for o in out]), np.array([o[1] for o in out])

    # The best few starts are taken to convergence. The batched L-BFGS copes with the non-finite
    # objective of a trial step (a negative prediction), which scipy's line search does not; scipy
    # then polishes the best end point.
    best, best_f, best_ok, batch = multistart(fun, best_starts(fun, x0, n_polish), n_polish=1, max_iter=1000, ftol=1e-12)
    tried = batch.f
    if best is None or not np.isfinite(best_f):
        raise ValueError("no start reached a finite objective; check that losses and learning rates are positive")
    names_ = MULTIPOWER_PARAMS if law == "multipower" else TISSUE_PARAMS
    params = dict(zip(names_, (float(v) for v in np.exp(best)), strict=True))
    config = {"warmup": warmup}
    if law == "multipower":
        config["block"] = int(block)
    else:
        config["lam"] = float(lam)
    return FitResult(
        law=law, params=params, objective=float(best_f), n_points=int(n_points), n_starts=int(len(x0)),
        converged=best_ok,
        diagnostics={"loss": f"sum huber(delta={HUBER_DELTA}) of log residuals", "n_curves": len(frames),
                     "curves": list(names) if names is not None else None,
                     "start_objectives": sorted(float(v) for v in tried)[:5]},
        config=config,
    )


def predict_schedule(result: FitResult, schedule, at=None) -> np.ndarray:
    """Loss predicted by a curve fit at each row (or at `at`) of a schedule frame (step, lr)."""
    df = pd.DataFrame(schedule)
    return result.model().predict(df["step"].to_numpy(), df["lr"].to_numpy(), at=at)
