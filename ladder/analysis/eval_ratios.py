"""How far a run's eval loss still is above its final at each fraction of the run, measured on the
rungs, for the hero's live forecast (ladder.analysis.forecast).

A WSD run drops most of its loss in the cooldown, and how far it sits above its final at, say, 80%
of the run depends on its size: the ratio grows with size and levels off at the largest rungs, as
the heroes' does. The pre-hero curve (a train-loss shape) re-anchored on the hero's eval
over-predicted the final, with a band too narrow.

So the hero's ratio at a fraction is taken as the largest rung's (the mean over its replicas, each
on its own eval sample: its evals and its last eval read the same tokens). A trend across sizes
was the alternative, and predicted the largest rung's ratio from the smaller ones worse
(experiments/tiny_record.md has both comparisons). Its uncertainty at the hero is how much the ratio
still moved over the last two size steps, per decade of compute, carried over the hero's distance
past the largest rung, with the replicas' spread beside it.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ladder.outputs import layout

EVAL_RATIOS_CSV = "eval_ratios.csv"  # fit: name, size, flops, frac, log_ratio of every rung's evals before its last
HERO_EVAL_RATIO_CSV = "hero_eval_ratio.csv"  # predict: frac, log_ratio, sigma for the hero (from the largest rung)


def rung_eval_ratios(points: pd.DataFrame, dep_dirs: dict[str, str]) -> pd.DataFrame:
    """One row per eval before the last of each finished rung: ln(eval loss / its last eval loss)."""
    rows = []
    for run in points[points["kind"] == "final"].itertuples():
        evals = layout.read_jsonl(Path(dep_dirs[run.name]) / layout.EVAL)
        if evals.empty or "eval_loss" not in evals:
            continue
        evals = evals.dropna(subset=["eval_loss"]).drop_duplicates("step", keep="last").sort_values("step")
        total = float(evals["step"].max())
        last = float(evals["eval_loss"].iloc[-1])
        before = evals[evals["step"] < total]
        rows += [{"name": run.name, "size": run.size, "flops": float(run.flops), "frac": float(e.step) / total,
                  "log_ratio": math.log(float(e.eval_loss) / last)} for e in before.itertuples()]
    return pd.DataFrame(rows, columns=["name", "size", "flops", "frac", "log_ratio"])


def _size_ratio(table: pd.DataFrame, size: str, grid: np.ndarray) -> np.ndarray:
    """(replicas, grid) log ratios of one size, each replica interpolated onto `grid` (0 at the run's end)."""
    out = []
    for _, run in table[table["size"] == size].groupby("name"):
        run = run.sort_values("frac")
        out.append(np.interp(grid, np.append(run["frac"].to_numpy(), 1.0), np.append(run["log_ratio"].to_numpy(), 0.0)))
    return np.array(out)


def hero_eval_ratio(table: pd.DataFrame, hero_flops: float) -> pd.DataFrame | None:
    """frac, log_ratio and sigma (log) of the hero's eval over its final, from the largest rung; None
    where fewer than two sizes logged an eval before their last."""
    if table.empty:
        return None
    sizes = table.groupby("size")["flops"].first().sort_values()
    if len(sizes) < 2:
        return None
    largest = sizes.index[-1]
    grid = np.sort(table.loc[table["size"] == largest, "frac"].unique())
    ratios = [_size_ratio(table, s, grid) for s in sizes.index[-3:]]
    logc = np.log10(sizes.to_numpy(float))[-3:]
    distance = max(math.log10(hero_flops) - logc[-1], 0.0)
    # the ratio's change per decade over each of the last (up to) two size steps, carried to the hero
    steps = [(ratios[i + 1].mean(axis=0) - ratios[i].mean(axis=0)) / max(logc[i + 1] - logc[i], 1e-6) * distance
             for i in range(len(ratios) - 1)]
    moved = np.mean(np.square(steps), axis=0)
    top = ratios[-1]
    spread = top.std(axis=0, ddof=1) ** 2 / len(top) if len(top) > 1 else np.zeros(len(grid))
    return pd.DataFrame({"frac": grid, "log_ratio": top.mean(axis=0), "sigma": np.sqrt(moved + spread),
                         "from": str(table.loc[table["size"] == largest, "name"].iloc[0])})
