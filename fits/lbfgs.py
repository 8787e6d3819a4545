"""Batched L-BFGS: many independent small minimisations advanced together in numpy.

Scaling-law fits are multi-start problems: thousands of starting points of a 5-7 parameter
objective. A Python loop of scipy calls spends its time in interpreter overhead; here every
start is one row of a (K, P) array, the objective and its analytic gradient are evaluated for
all active rows in one vectorised call, and the two-loop recursion and the backtracking line
search run on whole arrays. Rows that have converged drop out of the active set, so the cost
falls as starts finish.

The algorithm is textbook L-BFGS (Nocedal & Wright, Numerical Optimization, Alg. 7.4/7.5) with
an Armijo backtracking line search whose trial step is safeguarded by a quadratic fit, and the
curvature pair skipped when y.s is not positive (the line search does not enforce Wolfe).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from fits.threads import one_blas_thread

# f(X, rows) -> (f, g): X is (k, P), rows the (k,) problem indices of those rows (so a closure can
# pick per-problem data such as bootstrap weights); f is (k,), g is (k, P).
BatchObjective = Callable[[np.ndarray, np.ndarray], tuple[np.ndarray, np.ndarray]]


@dataclass(frozen=True)
class BatchResult:
    """Final state of every problem: x (K, P), f (K,), g (K, P), iterations and stop reason."""

    x: np.ndarray
    f: np.ndarray
    g: np.ndarray
    n_iter: np.ndarray
    converged: np.ndarray  # gradient or relative-decrease test met (not: iteration cap / stalled)
    n_evals: int


@one_blas_thread()
def minimize_batched(
    fun: BatchObjective,
    x0: np.ndarray,
    *,
    memory: int = 10,
    max_iter: int = 1000,
    gtol: float = 1e-9,
    ftol: float = 1e-14,
    max_backtracks: int = 40,
    c1: float = 1e-4,
) -> BatchResult:
    """Minimise K independent problems from the rows of x0 (K, P) with L-BFGS.

    A row stops when max|g| <= gtol, or when its objective decreased by less than
    ftol * max(|f|, 1) over an iteration, or when the line search cannot make progress (a
    numerically flat point; reported as converged only if the gradient is small).
    """
    x = np.array(x0, dtype=np.float64, copy=True)
    k_all, p = x.shape
    rows_all = np.arange(k_all)
    f, g = fun(x, rows_all)
    n_evals = 1
    s_hist = np.zeros((k_all, memory, p))
    y_hist = np.zeros((k_all, memory, p))
    rho = np.zeros((k_all, memory))  # 0 marks an empty slot: it then contributes nothing
    n_iter = np.zeros(k_all, dtype=np.int64)
    converged = np.zeros(k_all, dtype=bool)
    finite = np.isfinite(f) & np.all(np.isfinite(g), axis=1)
    small = np.zeros(k_all, dtype=bool)
    small[finite] = np.max(np.abs(g[finite]), axis=1) <= gtol
    converged |= small
    active = finite & ~small  # a start with a non-finite objective or gradient is left where it is

    for it in range(max_iter):
        idx = np.flatnonzero(active)
        if idx.size == 0:
            break
        xa, fa, ga = x[idx], f[idx], g[idx]
        d = _two_loop(ga, s_hist[idx], y_hist[idx], rho[idx], it % memory if it else 0)
        slope = np.einsum("kp,kp->k", d, ga)
        bad = ~(slope < 0) | ~np.all(np.isfinite(d), axis=1)
        if bad.any():  # not a descent direction: fall back to steepest descent for that row
            d[bad] = -ga[bad]
            slope[bad] = -np.einsum("kp,kp->k", ga[bad], ga[bad])
        # First step of a fresh row: its scale is unknown, so bound the move to ~1 per coordinate.
        fresh = rho[idx].sum(axis=1) == 0
        t = np.ones(idx.size)
        t[fresh] = np.minimum(1.0, 1.0 / np.maximum(np.max(np.abs(d[fresh]), axis=1), 1e-300))

        xn, fn, gn, ok, evals = _backtrack(fun, idx, xa, fa, d, slope, t, c1, max_backtracks)
        n_evals += evals

        s = xn - xa
        y = gn - ga
        sy = np.einsum("kp,kp->k", s, y)
        slot = it % memory
        good = ok & (sy > 1e-12 * np.einsum("kp,kp->k", y, y).clip(min=1e-300))
        gi = idx[good]
        s_hist[gi, slot] = s[good]
        y_hist[gi, slot] = y[good]
        rho[gi, slot] = 1.0 / sy[good]
        # A skipped pair leaves the slot's old content: clear it so the ring stays consistent.
        bi = idx[~good]
        rho[bi, slot] = 0.0
        s_hist[bi, slot] = 0.0
        y_hist[bi, slot] = 0.0

        x[idx[ok]] = xn[ok]
        f_old = fa
        f[idx[ok]] = fn[ok]
        g[idx[ok]] = gn[ok]
        n_iter[idx] += 1

        gmax = np.max(np.abs(g[idx]), axis=1)
        small_g = gmax <= gtol
        small_df = ok & ((f_old - fn) <= ftol * np.maximum(np.abs(f_old), 1.0))
        done = small_g | small_df
        converged[idx[done]] = True
        # A failed line search from steepest descent means no further progress is possible.
        stalled = ~ok & (rho[idx].sum(axis=1) == 0)
        active[idx[done | stalled]] = False
        # A failed line search with history: drop the history and retry with steepest descent.
        retry = ~ok & ~stalled
        if retry.any():
            ri = idx[retry]
            rho[ri] = 0.0
            s_hist[ri] = 0.0
            y_hist[ri] = 0.0

    return BatchResult(x=x, f=f, g=g, n_iter=n_iter, converged=converged, n_evals=n_evals)


def _two_loop(g: np.ndarray, s: np.ndarray, y: np.ndarray, rho: np.ndarray, newest: int) -> np.ndarray:
    """-H g for every row; slots are visited newest first, empty slots have rho = 0."""
    k, m, _ = s.shape
    order = [(newest - j) % m for j in range(m)]
    q = g.copy()
    alpha = np.zeros((k, m))
    for j in order:
        alpha[:, j] = rho[:, j] * np.einsum("kp,kp->k", s[:, j], q)
        q -= alpha[:, j, None] * y[:, j]
    # Initial Hessian scale from the newest valid pair (Nocedal & Wright eq. 7.20).
    gamma = np.ones(k)
    found = np.zeros(k, dtype=bool)
    for j in order:
        valid = (rho[:, j] != 0) & ~found
        if valid.any():
            yy = np.einsum("kp,kp->k", y[valid, j], y[valid, j])
            # rho > 0 guarantees y != 0, but y.y can still underflow; keep the unit scale then.
            den = rho[valid, j] * yy
            gamma[valid] = np.where(den > 0, 1.0 / np.where(den > 0, den, 1.0), 1.0)
            found |= valid
    r = gamma[:, None] * q
    for j in reversed(order):
        beta = rho[:, j] * np.einsum("kp,kp->k", y[:, j], r)
        r += (alpha[:, j] - beta)[:, None] * s[:, j]
    return -r


def _backtrack(fun, idx, x, f, d, slope, t, c1, max_backtracks):
    """Armijo backtracking for all rows at once; rows that pass stop being evaluated."""
    k = x.shape[0]
    xn = x.copy()
    fn = f.copy()
    gn = np.zeros_like(x)
    ok = np.zeros(k, dtype=bool)
    pending = np.arange(k)
    evals = 0
    for _ in range(max_backtracks):
        if pending.size == 0:
            break
        tp = t[pending]
        trial = x[pending] + tp[:, None] * d[pending]
        ft, gt = fun(trial, idx[pending])
        evals += 1
        accept = np.isfinite(ft) & (ft <= f[pending] + c1 * tp * slope[pending])
        accept &= np.all(np.isfinite(gt), axis=1)
        acc = pending[accept]
        xn[acc], fn[acc], gn[acc] = trial[accept], ft[accept], gt[accept]
        ok[acc] = True
        rej = ~accept
        # Minimiser of the quadratic through f(0), f'(0) and f(t), kept within [0.1 t, 0.5 t].
        fr = np.where(np.isfinite(ft[rej]), ft[rej], np.inf)
        denom = 2.0 * (fr - f[pending[rej]] - slope[pending[rej]] * tp[rej])
        with np.errstate(invalid="ignore", divide="ignore"):
            tq = -slope[pending[rej]] * tp[rej] ** 2 / denom
        tq = np.where(np.isfinite(tq), tq, 0.1 * tp[rej])
        t[pending[rej]] = np.clip(tq, 0.1 * tp[rej], 0.5 * tp[rej])
        pending = pending[rej]
    return xn, fn, gn, ok, evals


def polish(fun: BatchObjective, x0: np.ndarray, row: int = 0) -> tuple[np.ndarray, float, bool]:
    """One problem to near machine precision with scipy's L-BFGS-B (problem index `row`)."""
    from scipy.optimize import minimize

    rows = np.array([row])

    def fg(x):
        f, g = fun(x[None, :], rows)
        return float(f[0]), g[0]

    with one_blas_thread():  # after the import above: scipy's own OpenBLAS is loaded by then
        res = minimize(fg, np.asarray(x0, dtype=np.float64), jac=True, method="L-BFGS-B",
                       options={"maxiter": 20000, "maxcor": 20, "ftol": 1e-15, "gtol": 1e-12})
    return res.x, float(res.fun), bool(res.success)


def best_starts(fun: BatchObjective, x0: np.ndarray, k: int) -> np.ndarray:
    """The `k` starts of lowest objective, scored once, non-finite ones left out.

    For coarse grids whose starts mostly share one basin: descending from all of them repeats the
    same work, and a start whose objective overflows would only be carried along.
    """
    f0, _ = fun(x0, None)
    finite = np.flatnonzero(np.isfinite(f0))
    if finite.size == 0:
        raise ValueError("no start gave a finite objective; check the data (positive, finite values)")
    return x0[finite[np.argsort(f0[finite])[:k]]]


def polish_batched(fun: BatchObjective, X: np.ndarray) -> tuple[np.ndarray, float, bool]:
    """The rows of X, all of one problem, to near machine precision together; the best of them.

    The end `polish` reaches, without scipy.optimize: importing it costs a command line half a
    second or more, and its L-BFGS-B calls threaded BLAS on 5-vectors, far slower than this on a
    machine whose cores are busy. ftol is 0, so a row stops on its gradient, or when a step no
    longer lowers f at all (the floor of an ill-conditioned valley, in float64).
    """
    res = minimize_batched(fun, X, gtol=1e-12, ftol=0.0, max_iter=20000)
    i = int(np.argmin(np.where(np.isfinite(res.f), res.f, np.inf)))
    return res.x[i], float(res.f[i]), bool(res.converged[i])


def multistart(
    fun: BatchObjective, x0: np.ndarray, *, n_polish: int = 8, max_iter: int = 150, ftol: float = 1e-8,
    distinct: float = 1e-3, batched_polish: bool = False,
) -> tuple[np.ndarray, float, bool, BatchResult]:
    """All starts advanced together, then the best `n_polish` distinct end points polished.

    The batched phase only has to bring each start into its basin, so it runs with a loose ftol
    and an iteration cap; the polish takes the few best to full precision: with scipy's L-BFGS-B
    one at a time, or all together with `polish_batched`. Returns the best point, its objective,
    whether its polish converged, and the batched result (diagnostics).
    """
    batch = minimize_batched(fun, x0, gtol=1e-10, ftol=ftol, max_iter=max_iter)
    order = np.argsort(np.where(np.isfinite(batch.f), batch.f, np.inf))
    picked: list[np.ndarray] = []
    for i in order:
        if len(picked) >= n_polish or not np.isfinite(batch.f[i]):
            break
        if all(np.max(np.abs(batch.x[i] - p)) > distinct for p in picked):
            picked.append(batch.x[i])
    if not picked:
        raise ValueError("no start gave a finite objective; check the data (positive, finite values)")
    if batched_polish:
        return (*polish_batched(fun, np.array(picked)), batch)
    best, best_f, best_ok = picked[0], np.inf, False
    for x in picked:
        xp, fp, ok = polish(fun, x)
        if fp < best_f:
            best, best_f, best_ok = xp, fp, ok
    return best, best_f, best_ok, batch
