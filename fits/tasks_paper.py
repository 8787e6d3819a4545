"""The paper's own two-step (Bhagia et al. 2024), fitted as its repository fits it (allenai/OLMo-ladder,
src/fitting/step1.py, step2.py, predict.py and src/scaling/fitting_functions.py, utils.py; read, not
copied), so the method the issue compares against is reproduced, not approximated:

- step 1 data: each run's task loss as the mean of its last PAPER_AVG evaluations, at the tokens of
  its last one (the paper's `--moving_avg 5`);
- step 1 fit: L(N, D) = exp(a) / N^alpha + exp(b) / D^beta + E by L-BFGS-B on the Huber loss
  (delta 1e-3) of log(predicted) - log(actual), one start (a, b, alpha, beta, E) = (3, 6, 0.1, 0.2, 1),
  every parameter bounded below by 0;
- step 2 data: every evaluation of each run past the first ceil(PAPER_SKIP x its count) (the paper's
  `--skip_perc 0.1`, by count, not tokens), loss and accuracy each smoothed by a trailing moving average
  of PAPER_AVG evaluations (shorter at a run's start), and one helper point: loss 0 at accuracy 1;
- step 2 fit: Acc(L) = a / (1 + exp(-k (L - L0))) + b by least squares (scipy's curve_fit) with
  a in [-1, 0], L0 >= 0, k >= 0, b in [0, 1] from (chance - 1, 0.9, 3, 1); when that start warns, the
  paper's other starts unbounded, in its order.

The result is a fits.FitResult of the registered `task_chain` law (config["fit"] == "paper").
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd
from scipy.optimize import OptimizeWarning, curve_fit, minimize

from fits.errors import InputError
from fits.laws.chinchilla import PARAM_NAMES, ChinchillaLaw
from fits.laws.tasks import SigmoidLaw, TaskChainLaw
from fits.result import FitResult

PAPER_AVG = 5  # evaluations averaged: a run's last ones in step 1, a trailing window in step 2
PAPER_SKIP = 0.1  # of each run's evaluations (by count) left out of step 2
STEP1_P0 = (3.0, 6.0, 0.1, 0.2, 1.0)  # (log A, log B, alpha, beta, E), the paper's one start
HUBER_DELTA = 1e-3
STEP1_MIN_RUNS = 5
# A bootstrap resample's step 1 starts at the base optimum and stops after this many L-BFGS-B steps: the
# paper's tolerances (ftol 0, gtol 1e-10) run each of OLMo's resamples for seconds on a Huber loss that is
# near-L1, where these steps already settle the prediction's spread (measured: experiments/olmo_tasks_record.md).
BOOT_MAXITER = 200
# the paper's step-2 starts (a, L0, k, b) after the bounded first one, tried unbounded in this order
STEP2_FALLBACK_P0 = ((-0.7, 0.6, 7.0, 1.0), (-0.7, 1.4, 3.2, 1.3), (-2.7, 1.4, 3.2, 1.3), (-0.09, 0.6, 6.5, 0.1),
                     (-0.64, -0.41, 12.7, 1.05), (-2.15771768e-02, 1.39273020, -5.85129498e01, 4.54084320e-01),
                     (-1.60006552, 1.36001561, -4.95252012e02, 4.10217043e-01))


def _runs(checkpoints: pd.DataFrame, column: str):
    """Each run's evaluations with a finite `column`, in token order, runs in first-seen order."""
    ok = checkpoints[np.isfinite(checkpoints[column].to_numpy(float))]
    for _, part in ok.sort_values("tokens", kind="stable").groupby("run", sort=False):
        yield part


def paper_finals(checkpoints: pd.DataFrame, column: str) -> pd.DataFrame:
    """Per run: params, the tokens of its last evaluation, and `column` averaged over its last PAPER_AVG."""
    rows = [{"run": p["run"].iloc[0], "params": float(p["params"].iloc[-1]), "tokens": float(p["tokens"].iloc[-1]),
             column: float(p[column].to_numpy(float)[-PAPER_AVG:].mean())} for p in _runs(checkpoints, column)]
    return pd.DataFrame(rows, columns=["run", "params", "tokens", column])


def _huber_log_fit(N, D, y, start=STEP1_P0, maxiter: int = 1_000_000) -> tuple[np.ndarray, float, bool]:
    logN, logD, logy = np.log(N), np.log(D), np.log(y)

    def parts(p):
        tn, td = np.exp(p[0] - p[2] * logN), np.exp(p[1] - p[3] * logD)
        pred = tn + td + p[4]
        return pred, tn, td

    def loss_and_grad(p):
        pred, tn, td = parts(p)
        u = np.log(pred) - logy
        small = np.abs(u) < HUBER_DELTA
        loss = np.where(small, 0.5 * u ** 2, HUBER_DELTA * (np.abs(u) - 0.5 * HUBER_DELTA)).sum()
        du = np.where(small, u, HUBER_DELTA * np.sign(u)) / pred
        grad = np.array([(du * tn).sum(), (du * td).sum(), (du * tn * -logN).sum(), (du * td * -logD).sum(), du.sum()])
        return float(loss), grad

    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        res = minimize(loss_and_grad, np.array(start, float), jac=True, method="L-BFGS-B", bounds=[(0, None)] * 5,
                       tol=0.0, options={"ftol": 0.0, "gtol": 1e-10, "maxiter": maxiter})
    return res.x, float(res.fun), bool(res.success)


def fit_paper_step1(fin: pd.DataFrame, column: str) -> FitResult:
    """Step 1 on paper_finals' rows: the Chinchilla form by the paper's Huber fit of log loss."""
    use = fin[np.isfinite(fin[column].to_numpy(float))]
    if len(use) < STEP1_MIN_RUNS:
        raise InputError(f"column {column!r}: {len(use)} run final(s) but step 1 needs at least "
                         f"{STEP1_MIN_RUNS}; add rungs that record it")
    p, objective, ok = _huber_log_fit(use["params"].to_numpy(float), use["tokens"].to_numpy(float),
                                      use[column].to_numpy(float))
    law = ChinchillaLaw(E=float(p[4]), A=float(np.exp(p[0])), B=float(np.exp(p[1])), alpha=float(p[2]), beta=float(p[3]))
    return FitResult(law="chinchilla", params={k: float(getattr(law, k)) for k in PARAM_NAMES}, objective=objective,
                     n_points=len(use), n_starts=1, converged=ok,
                     config={"fit": "paper", "huber_delta": HUBER_DELTA, "finals_avg": PAPER_AVG},
                     diagnostics={"loss": "Huber (delta 1e-3) of log(predicted) - log(actual), summed"})


def _moving_average(x: np.ndarray, n: int) -> np.ndarray:
    c = np.cumsum(x, dtype=float)
    out = c / np.arange(1, len(c) + 1)
    out[n:] = (c[n:] - c[:-n]) / n
    return out


def paper_step2_points(checkpoints: pd.DataFrame, loss: str, acc: str) -> tuple[np.ndarray, np.ndarray]:
    """Every run's evaluations past the first ceil(PAPER_SKIP x count), loss and accuracy each smoothed."""
    both = checkpoints[np.isfinite(checkpoints[acc].to_numpy(float))]
    Ls, accs = [], []
    for part in _runs(both, loss):
        part = part.iloc[int(np.ceil(PAPER_SKIP * len(part))):]
        Ls.append(_moving_average(part[loss].to_numpy(float), PAPER_AVG))
        accs.append(_moving_average(part[acc].to_numpy(float), PAPER_AVG))
    return (np.concatenate(Ls), np.concatenate(accs)) if Ls else (np.array([]), np.array([]))


def _sigmoid(L, a, L0, k, b):
    return SigmoidLaw(a=a, k=k, L0=L0, b=b).predict(L)


def fit_paper_step2(L, acc, chance: float) -> FitResult:
    """Step 2: the four-parameter sigmoid with the helper point (0, 1), the paper's starts and bounds."""
    x = np.append(np.asarray(L, float), 0.0)
    y = np.append(np.asarray(acc, float), 1.0)
    tries = [((chance - 1.0, 0.9, 3.0, 1.0), ([-1.0, 0.0, 0.0, 0.0], [0.0, np.inf, np.inf, 1.0]))]
    tries += [(p0, (-np.inf, np.inf)) for p0 in STEP2_FALLBACK_P0]
    coef, used = None, 0
    for p0, bounds in tries:
        used += 1
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always", OptimizeWarning)
            try:
                coef = curve_fit(_sigmoid, x, y, p0=p0, bounds=bounds, maxfev=500_000)[0]
            except RuntimeError:  # this start did not converge: the paper goes on to its next start
                continue
        if not any(issubclass(w.category, OptimizeWarning) for w in caught):
            break
    if coef is None:
        raise InputError(f"step 2: no start of the paper's sigmoid converged on {len(x) - 1} points")
    law = SigmoidLaw(a=float(coef[0]), k=float(coef[2]), L0=float(coef[1]), b=float(coef[3]))
    resid = law.predict(x[:-1]) - y[:-1]
    return FitResult(law=law.name, params=law.params(), objective=float(0.5 * np.sum(resid ** 2)),
                     n_points=int(x.size), n_starts=used, converged=True, config={"fit": "paper", "helper": [0.0, 1.0]},
                     diagnostics={"loss": "half the sum of squared accuracy residuals (helper point left out)",
                                  "scatter": float(np.sqrt(np.mean(resid ** 2)))})


def fit_paper_two_step(checkpoints: pd.DataFrame, loss: str, acc: str, *, chance: float,
                       step1: FitResult | None = None) -> FitResult:
    """The paper's chain through the `loss` column (step 1 given, or fitted on paper_finals)."""
    s1 = fit_paper_step1(paper_finals(checkpoints, loss), loss) if step1 is None else step1
    s2 = fit_paper_step2(*paper_step2_points(checkpoints, loss, acc), chance)
    law = TaskChainLaw(step1=s1.model(), step2=s2.model())
    return FitResult(law="task_chain", params=law.params(), objective=s1.objective + s2.objective,
                     n_points=s1.n_points + s2.n_points, n_starts=s1.n_starts + s2.n_starts,
                     converged=s1.converged and s2.converged,
                     config={"loss": loss, "acc": acc, "chance": None, "fit": "paper", "skip": PAPER_SKIP,
                             "avg": PAPER_AVG},
                     diagnostics={"scatter": s2.diagnostics["scatter"], "step1": s1.to_dict(), "step2": s2.to_dict()})


def paper_bootstrap_sd(checkpoints: pd.DataFrame, result: FitResult, N: float, D: float, n_resamples: int,
                       seed: int) -> float:
    """Spread of the prediction at (N, D) over a bootstrap of the runs' step-1 points, each resample
    refitted the paper's way (step 2 held)."""
    loss = result.config["loss"]
    fin = paper_finals(checkpoints, loss)
    step2 = result.model().step2
    s1 = result.model().step1  # each resample starts at the base optimum, not the paper's far start (olmo_tasks_record.md: cost, spread)
    base = (np.log(s1.A), np.log(s1.B), s1.alpha, s1.beta, s1.E)
    rng = np.random.default_rng(seed)
    preds = []
    for _ in range(n_resamples):
        pick = rng.integers(0, len(fin), len(fin))
        if len(np.unique(pick)) < STEP1_MIN_RUNS:
            continue
        s = fin.iloc[pick]
        p, _, _ = _huber_log_fit(s["params"].to_numpy(float), s["tokens"].to_numpy(float), s[loss].to_numpy(float), base,
                                 BOOT_MAXITER)
        with np.errstate(over="ignore"):
            L = np.exp(p[0] - p[2] * np.log(N)) + np.exp(p[1] - p[3] * np.log(D)) + p[4]
        preds.append(float(step2.predict(L)))
    preds = np.asarray(preds)
    return float(np.std(preds[np.isfinite(preds)])) if preds.size else 0.0
