"""Chinchilla L(N, D) = E + A / N^alpha + B / D^beta, fit as Epoch AI's replication did.

Sources: Hoffmann et al. 2022, "Training Compute-Optimal Large Language Models", Approach 3;
Besiroglu, Erdil, Barnett, You 2024, "Chinchilla Scaling: A replication attempt" (Epoch AI).

The fit minimises, over theta = (a, b, e, alpha, beta) with A = e^a, B = e^b, E = e^e,

    sum_i Huber_delta( LSE(a - alpha log N_i, b - beta log D_i, e) - log L_i ),  delta = 1e-3

(summed, not averaged, over points) from the paper's grid of 4,500 starting points, keeping the
best. The objective is scored at all 4,500 starts in one vectorised call, and only the best
N_DESCEND of them are descended, together, by the batched L-BFGS of fits.lbfgs with the analytic
gradient below: on this grid the descents from the rest end in the same valley or in worse ones
(tests/fits/test_chinchilla.py compares the optimum with the all-starts one on several data
sets), and descending all of them was most of `ladder fit`'s time. The best few end points are
then polished together at tight tolerances (fits.lbfgs.polish_batched: the optimum scipy's
L-BFGS-B reached, to 1e-13 in the objective, at a fraction of the time), because the objective
is ill-conditioned (B and beta trade off) and stopping early lands on a point whose
extrapolations differ by a percent.
"""

from __future__ import annotations

import itertools

import numpy as np

from fits.laws.chinchilla import ChinchillaLaw
from fits.lbfgs import best_starts, multistart
from fits.result import FitResult

HUBER_DELTA = 1e-3
N_DESCEND = 128  # starts descended, of the grid's 4,500 scored: the lowest objectives


def init_grid() -> np.ndarray:
    """The paper's 4,500 starts as (a, b, e, alpha, beta) rows (Epoch's notebook, same ranges)."""
    alpha = beta = np.arange(0.0, 2.0 + 1e-9, 0.5)
    e = np.arange(-1.0, 1.0 + 1e-9, 0.5)
    a = b = np.arange(0.0, 25.0 + 1e-9, 5.0)
    return np.array(list(itertools.product(a, b, e, alpha, beta)), dtype=np.float64)


def huber(r: np.ndarray, delta: float = HUBER_DELTA) -> np.ndarray:
    c = np.clip(r, -delta, delta)
    return c * (r - 0.5 * c)  # = r^2/2 inside [-delta, delta], delta (|r| - delta/2) outside


def objective(theta: np.ndarray, logN, logD, logL, weights=None, delta: float = HUBER_DELTA):
    """Summed Huber objective and its analytic gradient for each row of theta (K, 5).

    weights (K, n), if given, multiplies each point's term (bootstrap resamples as counts).
    The log-sum-exp is evaluated without the max shift: E = e^e is one number per row, and the
    other two terms only overflow far outside any sensible region, where the resulting inf is
    rejected by the line search. That halves the cost of an evaluation, which is what the
    4,500-start fit spends its time on.
    """
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        return _objective(theta, logN, logD, logL, weights, delta)


def _objective(theta, logN, logD, logL, weights, delta):
    a, b, e, alpha, beta = (theta[:, j, None] for j in range(5))
    p1 = np.exp(a - alpha * logN)
    p2 = np.exp(b - beta * logD)
    E = np.exp(e)
    z = p1 + p2
    z += E
    r = np.log(z)
    r -= logL
    c = np.clip(r, -delta, delta)  # dHuber/dr
    h = c * (r - 0.5 * c)
    if weights is not None:
        h *= weights
        c *= weights
    f = h.sum(axis=1)
    q = c / z  # dHuber/dz
    p1 *= q
    p2 *= q
    g = np.empty((theta.shape[0], 5))
    g[:, 0] = p1.sum(axis=1)
    g[:, 1] = p2.sum(axis=1)
    g[:, 2] = E[:, 0] * q.sum(axis=1)
    # einsum, not @: BLAS threads a (4500, n) product, and on a busy machine its threads cost more
    # than they save.
    g[:, 3] = -np.einsum("kn,n->k", p1, logN)
    g[:, 4] = -np.einsum("kn,n->k", p2, logD)
    f[~np.isfinite(f)] = np.inf
    return f, g


def _check(N, D, L) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    arrs = [np.asarray(v, dtype=np.float64).ravel() for v in (N, D, L)]
    if not (arrs[0].size == arrs[1].size == arrs[2].size):
        raise ValueError("N, D and L must have the same length")
    for name, v in zip(("N", "D", "L"), arrs, strict=True):
        if not np.all(np.isfinite(v)) or np.any(v <= 0):
            raise ValueError(f"{name} must be finite and positive")
    if arrs[0].size < 5:
        raise ValueError(f"the Chinchilla law has 5 parameters and needs at least 5 points, got {arrs[0].size}")
    return arrs[0], arrs[1], arrs[2]


def fit_chinchilla(
    N, D, L, *, starts: np.ndarray | None = None, n_descend: int | None = N_DESCEND, n_polish: int = 8,
    delta: float = HUBER_DELTA,
) -> FitResult:
    """Fit L(N, D) by Epoch's procedure; returns a FitResult with law "chinchilla".

    starts: (K, 5) rows of (log A, log B, log E, alpha, beta); default the paper's 4,500.
    n_descend: how many of the starts, lowest objective first, are descended (None: all).
    n_polish: how many of the best distinct batched optima are polished to full precision.
    """
    N, D, L = _check(N, D, L)
    logN, logD, logL = np.log(N), np.log(D), np.log(L)
    x0 = init_grid() if starts is None else np.asarray(starts, dtype=np.float64)

    def fun(X, rows):
        return objective(X, logN, logD, logL, delta=delta)

    descend = x0 if n_descend is None else best_starts(fun, x0, n_descend)
    best, best_f, ok, batch = multistart(fun, descend, n_polish=n_polish, batched_polish=True)
    law = ChinchillaLaw.from_theta(best)
    return FitResult(
        law="chinchilla",
        params=law.params(),
        objective=best_f,
        n_points=int(N.size),
        n_starts=int(x0.shape[0]),
        converged=ok,
        diagnostics={
            "loss": f"sum huber(delta={delta}) of log residuals",
            "starts_descended": int(descend.shape[0]),
            "starts_converged": int(batch.converged.sum()),
            "objective_evals": int(batch.n_evals),
            "optima": _distinct_optima(batch.x, batch.f),
        },
    )


def _distinct_optima(X, F, top: int = 20) -> list[dict]:
    """The few best distinct end points, so a reader can see how multimodal the fit was."""
    order = np.argsort(np.where(np.isfinite(F), F, np.inf))
    out: list[dict] = []
    kept: list[np.ndarray] = []
    for i in order:
        if len(out) >= top or not np.isfinite(F[i]):
            break
        if all(np.max(np.abs(X[i] - k)) > 1e-2 for k in kept):
            kept.append(X[i])
            out.append({"objective": float(F[i]), **ChinchillaLaw.from_theta(X[i]).params(),
                        "count": int(np.sum(np.max(np.abs(X - X[i]), axis=1) <= 1e-2))})
    return out
