"""IsoFLOP profiles (Hoffmann et al. 2022, Approach 2).

Runs are grouped by compute budget; in each group the loss is fit by a parabola in log N, whose
vertex gives N_opt(C) (and D_opt = C / (k N_opt)) and the loss L_opt(C) at that budget. Power
laws N_opt = N0 (C/C0)^a and D_opt = D0 (C/C0)^b are least-squares lines through the vertices
in log-log space; L_opt(C) is the compute law of fits.compute fit to the vertex losses when there
are at least three budgets.
"""

from __future__ import annotations

import numpy as np

from fits.result import FitResult


def group_budgets(C: np.ndarray, tol_dex: float = 0.05) -> np.ndarray:
    """Label runs by budget: sorted log10 C split wherever consecutive runs are > tol_dex apart."""
    lc = np.log10(C)
    order = np.argsort(lc)
    labels = np.empty(C.size, dtype=np.int64)
    labels[order] = np.concatenate([[0], np.cumsum(np.diff(lc[order]) > tol_dex)])
    return labels


def fit_isoflop(N, D, L, C=None, *, budgets=None, tol_dex: float = 0.05, min_runs: int = 3,
                flops_per_param_token: float = 6.0, loss_law: bool = True) -> FitResult:
    """Approach 2 on runs (N, D, L), C = 6 N D unless given; budgets: optional group labels.
    loss_law=False skips the L_opt(C) law (a nonlinear fit; the frontier's bootstrap does without it)."""
    N, D, L = (np.asarray(v, dtype=np.float64).ravel() for v in (N, D, L))
    C = flops_per_param_token * N * D if C is None else np.asarray(C, dtype=np.float64).ravel()
    for name, v in (("N", N), ("D", D), ("L", L), ("C", C)):
        if not np.all(np.isfinite(v)) or np.any(v <= 0):
            raise ValueError(f"{name} must be finite and positive")
    labels = group_budgets(C, tol_dex) if budgets is None else np.unique(np.asarray(budgets), return_inverse=True)[1]
    vertices = _vertices(N, D, L, C, labels, min_runs, flops_per_param_token)
    if len(vertices) < 2:
        raise ValueError(f"isoFLOP needs at least 2 budgets with >= {min_runs} sizes bracketing a minimum; "
                         f"found {len(vertices)}")
    return _frontier(vertices, int(N.size), flops_per_param_token, loss_law)


def _vertices(N, D, L, C, labels, min_runs: int, flops_per_param_token: float) -> list[dict]:
    """Each budget's parabola vertex (budgets whose runs bracket no minimum are left out).

    D_opt is the law's C / (k N_opt); D_trained is the tokens a run at N_opt trains on, read off the
    budget's own runs (log D against log N), which differs when a run spends more than k N FLOPs per
    token (attention and embeddings, 12-30 N for models of 1e4 parameters)."""
    vertices = []
    for lab in np.unique(labels):
        m = labels == lab
        x = np.log(N[m])
        if np.unique(np.round(x, 6)).size < min_runs:
            continue
        c2, c1, c0 = np.polyfit(x, L[m], 2)
        if c2 <= 0:  # no minimum: the budget's runs are all on one side of the optimum
            continue
        xv = -c1 / (2 * c2)
        if not (x.min() <= xv <= x.max()):  # a vertex outside the sampled sizes is an extrapolation
            continue
        Cb = float(np.exp(np.mean(np.log(C[m]))))
        n_opt = float(np.exp(xv))
        slope, icpt = np.polyfit(x, np.log(D[m]), 1)
        vertices.append({"C": Cb, "N_opt": n_opt, "D_opt": Cb / (flops_per_param_token * n_opt),
                         "D_trained": float(np.exp(icpt + slope * xv)),
                         "L_opt": float(c0 + c1 * xv + c2 * xv * xv), "n_runs": int(m.sum()), "label": int(lab)})
    return vertices


def _frontier(vertices: list[dict], n_points: int, flops_per_param_token: float, loss_law: bool) -> FitResult:
    Cv = np.array([v["C"] for v in vertices])
    lc = np.log(Cv)
    C0 = float(np.exp(lc.mean()))
    a, logN0 = np.polyfit(lc - np.log(C0), np.log([v["N_opt"] for v in vertices]), 1)
    b, logD0 = np.polyfit(lc - np.log(C0), np.log([v["D_opt"] for v in vertices]), 1)
    params = {"a": float(a), "b": float(b), "N0": float(np.exp(logN0)), "D0": float(np.exp(logD0)), "C0": C0,
              "E": float("nan"), "A": float("nan"), "alpha": float("nan")}
    if loss_law and len(vertices) >= 3:
        from fits.compute import fit_compute

        comp = fit_compute(Cv, [v["L_opt"] for v in vertices])
        params.update(comp.params)
    resid = np.log([v["N_opt"] for v in vertices]) - (logN0 + a * (lc - np.log(C0)))
    return FitResult(
        law="isoflop", params=params, objective=float(np.sum(resid ** 2)), n_points=n_points,
        n_starts=1, converged=True,
        diagnostics={"loss": "least squares of log N_opt on log C through parabola vertices",
                     "vertices": vertices, "n_budgets": len(vertices)},
        config={"flops_per_param_token": flops_per_param_token},
    )


def parabola_residuals(N, L, labels, min_runs: int = 3) -> np.ndarray:
    """Each run's loss minus its budget's parabola in log N (NaN for budgets too small to fit one)."""
    N, L, labels = np.asarray(N, dtype=np.float64), np.asarray(L, dtype=np.float64), np.asarray(labels)
    out = np.full(L.shape, np.nan)
    for lab in np.unique(labels):
        m = labels == lab
        x = np.log(N[m])
        if np.unique(np.round(x, 6)).size < min_runs:
            continue
        out[m] = L[m] - np.polyval(np.polyfit(x, L[m], 2), x)
    return out


def bootstrap_isoflop(N, D, L, C, budgets, *, n_boot: int = 200, level: float = 0.9, seed: int = 0,
                      min_runs: int = 3, flops_per_param_token: float = 6.0) -> dict:
    """The frontier with percentile intervals at ``level`` from a residual bootstrap.

    Each budget has one run per size, so runs cannot be resampled (a resample that drops a size often
    leaves too few for a parabola). Instead the parabolas' residuals are pooled across budgets, scaled
    by sqrt(n / (n - 3 per budget)) for the fitted coefficients, and redrawn onto each run's fitted
    loss. It needs at least one budget with more sizes than its parabola's 3 coefficients.
    The exponents a, b and scales N0, D0 get intervals; the L_opt(C) law (fit on the point estimate
    only: a nonlinear fit per resample would cost more than the rest) has none, but each budget's
    L_opt does. Returns {"fit": FitResult, "intervals": {name: [lo, hi]}, "budgets": [{label, C, N_opt, D_opt,
    L_opt, with _lower/_upper}], "n_boot", "n_ok", "level", "method"}; with no residual freedom the
    intervals are NaN and "method" says why.
    """
    N, D, L, C = (np.asarray(v, dtype=np.float64).ravel() for v in (N, D, L, C))
    labels = np.unique(np.asarray(budgets), return_inverse=True)[1]
    point = fit_isoflop(N, D, L, C, budgets=labels, min_runs=min_runs, flops_per_param_token=flops_per_param_token)
    resid = parabola_residuals(N, L, labels, min_runs)
    used = np.isfinite(resid)
    dof = int(used.sum()) - 3 * np.unique(labels[used]).size
    names = ("a", "b", "N0", "D0")
    vertices = point.diagnostics["vertices"]
    samples = {k: [] for k in names}
    per_budget = {v["label"]: {"N_opt": [], "D_opt": [], "L_opt": []} for v in vertices}
    n_ok, method = 0, f"residual bootstrap, {n_boot} resamples, pooled over budgets ({dof} residual dof)"
    if dof <= 0 or n_boot <= 0:
        method = ("no interval: every budget's parabola fits its runs exactly (give a budget more than 3 sizes)"
                  if n_boot > 0 else "no interval: bootstrap = 0")
    else:
        rng = np.random.default_rng(seed)
        pool = resid[used] * np.sqrt(used.sum() / dof)
        fitted = L - np.where(used, resid, 0.0)
        for _ in range(n_boot):
            Lb = np.where(used, fitted + rng.choice(pool, size=L.size), L)
            try:
                fb = fit_isoflop(N, D, Lb, C, budgets=labels, min_runs=min_runs, loss_law=False,
                                 flops_per_param_token=flops_per_param_token)
            except ValueError:  # this draw left fewer than 2 budgets with a minimum: not a frontier
                continue
            n_ok += 1
            for k in names:
                samples[k].append(fb.params[k])
            for v in fb.diagnostics["vertices"]:
                for k in ("N_opt", "D_opt", "L_opt"):
                    per_budget[v["label"]][k].append(v[k])
    lo_q, hi_q = 50 * (1 - level), 50 * (1 + level)

    def interval(values) -> list[float]:
        values = np.asarray([v for v in values if np.isfinite(v)], dtype=np.float64)
        if values.size < 2:
            return [float("nan"), float("nan")]
        return [float(np.percentile(values, lo_q)), float(np.percentile(values, hi_q))]

    budgets_out = []
    for v in vertices:
        row = {k: v[k] for k in ("label", "C", "N_opt", "D_opt", "D_trained", "L_opt", "n_runs")}
        for k in ("N_opt", "D_opt", "L_opt"):
            row[f"{k}_lower"], row[f"{k}_upper"] = interval(per_budget[v["label"]][k])
        budgets_out.append(row)
    return {"fit": point, "intervals": {k: interval(samples[k]) for k in names}, "budgets": budgets_out,
            "n_boot": int(n_boot), "n_ok": n_ok, "level": float(level), "method": method}
