"""Chinchilla with one exponent for N and D (the ladder's law for a few rungs with cooldown branches)."""

from __future__ import annotations

import math

import numpy as np

from fits.chinchilla import init_grid, objective
from fits.lbfgs import multistart
from fits.result import FitResult


def fit_chinchilla_tied(N, D, L, n_polish: int = 4, starts: np.ndarray | None = None) -> FitResult:
    """Chinchilla L(N, D) = E + A/N^a + B/D^a with one exponent for N and D.

    With a handful of model sizes the N-direction alone cannot pin E, A and alpha; tying the
    exponents (Chinchilla's own fits give alpha 0.34-0.35 and beta 0.28-0.37) lets the token
    budgets of each rung's cooldown branches carry the exponent. Same objective and procedure as
    fits.chinchilla (summed Huber on log loss, batched multi-start L-BFGS).
    """
    logN, logD, logL = np.log(N), np.log(D), np.log(L)

    def fun(X, rows):
        full = np.column_stack([X[:, 0], X[:, 1], X[:, 2], X[:, 3], X[:, 3]])
        f, g = objective(full, logN, logD, logL)
        return f, np.column_stack([g[:, 0], g[:, 1], g[:, 2], g[:, 3] + g[:, 4]])

    if starts is None:
        grid = init_grid()
        starts = np.unique(grid[grid[:, 3] == grid[:, 4]][:, :4], axis=0)
    best, best_f, ok, _ = multistart(fun, starts, n_polish=min(n_polish, len(starts)))
    a, b, e, alpha = best
    params = {"E": math.exp(e), "A": math.exp(a), "B": math.exp(b), "alpha": float(alpha), "beta": float(alpha)}
    return FitResult(law="chinchilla", params=params, objective=float(best_f), n_points=len(L), n_starts=len(starts),
                     converged=bool(ok), config={"tied_exponents": True})
