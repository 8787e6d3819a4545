"""A whole-curve law across model sizes: each parameter a power law in N.

p(N) = p_ref (N / N_ref)^q_p for the parameters in `vary`, the others shared by all sizes. With
the Multi-Power Law this is how a ladder predicts its hero's whole loss curve from its rungs'
curves: fit all rungs' (step, lr, loss) curves jointly, then evaluate the law at the hero's N on
the hero's schedule. Luo et al. 2025 report the per-size fits this generalises: L0, A, alpha and
B move with N while C, beta and gamma stay nearly constant, hence the default `vary`.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fits.curves import curve_starts, fit_curves
from fits.laws.curves import (
    DEFAULT_BLOCK,
    MULTIPOWER_PARAMS,
    TISSUE_PARAMS,
    mpl_logpred,
    prepare_curve,
    tissue_logpred,
)
from fits.lbfgs import best_starts, multistart
from fits.result import FitResult

DEFAULT_VARY = {"multipower": ("L0", "A", "alpha", "B"), "tissue": ("L0", "A", "alpha", "C")}


def fit_joint_curves(curves_by_N: dict, law: str = "multipower", *, vary=None, warmup: str = "linear",
                     block: int = DEFAULT_BLOCK, lam: float = 0.999, shrink: float = 1e-4) -> FitResult:
    """Fit {N: [curve DataFrames (step, lr, loss)]} jointly; result.model().predict(N, step, lr).

    Starts from per-size fits (fit_curves) regressed in log-log on N; needs >= 2 sizes. ``shrink``
    adds shrink * sum(q^2) over the size exponents: where the curves cannot tell an exponent (four
    short smoke rungs gave B ~ N^16.9, so the hero's curve overflowed), it stays near 0, a parameter
    shared by all sizes; on the default ladder's ten rungs it moves the hero's prediction by < 0.1%.
    """
    if len(curves_by_N) < 2:
        raise ValueError("a joint fit needs curves from at least 2 model sizes")
    names = MULTIPOWER_PARAMS if law == "multipower" else TISSUE_PARAMS
    vary = tuple(vary or DEFAULT_VARY[law])
    for v in vary:
        if v not in names:
            raise ValueError(f"vary: {v!r} is not a parameter of {law} ({', '.join(names)})")
    sizes = sorted(float(n) for n in curves_by_N)
    N_ref = float(np.exp(np.mean(np.log(sizes))))
    prepared, logn = [], []
    per_size = {}
    for N, curves in curves_by_N.items():
        frames = [pd.DataFrame(c) for c in curves]
        per_size[float(N)] = fit_curves(frames, law=law, warmup=warmup, block=block, lam=lam).params
        for d in frames:
            prepared.append(prepare_curve(d["step"], d["lr"], d["loss"], law=law, warmup=warmup, block=block, lam=lam))
            logn.append(np.log(float(N) / N_ref))
    logn = np.array(logn)
    vidx = [names.index(v) for v in vary]
    # Start: per-size log parameters regressed on log(N / N_ref).
    x_n = np.log(np.array(sizes) / N_ref)
    # A per-size fit can drive a parameter to 0 (e.g. no annealing term on a short curve); start such a
    # parameter small instead of at log(0).
    P = np.log(np.maximum(np.array([[per_size[n][k] for k in names] for n in sizes]), 1e-8))
    slope, icpt = np.polyfit(x_n, P, 1)
    x0 = np.concatenate([icpt, slope[vidx]])
    # A second start with shared parameters at their mean: guards against a noisy slope.
    x1 = np.concatenate([P.mean(axis=0), slope[vidx]])
    logpred_fn = mpl_logpred if law == "multipower" else tissue_logpred
    n_base = len(names)

    def single(th):
        f, g = 0.0, np.zeros(th.size)
        with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
            for c, ln in zip(prepared, logn, strict=True):
                local = th[:n_base].copy()
                local[vidx] += th[n_base:] * ln
                lp, J = logpred_fn(local, c, True)
                r = lp - c.logL
                cl = np.clip(r, -1e-3, 1e-3)
                f += float(np.sum(cl * (r - 0.5 * cl)))
                gl = cl @ J
                g[:n_base] += gl
                g[n_base:] += gl[vidx] * ln
        if not np.isfinite(f) or not np.all(np.isfinite(g)):
            return np.inf, np.zeros_like(g)
        q = th[n_base:]
        return f + shrink * float(q @ q), g + np.concatenate([np.zeros(n_base), 2 * shrink * q])

    def fun(X, rows):
        out = [single(x) for x in X]
        return np.array([o[0] for o in out]), np.array([o[1] for o in out])

    # On short, noisy curves the per-size fits degenerate (a B of 1e15 or an exponent of 1e6 where the
    # annealing term is unidentified), and a regression through them overflows at every size: the
    # pooled grid of fits.curves with flat slopes keeps a finite start; the best two are descended.
    pooled = curve_starts([pd.DataFrame(c) for cs in curves_by_N.values() for c in cs], law)
    candidates = np.vstack([[x0, x1], np.hstack([pooled, np.zeros((len(pooled), len(vidx)))])])
    best, best_f, ok, _ = multistart(fun, best_starts(fun, candidates, 2), n_polish=1, max_iter=1000, ftol=1e-12)
    params = {k: float(np.exp(best[i])) for i, k in enumerate(names)}
    params.update({f"{v}_exp": float(best[n_base + j]) for j, v in enumerate(vary)})
    config = {"N_ref": N_ref, "vary": list(vary), "warmup": warmup}
    config.update({"block": int(block)} if law == "multipower" else {"lam": float(lam)})
    return FitResult(
        law=f"joint_{law}", params=params, objective=float(best_f), n_points=int(sum(len(c.t) for c in prepared)),
        n_starts=int(len(candidates)), converged=ok,
        diagnostics={"loss": "sum huber(delta=0.001) of log residuals over all sizes' curves", "sizes": sizes,
                     "per_size": {str(k): v for k, v in per_size.items()}},
        config=config,
    )
