"""Fitting and predicting on a runs table, whatever the law.

A runs table is a pandas DataFrame with columns `params` (N), `tokens` (D), `loss`, and optionally
`flops` (C; 6 N D when absent) and `active_params` (for mixture-of-experts runs: the law's N is
the active parameter count by default, Clark et al. 2022 / Ludziejewski et al. 2025).
"""

from __future__ import annotations

import os

import numpy as np
import pandas as pd

from fits.io import InputError, positive_column, read_runs, require_columns
from fits.laws.registry import in_compute, law_names, min_points
from fits.result import FitResult

POINT_LAWS = law_names("point")  # the laws of a runs table's finals, from the one registry
MIN_POINTS = {law: min_points(law) for law in POINT_LAWS}


def as_runs(runs=None, *, N=None, D=None, L=None, C=None) -> pd.DataFrame:
    """A runs DataFrame from a frame or from arrays; adds flops = 6 N D when missing."""
    if runs is None:
        runs = pd.DataFrame({"params": np.asarray(N, float), "tokens": np.asarray(D, float)})
        if L is not None:
            runs["loss"] = np.asarray(L, float)
        if C is not None:
            runs["flops"] = np.asarray(C, float)
    runs = pd.DataFrame(runs).reset_index(drop=True)
    if "flops" not in runs.columns:
        runs["flops"] = 6.0 * runs["params"].to_numpy(float) * runs["tokens"].to_numpy(float)
    return runs


def n_of(runs: pd.DataFrame, use_active: bool = True) -> np.ndarray:
    """The law's N: active parameters when the table has them (MoE), else total parameters."""
    if use_active and "active_params" in runs.columns:
        return runs["active_params"].to_numpy(float)
    return runs["params"].to_numpy(float)


def checked_runs(runs, law: str, pin_E: float | None = None) -> pd.DataFrame:
    """A runs table from a RUNS.csv path or a DataFrame, its columns and values checked with the
    library's own one-line InputError (the column, the row, the fix) and its size against the law."""
    if law not in POINT_LAWS:
        raise ValueError(f"unknown law {law!r}; choose one of {', '.join(POINT_LAWS)}")
    need = MIN_POINTS[law] if pin_E is None else 2
    if isinstance(runs, str | os.PathLike):
        return read_runs(runs, min_points=need)
    if not isinstance(runs, pd.DataFrame):
        raise InputError(f"runs must be a pandas DataFrame or the path of a RUNS.csv, not {type(runs).__name__}; "
                         "give a table with columns params, tokens, loss")
    what = "runs table"
    require_columns(runs, ("params", "tokens", "loss"), what)
    checked = runs.reset_index(drop=True).copy()
    for col in ("params", "tokens", "loss", "flops", "active_params"):
        if col in checked.columns:
            checked[col] = positive_column(checked, col, what, row_offset=0)
    if len(checked) < need:
        raise InputError(f"{what}: {len(checked)} run(s) but the {law} law needs at least {need}; add more runs")
    return as_runs(checked)


def fit(runs, law: str = "chinchilla", *, pin_E: float | None = None, use_active: bool = True,
        starts=None, E_prior: tuple[float, float] | None = None) -> FitResult:
    """Fit `law` to runs (a DataFrame or the path of a RUNS.csv): chinchilla (N, D), compute (C),
    isoflop (Approach 2). Bad input raises fits.io.InputError naming the column and the fix."""
    if E_prior is not None and law != "compute":
        raise ValueError(f"E_prior is a prior on the compute law's E; the {law} law does not take one")
    runs = checked_runs(runs, law, pin_E)
    L = runs["loss"].to_numpy(float)
    if law == "chinchilla":
        from fits.chinchilla import fit_chinchilla

        res = fit_chinchilla(n_of(runs, use_active), runs["tokens"].to_numpy(float), L, starts=starts)
    elif law == "compute":
        from fits.compute import fit_compute

        res = fit_compute(runs["flops"].to_numpy(float), L, pin_E=pin_E, E_prior=E_prior)
    else:
        from fits.isoflop import fit_isoflop

        res = fit_isoflop(n_of(runs, use_active), runs["tokens"].to_numpy(float), L,
                          C=runs["flops"].to_numpy(float))
    config = dict(res.config)
    config["use_active"] = bool(use_active and "active_params" in runs.columns)
    config["max_flops"] = float(runs["flops"].max())  # the edge of the data: extrapolation starts here
    return res.with_(config=config)


def predict(result: FitResult, runs) -> np.ndarray:
    """The law's loss at each row of runs (params/tokens for chinchilla, flops otherwise)."""
    return predict_with(result.model(), result, as_runs(runs))


def predict_with(model, result: FitResult, runs: pd.DataFrame) -> np.ndarray:
    if in_compute(result.law):
        return model.predict(runs["flops"].to_numpy(float))
    return model.predict(n_of(runs, result.config.get("use_active", True)), runs["tokens"].to_numpy(float))
