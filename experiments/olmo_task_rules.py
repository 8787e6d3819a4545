"""Round 3 of issue 57: which rule turns the rungs' backtests into a task forecast, chosen on OLMo's 3B runs.

The 16 rungs are fitted (every method of fits.tasks_forecast), OLMo's four 3B runs (fits.olmo_tasks.DEV_RUNS,
0.39 decades of N past the rungs; no fit or choice reads them) are predicted, and each candidate rule is
scored there: the best method by the primary backtest (round 2), each method alone, and combinations of the
methods weighted by that backtest. The 7B and 13B are not read. Pure fits on the paper's N; a few minutes.

    .venv/bin/python experiments/olmo_task_rules.py

experiments/olmo_tasks_record.md (round 3) has the table this printed and what was chosen from it.
"""

from __future__ import annotations

import warnings

import numpy as np
import pandas as pd

from fits.olmo_tasks import DEV_RUNS, OLMO_TASKS, olmo_checkpoints, task_columns
from fits.tasks import finals
from fits.tasks_forecast import backtest, choose, fit_method, methods_for
from fits.tasks_paper import PAPER_AVG
from fits.tasks_weighted import method_weights

COMBINATIONS = ("best", "mean", "median", "best two", "best three", "weighted")


def combine(preds: dict[str, float], mae: dict[str, float], rule: str) -> float:
    """A rule's prediction from every method's (preds) and their primary-backtest errors (mae)."""
    scored = {m: p for m, p in preds.items() if np.isfinite(p) and np.isfinite(mae.get(m, np.nan))}
    ranked = sorted(scored, key=lambda m: mae[m])
    if rule in scored or rule in mae:
        return preds.get(rule, np.nan)
    if rule == "best":
        return scored[ranked[0]]
    if rule == "mean":
        return float(np.mean(list(scored.values())))
    if rule == "median":
        return float(np.median(list(scored.values())))
    if rule in ("best two", "best three"):
        return float(np.mean([scored[m] for m in ranked[: 2 if rule == "best two" else 3]]))
    weights = method_weights({m: mae[m] for m in scored})
    return float(sum(w * scored[m] for m, w in weights.items()))


def main() -> None:
    warnings.filterwarnings("ignore")  # the methods' fits warn on OLMo's near-flat accuracies; their errors are scored
    rungs, dev = olmo_checkpoints(), olmo_checkpoints(DEV_RUNS)
    # each 3B run's actual: the mean of its last evaluations, as the 13B is scored; at its last evaluation's tokens
    actual = dev.sort_values("tokens").groupby("run").tail(PAPER_AVG).groupby("run").mean(numeric_only=True)
    tokens = finals(dev).set_index("run")["tokens"]
    rows = []
    for task, (_, chance) in OLMO_TASKS.items():
        cols = task_columns(task, chance)
        step1: dict = {}
        methods = methods_for(cols)
        _, mae = choose(backtest(rungs, cols, methods, step1), methods)
        for run in DEV_RUNS:
            preds = {}
            for m in methods:
                try:
                    preds[m] = float(fit_method(rungs, cols, m, step1).predict(actual.loc[run, "params"], tokens[run]))
                except (ValueError, RuntimeError, FloatingPointError):
                    preds[m] = np.nan
            for rule in (*COMBINATIONS, *methods):
                rows.append({"task": task, "run": run, "rule": rule,
                             "error": 100 * (combine(preds, mae, rule) - actual.loc[run, cols.acc])})
    table = pd.DataFrame(rows)
    table["abs"] = table["error"].abs()
    far = table[table["run"] == DEV_RUNS[-1]]
    summary = pd.DataFrame({
        "MAE (32 points)": table.groupby("rule")["abs"].mean(),
        "within 2": table.groupby("rule")["abs"].apply(lambda s: int((s <= 2).sum())),
        f"MAE at {DEV_RUNS[-1]}": far.groupby("rule")["abs"].mean(),
        f"within 2 at {DEV_RUNS[-1]}": far.groupby("rule")["abs"].apply(lambda s: int((s <= 2).sum())),
    })
    print(summary.round(2).sort_values("MAE (32 points)").to_string())


if __name__ == "__main__":
    main()
