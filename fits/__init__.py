"""fits: scaling laws that reproduce published fits, predict whole loss curves, and say how sure
they are. numpy/scipy/pandas only; never imports ladder.

Point laws (a runs table: DataFrame with params, tokens, loss, optional flops = 6ND, active_params)
    fit(runs, law="chinchilla"|"compute"|"isoflop", pin_E=None) -> FitResult   runs: a table or a CSV path
    read_runs(path) -> runs table                            RUNS.csv, checked column by column
    fit_chinchilla(N, D, L, starts=None) -> FitResult        Hoffmann et al. 2022 / Epoch AI 2024
    fit_compute(C, L, pin_E=None) -> FitResult               L(C) = E + A C^-alpha
    fit_compute_domains(C, {domain: L}, {domain: w}) -> FitResult   sum_d w_d (E_d + A_d C^-alpha_d)
    fit_isoflop(N, D, L, C=None, budgets=None) -> FitResult  Approach 2: N_opt ~ C^a, D_opt ~ C^b
    compute_optimal(result_or_law, C) -> (N_opt, D_opt)      closed form for Chinchilla
    predict(result, runs) -> loss array                      (N, D) or C per the law

Uncertainty
    bootstrap(runs, law, n_resamples=1000, seed=0, base=None) -> FitResult with samples, ci
    backtest(runs, law, holdout=1 | cutoffs=[...]) -> DataFrame (predicted, rel_err, decades)
    calibrate(result, runs) -> FitResult with .calibration (error per decade of extrapolation)
    prediction_band(result, points, level=DEFAULT_LEVEL) -> DataFrame loss, lower, upper
    calibrated_interval(result, points, level=DEFAULT_LEVEL) -> same, requiring a calibration
    DEFAULT_LEVEL = 0.9: the one default probability of every interval (library and `ladder`)

Whole-curve laws (curves: DataFrames with step, lr, loss)
    fit_curves(curves, law="multipower"|"tissue") -> FitResult; .model().predict(step, lr)
    predict_schedule(result, schedule_df) -> loss at each row
    fit_joint_curves({N: [curves]}, law="multipower") -> FitResult; .model().predict(N, step, lr)

Task accuracy (a checkpoints table: run, params, tokens and metric columns; fits.tasks, docs/tasks.md)
    fit_chain(points, loss, acc, chance=None) -> FitResult   (N, D) -> loss -> accuracy (two steps)
    fit_single_step(points, acc, chance=...) -> FitResult    (N, D) -> accuracy on the finals
    forecast_task(points, TaskColumns(...), N, D) -> FitResult   method chosen by backtests, with interval

Hyperparameter rules (fits.hparams; a sweep: one row per run)
    fit_rule(budget, x, loss) -> RuleFit                     x_opt = coef * budget^exponent, per-budget
                                                             parabola optima, bootstrap intervals

FitResult (fits.result): law, params, objective, n_points, n_starts, converged, diagnostics,
config, samples, ci, calibration; .model(), .predict(...), .summary(), .to_json(), FitResult.from_json().
Reference data loaders: fits.reference. Bad user input raises fits.InputError (a ValueError, fits/errors.py).

`import fits` loads none of this: each name is imported on first use (PEP 562), so a command line
that only needs one law does not pay for the others.
"""

from __future__ import annotations

import importlib
from importlib.metadata import PackageNotFoundError, version
from typing import TYPE_CHECKING

from fits.defaults import DEFAULT_LEVEL

try:
    __version__ = version("scaling-ladder")  # fits ships in the scaling-ladder distribution
except PackageNotFoundError:  # a source tree on sys.path without an install
    __version__ = "0+unknown"

# name -> the module that defines it
_LAZY = {
    "ChinchillaLaw": "fits.laws.chinchilla", "fit_chinchilla": "fits.chinchilla",
    "ComputeLaw": "fits.laws.compute", "fit_compute": "fits.compute",
    "DomainSumLaw": "fits.laws.domains", "fit_compute_domains": "fits.domains",
    "MultiPowerLaw": "fits.laws.curves", "TissueLaw": "fits.laws.curves", "fit_curves": "fits.curves",
    "predict_schedule": "fits.curves",
    "IsoFlopLaw": "fits.laws.isoflop", "fit_isoflop": "fits.isoflop",
    "JointCurveLaw": "fits.laws.joint", "fit_joint_curves": "fits.joint",
    "FitResult": "fits.result",
    "fit": "fits.runs", "predict": "fits.runs",
    "read_runs": "fits.io", "InputError": "fits.errors",
    "backtest": "fits.uncertainty", "bootstrap": "fits.uncertainty", "calibrate": "fits.uncertainty",
    "prediction_band": "fits.uncertainty", "calibrated_interval": "fits.uncertainty",
    "compute_optimal": "fits.optimal",
    "fit_chain": "fits.tasks", "fit_single_step": "fits.tasks",
    "forecast_task": "fits.tasks_forecast", "TaskColumns": "fits.tasks_forecast",
}

if TYPE_CHECKING:  # the same names, for type checkers and editors
    from fits.chinchilla import fit_chinchilla
    from fits.compute import fit_compute
    from fits.curves import fit_curves, predict_schedule
    from fits.domains import fit_compute_domains
    from fits.errors import InputError
    from fits.io import read_runs
    from fits.isoflop import fit_isoflop
    from fits.joint import fit_joint_curves
    from fits.laws.chinchilla import ChinchillaLaw
    from fits.laws.compute import ComputeLaw
    from fits.laws.curves import MultiPowerLaw, TissueLaw
    from fits.laws.domains import DomainSumLaw
    from fits.laws.isoflop import IsoFlopLaw
    from fits.laws.joint import JointCurveLaw
    from fits.optimal import compute_optimal
    from fits.result import FitResult
    from fits.runs import fit, predict
    from fits.tasks import fit_chain, fit_single_step
    from fits.tasks_forecast import TaskColumns, forecast_task
    from fits.uncertainty import backtest, bootstrap, calibrate, calibrated_interval, prediction_band


def __getattr__(name: str):
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'fits' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later look-ups skip this function
    return value


def __dir__():
    return sorted(set(globals()) | set(_LAZY))


__all__ = [  # every name of _LAZY, and the two defined here
    "DEFAULT_LEVEL", "ChinchillaLaw", "ComputeLaw", "DomainSumLaw", "FitResult", "InputError", "IsoFlopLaw", "JointCurveLaw",
    "MultiPowerLaw", "TaskColumns", "TissueLaw", "__version__", "backtest", "bootstrap", "calibrate", "calibrated_interval",
    "compute_optimal", "fit", "fit_chain", "fit_chinchilla", "fit_compute", "fit_compute_domains", "fit_curves", "fit_isoflop",
    "fit_joint_curves", "fit_single_step", "forecast_task", "predict", "predict_schedule", "prediction_band", "read_runs",
]
