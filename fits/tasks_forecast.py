"""A task's accuracy forecast for a target (N, D): the method chosen by backtests on the ladder alone,
and an interval that carries both steps' uncertainty and the error of extrapolating.

Methods (fits.tasks and fits.tasks_paper fit each):
- paper_two_step: the paper's chain fitted exactly as its repository fits it (fits.tasks_paper);
- two_step: the paper's chain with this project's fits (Epoch's Huber step 1, step 2 by tokens' share),
  task loss (N, D) -> four-parameter sigmoid -> accuracy;
- two_step_bounded: the same chain with the sigmoid's floor at chance and its ceiling at 1;
- single_step: (N, D) -> accuracy in one law on the finals;
- intermediate_chain: the chain through another loss (e.g. C4's), bounded sigmoid.

Backtests: nested cuts by size, each fitting the sizes up to it and predicting the larger sizes' finals
(the largest size from the smaller ones, the two largest from the rest, and so on while a fit has enough
runs). The primary backtest, which chooses the method (lowest mean absolute error), is the farthest one
the ladder allows: the largest size's runs predicted from the smallest cut (for OLMo the 1B runs from the
190M-370M runs, 0.54 decades of N, nearest to the targets' 0.73 and 1.07). The target never enters a
choice: its (N, D) is used only to predict.

The interval at level p is prediction +- z_p sigma, clipped to [0, 1], with
sigma^2 = sd_boot^2 + scatter^2 + (per_decade * d)^2: the spread of the prediction over a bootstrap
of the runs (step 1, or the single-step law), the residual scatter of the accuracy about its fit
(step 2 on the checkpoints), and the backtests' error per decade of parameters beyond the largest
fitted size, times the target's own distance d in decades.
"""

from __future__ import annotations

from dataclasses import dataclass
from statistics import NormalDist

import numpy as np
import pandas as pd

from fits.defaults import DEFAULT_LEVEL, DEFAULT_TASK_RULE, TASK_RULES
from fits.io import InputError
from fits.result import FitResult
from fits.tasks import STEP1_MIN_RUNS, finals, fit_chain, fit_single_step, fit_step1, require_metric
from fits.tasks_paper import fit_paper_step1, fit_paper_two_step, paper_bootstrap_sd, paper_finals
from fits.tasks_weighted import method_weights, weighted_backtest, weighted_forecast

METHODS = ("paper_two_step", "two_step", "two_step_bounded", "single_step", "intermediate_chain")
BOOTSTRAP_RESAMPLES = 200


@dataclass(frozen=True)
class TaskColumns:
    """Where one task's metrics are in a checkpoints table, and its chance accuracy."""

    task: str
    loss: str  # the task loss: bits per byte of the correct continuation
    acc: str  # the accuracy
    chance: float  # 1 / number of choices
    intermediate: str | None = None  # another loss to chain through (e.g. C4's); None: not tried


def methods_for(cols: TaskColumns) -> tuple[str, ...]:
    return tuple(m for m in METHODS if m != "intermediate_chain" or cols.intermediate)


def fit_method(checkpoints: pd.DataFrame, cols: TaskColumns, method: str,
               step1: dict | None = None) -> FitResult:
    """One method fitted on the checkpoints. step1: step-1 fits by (column, runs), shared by the methods
    and the tasks that chain through one loss (C4's is the same for every task)."""
    step1 = {} if step1 is None else step1
    if method == "single_step":
        return fit_single_step(checkpoints, cols.acc, chance=cols.chance)
    runs = tuple(sorted(pd.unique(checkpoints["run"])))
    if method == "paper_two_step":
        key = ("paper", cols.loss, runs)
        if key not in step1:
            step1[key] = fit_paper_step1(paper_finals(checkpoints, cols.loss), cols.loss)
        return fit_paper_two_step(checkpoints, cols.loss, cols.acc, chance=cols.chance, step1=step1[key])
    loss = cols.intermediate if method == "intermediate_chain" else cols.loss
    if loss is None:
        raise ValueError(f"task {cols.task!r}: method {method!r} needs an intermediate loss column")
    key = (loss, runs)
    if key not in step1:
        step1[key] = fit_step1(finals(checkpoints), loss)
    chance = None if method == "two_step" else cols.chance
    return fit_chain(checkpoints, loss, cols.acc, chance=chance, step1=step1[key])


def backtest(checkpoints: pd.DataFrame, cols: TaskColumns, methods=None, step1: dict | None = None) -> pd.DataFrame:
    """Nested backtests by size: for each cut, every method fitted on the sizes up to it predicts the
    finals of the larger sizes. Rows: method, cut (largest fitted N), run, params, tokens, predicted,
    actual, error (accuracy points, predicted - actual), decades (log10 N / cut), primary."""
    methods = methods_for(cols) if methods is None else tuple(methods)
    sizes = np.unique(checkpoints["params"].to_numpy(float))
    fin = finals(checkpoints)
    rows = []
    for j in range(len(sizes) - 1, 0, -1):
        fitted = checkpoints[checkpoints["params"] <= sizes[j - 1]]
        if j < 2 or finals(fitted)[cols.acc].notna().sum() < STEP1_MIN_RUNS + 1:
            break
        held = fin[fin["params"] > sizes[j - 1]]
        held = held[np.isfinite(held[cols.acc].to_numpy(float))]
        shared = {} if step1 is None else step1
        for method in methods:
            pred = fit_method(fitted, cols, method, shared).predict(held["params"], held["tokens"])
            for (_, r), p in zip(held.iterrows(), np.atleast_1d(pred), strict=True):
                rows.append({"method": method, "cut": float(sizes[j - 1]), "run": r["run"],
                             "params": float(r["params"]), "tokens": float(r["tokens"]),
                             "predicted": float(p), "actual": float(r[cols.acc]),
                             "error": 100.0 * (float(p) - float(r[cols.acc])),
                             "decades": float(np.log10(r["params"] / sizes[j - 1])),
                             "primary": False})
    bt = pd.DataFrame(rows, columns=["method", "cut", "run", "params", "tokens", "predicted", "actual",
                                     "error", "decades", "primary"])
    if len(bt):  # the farthest backtest: the smallest cut's predictions of the largest size
        bt["primary"] = (bt["cut"] == bt["cut"].min()) & (bt["params"] == bt["params"].max())
    return bt


def choose(bt: pd.DataFrame, methods) -> tuple[str, dict[str, float]]:
    """The method with the lowest mean absolute error on the primary backtest (ties: the earlier
    method of METHODS), and every method's figure."""
    primary = bt[bt["primary"].astype(bool)]
    mae = {m: float(primary.loc[primary["method"] == m, "error"].abs().mean()) if len(primary) else float("nan")
           for m in methods}
    scored = [m for m in methods if np.isfinite(mae[m])]
    if not scored:
        raise InputError("no backtest: the ladder needs at least three sizes, the smaller two with "
                         f"{STEP1_MIN_RUNS + 1} runs or more, to choose a task method")
    return min(scored, key=lambda m: mae[m]), mae


def per_decade(bt: pd.DataFrame) -> float:
    """RMS backtest error (accuracy as a fraction, like the forecast) per decade of parameters
    beyond the largest fitted size."""
    use = bt[bt["decades"] > 0]
    return float(np.sqrt(np.mean((use["error"] / 100.0 / use["decades"]) ** 2))) if len(use) else 0.0


def backtest_coverage(bt: pd.DataFrame, scatter: float, level: float) -> dict:
    """How many backtest predictions the interval holds, each cut's per-decade error measured on the
    other cuts' predictions (so no prediction widens its own band); one cut alone uses its own."""
    z = NormalDist().inv_cdf(0.5 + level / 2)
    held, total = 0, 0
    for cut, part in bt.groupby("cut"):
        others = bt[bt["cut"] != cut]
        pdec = per_decade(others if len(others) else part)
        sigma = np.sqrt(scatter ** 2 + (pdec * part["decades"].to_numpy()) ** 2)
        held += int(np.sum(np.abs(part["error"].to_numpy()) / 100.0 <= z * sigma))
        total += len(part)
    return {"held": held, "of": total, "level": level,
            "note": "scatter and the other cuts' error per decade (no bootstrap term)"}


def _bootstrap_sd(checkpoints: pd.DataFrame, cols: TaskColumns, method: str, result: FitResult,
                  N: float, D: float, n_resamples: int, seed: int) -> float:
    """Spread of the prediction at (N, D) over a bootstrap of the runs' finals: step 1 refitted per
    resample (step 2 held), or the single-step law refitted per resample."""
    fin = finals(checkpoints)
    rng = np.random.default_rng(seed)
    if method == "paper_two_step":
        return paper_bootstrap_sd(checkpoints, result, N, D, n_resamples, seed)
    if method == "single_step":
        preds = []
        runs = fin["run"].to_numpy()
        for _ in range(n_resamples):
            pick = rng.integers(0, len(runs), len(runs))
            if len(np.unique(pick)) < STEP1_MIN_RUNS + 1:
                continue
            # a run drawn twice counts twice: its final is repeated under a new run name
            draws = [fin.iloc[[i]].assign(run=f"{runs[i]}#{k}") for k, i in enumerate(pick)]
            refit = fit_single_step(pd.concat(draws), cols.acc, chance=cols.chance, start=result.diagnostics["theta"])
            preds.append(float(refit.predict(N, D)))
        return float(np.std(preds)) if preds else 0.0
    from fits.uncertainty import bootstrap

    step1 = FitResult.from_dict(result.diagnostics["step1"])
    loss = result.config["loss"]
    use = fin[np.isfinite(fin[loss].to_numpy(float))]
    table = pd.DataFrame({"params": use["params"].to_numpy(float), "tokens": use["tokens"].to_numpy(float),
                          "loss": use[loss].to_numpy(float)})
    step2 = result.model().step2
    with np.errstate(over="ignore", invalid="ignore"):  # a resample that ran off to inf is dropped below
        boot = bootstrap(table, "chinchilla", n_resamples=n_resamples, seed=seed, base=step1)
        acc = np.array([float(step2.predict(m.predict(N, D))) for m in boot.sample_models()])
    return float(np.std(acc[np.isfinite(acc)]))


def forecast_task(checkpoints: pd.DataFrame, cols: TaskColumns, N: float, D: float, *,
                  level: float = DEFAULT_LEVEL, methods=None, n_resamples: int = BOOTSTRAP_RESAMPLES,
                  seed: int = 0, step1: dict | None = None, rule: str = DEFAULT_TASK_RULE) -> FitResult:
    """The task's forecast at (N, D) under `rule` (TASK_RULES): the chosen method's fit on every checkpoint
    ("best"), or every method's weighted by its backtest ("weighted": the heaviest method's fit is the
    result, the weighted prediction its forecast), with diagnostics["forecast"] (predicted, lower, upper,
    level, sigma terms), ["choice"] (method, every method's primary-backtest mean absolute error, the
    weights) and ["backtest"] (its rows). step1: a dict to share step-1 fits with other tasks' forecasts
    on the same checkpoints."""
    if rule not in TASK_RULES:
        raise InputError(f"task rule {rule!r} is not one of {', '.join(TASK_RULES)}")
    require_metric(checkpoints, cols.acc, cols.task)
    methods = methods_for(cols) if methods is None else tuple(methods)
    for m in methods:
        if m == "single_step":
            continue
        require_metric(checkpoints, cols.intermediate if m == "intermediate_chain" else cols.loss, cols.task)
    step1 = {} if step1 is None else step1
    bt = backtest(checkpoints, cols, methods, step1)
    method, mae = choose(bt, methods)
    if rule == "weighted":
        return _weighted(checkpoints, cols, N, D, bt, mae, level=level, n_resamples=n_resamples, seed=seed, step1=step1)
    result = fit_method(checkpoints, cols, method, step1)
    mine = bt[bt["method"] == method]
    scatter = float(result.diagnostics["scatter"])
    pdec = per_decade(mine)
    distance = float(np.log10(N / checkpoints["params"].max()))
    sd_boot = _bootstrap_sd(checkpoints, cols, method, result, N, D, n_resamples, seed) if n_resamples else 0.0
    sigma = float(np.sqrt(sd_boot ** 2 + scatter ** 2 + (pdec * max(distance, 0.0)) ** 2))
    z = NormalDist().inv_cdf(0.5 + level / 2)
    predicted = float(result.predict(N, D))
    forecast = {"task": cols.task, "params": float(N), "tokens": float(D), "predicted": predicted,
                "lower": max(0.0, predicted - z * sigma), "upper": min(1.0, predicted + z * sigma),
                "level": level, "sigma": sigma, "sd_bootstrap": sd_boot, "scatter": scatter,
                "per_decade": pdec, "decades": distance, "n_resamples": n_resamples}
    if method != "single_step":
        forecast["loss"] = float(result.model().loss(N, D))
    choice = {"method": method, "mae": mae, "backtest": "largest size's runs predicted from the smallest cut's sizes",
              "coverage": backtest_coverage(mine, scatter, level)}
    return result.with_(diagnostics={**result.diagnostics, "method": method, "forecast": forecast,
                                     "choice": choice, "backtest": bt.to_dict(orient="records")})


def _weighted(checkpoints: pd.DataFrame, cols: TaskColumns, N: float, D: float, bt: pd.DataFrame,
              mae: dict[str, float], *, level: float, n_resamples: int, seed: int, step1: dict) -> FitResult:
    """forecast_task's "weighted" rule (fits.tasks_weighted)."""
    weights = method_weights(mae)
    fitted: dict[str, FitResult] = {}
    dropped: dict[str, str] = {}  # a method its backtest scored that cannot fit every run: out of the weights, and why
    for m in weights:
        try:
            fitted[m] = fit_method(checkpoints, cols, m, step1)
        except (InputError, ValueError, FloatingPointError, RuntimeError) as exc:
            dropped[m] = f"{type(exc).__name__}: {exc}"
    weights = method_weights({m: mae[m] for m in fitted})
    if not weights:
        raise InputError(f"task {cols.task!r}: no method fits every run, so there is no forecast")
    heaviest = max(weights, key=weights.get)
    result = fitted[heaviest]
    distance = float(np.log10(N / checkpoints["params"].max()))
    sd_boot = _bootstrap_sd(checkpoints, cols, heaviest, result, N, D, n_resamples, seed) if n_resamples else 0.0
    mine = weighted_backtest(bt, weights)
    w = weighted_forecast(fitted, weights, N, D, per_decade=per_decade(mine), distance=distance, sd_boot=sd_boot,
                          level=level)
    forecast = {"task": cols.task, "params": float(N), "tokens": float(D), "level": level, "decades": distance,
                "n_resamples": n_resamples, "drawn": heaviest, **w}
    if heaviest != "single_step":
        forecast["loss"] = float(result.model().loss(N, D))
    choice = {"method": "weighted", "mae": mae, "weights": weights, "dropped": dropped,
              "backtest": "largest size's runs predicted from the smallest cut's sizes; every method weighted by "
                          "1 / its mean absolute error there, squared",
              "coverage": backtest_coverage(mine, w["scatter"], level)}
    rows = pd.concat([bt, mine], ignore_index=True)
    return result.with_(diagnostics={**result.diagnostics, "method": "weighted", "forecast": forecast,
                                     "choice": choice, "backtest": rows.to_dict(orient="records")})
