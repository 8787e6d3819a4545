"""Fitting the task-accuracy laws of fits.laws.tasks on a ladder's checkpoints.

A checkpoints table is a DataFrame with one row per evaluation of a run: `run` (its name),
`params` (N), `tokens` (D seen at that evaluation) and any metric columns, named by the caller (a
task loss, an accuracy, an intermediate loss such as C4's). A run's final is its row with the most
tokens. Step 1 (N, D) -> loss is fitted on the finals only; step 2 loss -> accuracy on every
checkpoint past the first `skip` fraction of each run (the earliest are noise about chance).
"""

from __future__ import annotations

import numpy as np
import pandas as pd
from scipy.optimize import least_squares

from fits.chinchilla import fit_chinchilla
from fits.io import InputError
from fits.laws.tasks import BoundedSigmoidLaw, SigmoidLaw, SingleStepLaw, TaskChainLaw
from fits.result import FitResult

SKIP_FRACTION = 0.1  # of each run's tokens: checkpoints before it are left out of step 2
STEP1_MIN_RUNS = 5  # the Chinchilla form's five parameters
# Step 1 descends the 64 best of Epoch's 4,500 starts and polishes the 2 best ends (fits.chinchilla's
# defaults: 128 and 8): on OLMo's task losses and C4 loss the optimum is the same to 1e-9 at a tenth of
# the time, and a task forecast fits step 1 a dozen times (backtests, the bootstrap's base).
STEP1_SEARCH = {"n_descend": 64, "n_polish": 2}


def finals(checkpoints: pd.DataFrame) -> pd.DataFrame:
    """Each run's last evaluation (its most tokens), in the order runs first appear."""
    order = {r: i for i, r in enumerate(pd.unique(checkpoints["run"]))}
    last = checkpoints.sort_values("tokens", kind="stable").groupby("run", sort=False).tail(1)
    return last.sort_values("run", key=lambda s: s.map(order), kind="stable").reset_index(drop=True)


def late_checkpoints(checkpoints: pd.DataFrame, skip: float = SKIP_FRACTION) -> pd.DataFrame:
    """Every checkpoint past `skip` of its own run's tokens."""
    frac = checkpoints["tokens"] / checkpoints.groupby("run")["tokens"].transform("max")
    return checkpoints[frac > skip]


def require_metric(checkpoints: pd.DataFrame, column: str, task: str) -> np.ndarray:
    """A metric column's finite values, or one InputError naming the column and the task."""
    if column not in checkpoints.columns:
        raise InputError(f"task {task!r}: no column {column!r} in the runs' evaluations; "
                         "import runs that record it or drop the task")
    values = checkpoints[column].to_numpy(float)
    if not np.isfinite(values).any():
        raise InputError(f"task {task!r}: column {column!r} has no values on any run; "
                         "import runs that evaluated the task or drop it")
    return values


def fit_step1(fin: pd.DataFrame, column: str) -> FitResult:
    """Step 1: loss(N, D) = E + A / N^alpha + B / D^beta on the finals (Epoch's Huber fit of log loss)."""
    use = fin[np.isfinite(fin[column].to_numpy(float))]
    if len(use) < STEP1_MIN_RUNS:
        raise InputError(f"column {column!r}: {len(use)} run final(s) but step 1 needs at least "
                         f"{STEP1_MIN_RUNS}; add rungs that record it")
    return fit_chinchilla(use["params"], use["tokens"], use[column], **STEP1_SEARCH)


def fit_sigmoid(L, acc, chance: float | None = None) -> FitResult:
    """Step 2: accuracy as a sigmoid of loss, least squares on every point given. chance=None fits
    the paper's four parameters; a chance level fixes the floor there and the ceiling at 1."""
    L, acc = np.asarray(L, float), np.asarray(acc, float)
    ok = np.isfinite(L) & np.isfinite(acc)
    L, acc = L[ok], acc[ok]
    span = float(np.ptp(L)) or 1.0
    mid = float(np.median(L))
    if chance is None:
        law_of = lambda p: SigmoidLaw(a=p[0], k=p[1], L0=p[2], b=p[3])  # noqa: E731
        lo, hi = acc.min(), acc.max()
        starts = [[-(hi - lo) * s, 4.0 / span * s, mid, hi * s] for s in (1.0, 2.0)]
        bounds = ([-1.0, 1e-6, -np.inf, 0.0], [0.0, np.inf, np.inf, 2.0])
    else:
        law_of = lambda p: BoundedSigmoidLaw(k=p[0], L0=p[1], chance=chance)  # noqa: E731
        starts = [[4.0 / span * s, mid + o * span] for s in (0.5, 2.0) for o in (-1.0, 0.0, 1.0)]
        bounds = ([1e-6, -np.inf], [np.inf, np.inf])
    best = None
    for x0 in starts:
        x0 = np.clip(x0, np.add(bounds[0], 1e-9), np.subtract(bounds[1], 1e-9))  # a start inside its bounds
        res = least_squares(lambda p: law_of(p).predict(L) - acc, x0, bounds=bounds, method="trf",
                            x_scale="jac", max_nfev=5000)
        if best is None or res.cost < best.cost:
            best = res
    law = law_of(best.x)
    resid = law.predict(L) - acc
    return FitResult(law=law.name, params=law.params(), objective=float(best.cost), n_points=int(L.size),
                     n_starts=len(starts), converged=bool(best.success),
                     config={} if chance is None else {"chance": float(chance)},
                     diagnostics={"loss": "half the sum of squared accuracy residuals",
                                  "scatter": float(np.sqrt(np.mean(resid ** 2)))})


def fit_chain(checkpoints: pd.DataFrame, loss: str, acc: str, *, chance: float | None = None,
              skip: float = SKIP_FRACTION, step1: FitResult | None = None) -> FitResult:
    """The two-step chain through the `loss` column: step 1 on the finals (or `step1`, already
    fitted on them), step 2 on the checkpoints."""
    s1 = fit_step1(finals(checkpoints), loss) if step1 is None else step1
    late = late_checkpoints(checkpoints, skip)
    s2 = fit_sigmoid(late[loss], late[acc], chance)
    law = TaskChainLaw(step1=s1.model(), step2=s2.model())
    return FitResult(law="task_chain", params=law.params(), objective=s1.objective + s2.objective,
                     n_points=s1.n_points + s2.n_points, n_starts=s1.n_starts + s2.n_starts,
                     converged=s1.converged and s2.converged,
                     config={"loss": loss, "acc": acc, "chance": chance, "skip": skip},
                     diagnostics={"scatter": s2.diagnostics["scatter"], "step1": s1.to_dict(),
                                  "step2": s2.to_dict()})


def fit_single_step(checkpoints: pd.DataFrame, acc: str, *, chance: float, start=None) -> FitResult:
    """The single-step law on the finals: least squares from the best few of a grid of exponents, or
    from `start` (a fit's diagnostics["theta"]: a bootstrap resample starts at the base optimum)."""
    fin = finals(checkpoints)
    fin = fin[np.isfinite(fin[acc].to_numpy(float))]
    if len(fin) < STEP1_MIN_RUNS + 1:
        raise InputError(f"column {acc!r}: {len(fin)} run final(s) but the single-step law needs at least "
                         f"{STEP1_MIN_RUNS + 1}; add rungs that record it")
    logN, logD = np.log(fin["params"].to_numpy(float)), np.log(fin["tokens"].to_numpy(float))
    y = fin[acc].to_numpy(float)

    def law_of(p):
        return SingleStepLaw(e=p[0], A=np.exp(p[1]), B=np.exp(p[2]), alpha=p[3], beta=p[4], chance=chance)

    def resid(p):
        return law_of(p).predict(np.exp(logN), np.exp(logD)) - y

    best = None
    starts = _single_step_starts(logN, logD, y, chance) if start is None else [list(start)]
    for x0 in starts:
        res = least_squares(resid, x0, bounds=([-20, -20, -20, 0.01, 0.01], [20, 60, 60, 2.0, 2.0]),
                            method="trf", x_scale="jac", max_nfev=5000)
        if best is None or res.cost < best.cost:
            best = res
    law = law_of(best.x)
    r = resid(best.x)
    return FitResult(law=law.name, params=law.params(), objective=float(best.cost), n_points=int(y.size),
                     n_starts=len(starts), converged=bool(best.success), config={"acc": acc, "chance": chance},
                     diagnostics={"loss": "half the sum of squared accuracy residuals",
                                  "scatter": float(np.sqrt(np.sum(r ** 2) / max(y.size - 5, 1))),
                                  "theta": [float(v) for v in best.x]})


def _single_step_starts(logN, logD, y, chance: float, keep: int = 4) -> list[list[float]]:
    """Starts in the valley: the accuracy's logit z = log((1 - p) / p), p its share of the way from
    chance to 1, is linear in (1, N^-alpha, D^-beta) for fixed exponents, so a grid of exponents with
    least squares for (e, A, B) gives starts whose sigmoid is not saturated (from a blind start the fit
    can stall where every prediction is chance and the gradient vanishes)."""
    p = np.clip((y - chance) / (1.0 - chance), 1e-3, 1 - 1e-3)
    z = np.log((1.0 - p) / p)
    scored = []
    for al in np.linspace(0.05, 0.8, 8):
        for be in np.linspace(0.05, 0.8, 8):
            X = np.stack([np.ones_like(logN), np.exp(-al * logN), np.exp(-be * logD)], axis=1)
            coef, *_ = np.linalg.lstsq(X, z, rcond=None)
            A, B = max(coef[1], 1e-6), max(coef[2], 1e-6)
            with np.errstate(over="ignore"):  # a grid point far off saturates to chance: scored, not warned
                fit = chance + (1 - chance) / (1 + np.exp(coef[0] + A * X[:, 1] + B * X[:, 2]))
            scored.append((float(np.sum((fit - y) ** 2)), [float(coef[0]), float(np.log(A)), float(np.log(B)), al, be]))
    scored.sort(key=lambda t: t[0])
    return [np.clip(s, [-20, -20, -20, 0.01, 0.01], [20, 60, 60, 2.0, 2.0]).tolist() for _, s in scored[:keep]]
