"""Compute law L(C) = E + A C^-alpha, optionally with the asymptote E pinned.

Source: the loss-vs-compute frontier of Kaplan et al. 2020 ("Scaling Laws for Neural Language
Models", L(C_min)), with the irreducible term of Hoffmann et al. 2022; Marin pins E for its
ladder's law when too few rungs constrain it.

Fit in the same way as the Chinchilla law: Huber (delta 1e-3) on log residuals, summed, with
log-sum-exp predictions. log C is centred for conditioning (alpha log C is ~50 for real budgets,
so an unscaled A and alpha trade off almost exactly). Starts: for each trial E below min(L), the
least-squares line through log(L - E) against log C.
"""

from __future__ import annotations

import numpy as np

from fits.chinchilla import HUBER_DELTA
from fits.laws.compute import ComputeLaw
from fits.lbfgs import multistart
from fits.result import FitResult


def _objective(theta, x, logL, pin_e, weights=None, delta=HUBER_DELTA, prior=None):
    """theta rows: (a', e, alpha) or (a', alpha) when e is pinned; x = log C - centre. ``prior``: the
    config's E_prior (mean, sd, sigma): sigma^2 * (E - mean)^2 / (2 sd^2) added where e is free (prior_weight)."""
    with np.errstate(over="ignore", divide="ignore", invalid="ignore"):
        a = theta[:, 0, None]
        alpha = theta[:, -1, None]
        e = np.full_like(a, pin_e) if pin_e is not None else theta[:, 1, None]
        p1 = np.exp(a - alpha * x)
        E = np.exp(e)
        z = p1 + E
        r = np.log(z) - logL
        c = np.clip(r, -delta, delta)
        h = c * (r - 0.5 * c)
        if weights is not None:
            h = h * weights
            c = c * weights
        f = h.sum(axis=1)
        q = c / z
        p1q = p1 * q
        cols = [p1q.sum(axis=1)]
        if pin_e is None:
            cols.append(E[:, 0] * q.sum(axis=1))
        cols.append(-(p1q @ x))
        g = np.stack(cols, axis=1)
        if prior is not None and pin_e is None:
            z_e = (E[:, 0] - prior["mean"]) / prior["sd"]
            weight = prior["sigma"] ** 2
            f = f + weight * 0.5 * z_e ** 2
            g[:, 1] += weight * z_e / prior["sd"] * E[:, 0]
        f[~np.isfinite(f)] = np.inf
        return f, g


def starts(x, L, pin_E=None) -> np.ndarray:
    """One start per trial asymptote: the least-squares line of log(L - E) on centred log C."""
    fractions = [0.0, 0.3, 0.5, 0.7, 0.8, 0.9, 0.95, 0.98, 0.995] if pin_E is None else [None]
    rows = []
    for fr in fractions:
        E = pin_E if pin_E is not None else max(fr * L.min(), 1e-3 * L.min())
        y = np.log(np.maximum(L - E, 1e-6 * L.min()))
        slope, icpt = np.polyfit(x, y, 1) if np.ptp(x) > 0 else (0.0, y.mean())
        alpha = max(-slope, 1e-3)
        rows.append([icpt, alpha] if pin_E is not None else [icpt, np.log(E), alpha])
    return np.array(rows)


def fit_compute(C, L, *, pin_E: float | None = None, E_prior: tuple[float, float] | None = None,
                delta: float = HUBER_DELTA) -> FitResult:
    """Fit L(C) = E + A C^-alpha; pin_E fixes the asymptote (e.g. from a larger study); E_prior = (mean, sd)
    puts a stated normal prior on it instead (prior_weight says how it is weighed against the rungs)."""
    C = np.asarray(C, dtype=np.float64).ravel()
    L = np.asarray(L, dtype=np.float64).ravel()
    if C.size != L.size:
        raise ValueError("C and L must have the same length")
    for name, v in (("C", C), ("L", L)):
        if not np.all(np.isfinite(v)) or np.any(v <= 0):
            raise ValueError(f"{name} must be finite and positive")
    if pin_E is not None and not (0 < pin_E < L.min()):
        raise ValueError(f"pin_E={pin_E} must be positive and below the smallest loss {L.min():.4g}")
    if E_prior is not None and (pin_E is not None or not (E_prior[0] > 0 and E_prior[1] > 0)):
        raise ValueError(f"E_prior={E_prior} must be (mean > 0, sd > 0), and not given with pin_E")
    # Runs at one budget (seeds of one size) enter as their mean log loss, weighted by their count.
    # The Huber loss is linear beyond delta = 1e-3, far below seed noise, so over raw replicates every
    # curve passing between a pair's losses scores the same: the optimum was a flat valley, and where
    # the optimiser stopped in it moved a 4x prediction by 1.2% for a 1e-9 change in the data.
    budgets, index, counts = np.unique(C, return_inverse=True, return_counts=True)
    need = 2 if pin_E is not None else 3
    if budgets.size < need:
        raise ValueError(f"the compute law has {need} free parameters and needs at least {need} distinct compute "
                         f"budgets, got {budgets.size}")
    # Centre and weights depend only on the budgets and their relative counts, so a table with every
    # run repeated poses the very same problem (bit for bit) and the optimiser stops in the same place.
    centre = float(np.mean(np.log(budgets)))
    x = np.log(budgets) - centre
    logL = np.bincount(index, weights=np.log(L)) / counts
    weights = counts / counts.mean()
    pin_e = None if pin_E is None else float(np.log(pin_E))

    x0 = starts(x, np.exp(logL), pin_E)

    def run(prior, huber_delta):
        def fun(X, rows):
            return _objective(X, x, logL, pin_e, weights=weights, delta=huber_delta, prior=prior)

        return multistart(fun, x0, n_polish=4)

    best, best_f, ok, batch = run(None, delta)
    prior = None
    if E_prior is not None:
        prior = prior_weight(E_prior, x, logL, best, budgets.size)
        best, best_f, ok, batch = run(prior, prior["sigma"])
    law = law_from_theta(best, centre, pin_e)
    return FitResult(
        law="compute", params=law.params(), objective=best_f, n_points=int(C.size),
        n_starts=int(x0.shape[0]), converged=ok,
        diagnostics={"loss": f"sum huber(delta={prior_delta({'E_prior': prior}, delta):.4g}) of log residuals"
                             + ("" if prior is None else f" + the prior on E (mean {prior['mean']:g}, sd {prior['sd']:g}) times sigma^2"),
                     "objective_evals": int(batch.n_evals)},
        config={"pin_E": pin_E} | ({"E_prior": prior} if prior is not None else {}),
    )


def prior_weight(E_prior: tuple[float, float], x, logL, theta, n_budgets: int) -> dict:
    """The config's E_prior: (mean, sd) and sigma, the Huber delta the fit with the prior uses and the scale its
    weight, sigma^2, comes from.

    With a prior the fit is a posterior mode: the rungs' log losses as normal about the law with sigma
    their scatter about the free fit (its n - 3 degrees of freedom), E normal about mean with sd. Huber at
    delta = sigma is that normal likelihood, times sigma^2, for residuals within a sigma (and robust to
    one beyond), so the prior's -log density enters times sigma^2 too. (At the free fit's delta of 1e-3,
    a Laplace likelihood far narrower than the noise, a fit sticks to its kinks and a prior barely moves
    it.) Precise rungs outweigh the prior; noisy ones lean on it. sigma is fixed here, so the bootstrap's and
    the carried luck's refits weigh the prior as this fit did."""
    law = law_from_theta(theta, 0.0, None)
    r = np.log(law.E + law.A * np.exp(-law.alpha * x)) - logL
    sigma = float(np.sqrt(np.sum(r ** 2) / (n_budgets - 3))) if n_budgets > 3 else PRIOR_FALLBACK_SIGMA
    sigma = max(sigma, HUBER_DELTA)
    return {"mean": float(E_prior[0]), "sd": float(E_prior[1]), "sigma": sigma}


# A free fit through every rung (three budgets) leaves no scatter to weigh the prior by: a seed noise of 1%
# a run stands in, the order the project's records measure on its CPU ladders.
PRIOR_FALLBACK_SIGMA = 0.01


def prior_delta(config: dict, default: float = HUBER_DELTA) -> float:
    """The Huber delta a fit (or a refit of it) uses: its prior's sigma where it has one."""
    prior = config.get("E_prior")
    return float(prior["sigma"]) if prior else default


def law_from_theta(theta, centre: float, pin_e: float | None) -> ComputeLaw:
    a, alpha = float(theta[0]), float(theta[-1])
    e = pin_e if pin_e is not None else float(theta[1])
    # a' is the log-coefficient at the centre; A = exp(a' + alpha * centre) un-centres it.
    return ComputeLaw(E=float(np.exp(e)), A=float(np.exp(a + alpha * centre)), alpha=alpha)


REFIT_START = 2  # the index of fit_compute's start at E = 0.5 min(L)


def refit_compute(result: FitResult, C, L_draws) -> np.ndarray:
    """The compute law refitted on each row of ``L_draws`` (K redraws of the losses of the runs at
    compute ``C``), all K advanced together: a (K, 3) array of E, A, alpha.

    Each redraw starts from ``result``'s optimum and from fit_compute's own starts on its data (a few
    rungs pin E loosely: a redraw's best fit may lie in another basin than the fitted one's), and
    keeps its best end point.
    """
    from fits.lbfgs import minimize_batched

    C = np.asarray(C, dtype=np.float64).ravel()
    L_draws = np.atleast_2d(np.asarray(L_draws, dtype=np.float64))
    if L_draws.shape[1] != C.size:
        raise ValueError(f"L_draws has {L_draws.shape[1]} columns for {C.size} runs")
    budgets, index, counts = np.unique(C, return_inverse=True, return_counts=True)
    centre = float(np.mean(np.log(budgets)))
    x = np.log(budgets) - centre
    mean = np.zeros((C.size, budgets.size))
    mean[np.arange(C.size), index] = 1.0 / counts[index]
    logL = np.log(L_draws) @ mean  # (K, budgets): each budget's mean log loss, as fit_compute takes it
    weights = counts / counts.mean()
    pin_E = result.config.get("pin_E")
    pin_e = None if pin_E is None else float(np.log(pin_E))
    prior = result.config.get("E_prior")
    p = result.params
    a = np.log(p["A"]) - p["alpha"] * centre
    theta0 = np.array([a, p["alpha"]] if pin_e is not None else [a, np.log(p["E"]), p["alpha"]])
    # with one of fit_compute's starts, at E = half the smallest loss: on synthetic five-size ladders all
    # nine gave redraws the same predictions 4x beyond the rungs (and the same spread) at twice the time
    x0 = [np.vstack([theta0, starts(x, np.exp(row), pin_E)[REFIT_START if pin_E is None else 0]]) for row in logL]
    per = x0[0].shape[0]
    owner = np.repeat(np.arange(logL.shape[0]), per)  # the redraw each start belongs to

    def fun(X, rows):
        return _objective(X, x, logL[owner[rows]], pin_e, weights=weights, prior=prior, delta=prior_delta(result.config))

    batch = minimize_batched(fun, np.vstack(x0), gtol=1e-10)
    f = np.where(np.isfinite(batch.f), batch.f, np.inf).reshape(-1, per)
    best = batch.x.reshape(-1, per, batch.x.shape[1])[np.arange(logL.shape[0]), np.argmin(f, axis=1)]
    laws = [law_from_theta(theta, centre, pin_e) for theta in best]
    return np.array([[law.E, law.A, law.alpha] for law in laws])
