"""fits: scaling laws that reproduce published fits, predict whole loss curves, and say how sure
they are. numpy/scipy/pandas only; never imports ladder.

Point laws (a runs table: DataFrame with params, tokens, loss, optional flops = 6ND, active_params)
    fit(runs, law="chinchilla"|"compute"|"isoflop", pin_E=None) -> FitResult
    fit_chinchilla(N, D, L, starts=None) -> FitResult        Hoffmann et al. 2022 / Epoch AI 2024
    fit_compute(C, L, pin_E=None) -> FitResult               L(C) = E + A C^-alpha
    fit_isoflop(N, D, L, C=None, budgets=None) -> FitResult  Approach 2: N_opt ~ C^a, D_opt ~ C^b
    compute_optimal(result_or_law, C) -> (N_opt, D_opt)      closed form for Chinchilla
    predict(result, runs) -> loss array                      (N, D) or C per the law

Uncertainty
    bootstrap(runs, law, n_resamples=1000, seed=0, base=None) -> FitResult with samples, ci
    backtest(runs, law, holdout=1 | cutoffs=[...]) -> DataFrame (predicted, rel_err, decades)
    calibrate(result, runs) -> FitResult with .calibration (error per decade of extrapolation)
    prediction_band(result, points, level=0.9) -> DataFrame loss, lower, upper
    calibrated_interval(result, points, level=0.9) -> same, requiring a calibration

Whole-curve laws (curves: DataFrames with step, lr, loss)
    fit_curves(curves, law="multipower"|"tissue") -> FitResult; .model().predict(step, lr)
    predict_schedule(result, schedule_df) -> loss at each row
    fit_joint_curves({N: [curves]}, law="multipower") -> FitResult; .model().predict(N, step, lr)

Hyperparameter rules (fits.hparams; a sweep: one row per run)
    fit_rule(budget, x, loss) -> RuleFit                     x_opt = coef * budget^exponent, per-budget
                                                             parabola optima, bootstrap intervals

FitResult (fits.result): law, params, objective, n_points, n_starts, converged, diagnostics,
config, samples, ci, calibration; .model(), .predict(...), .to_json(), FitResult.from_json().
Reference data loaders: fits.reference. Bad user input raises fits.io.InputError (a ValueError).
"""

from importlib.metadata import PackageNotFoundError, version

from fits.chinchilla import ChinchillaLaw, fit_chinchilla
from fits.compute import ComputeLaw, fit_compute
from fits.curves import MultiPowerLaw, TissueLaw, fit_curves, predict_schedule
from fits.isoflop import IsoFlopLaw, fit_isoflop
from fits.joint import JointCurveLaw, fit_joint_curves
from fits.result import FitResult
from fits.runs import fit, predict
from fits.uncertainty import backtest, bootstrap, calibrate, prediction_band

try:
    __version__ = version("scaling-ladder")  # fits ships in the scaling-ladder distribution
except PackageNotFoundError:  # a source tree on sys.path without an install
    __version__ = "0+unknown"


def compute_optimal(law, C, flops_per_param_token: float = 6.0):
    """N_opt, D_opt for budget C from a Chinchilla or isoFLOP law (or a FitResult of one)."""
    model = law.model() if isinstance(law, FitResult) else law
    if isinstance(model, ChinchillaLaw):
        return model.compute_optimal(C, flops_per_param_token)
    if isinstance(model, IsoFlopLaw):
        return model.compute_optimal(C)
    raise ValueError(f"compute-optimal allocation needs a chinchilla or isoflop law, not {type(model).__name__}")


def calibrated_interval(result: FitResult, points, level: float = 0.9):
    """prediction_band for a result that carries an extrapolation calibration (see calibrate)."""
    if not result.calibration:
        raise ValueError("this fit has no calibration; call fits.calibrate(result, runs) first")
    return prediction_band(result, points, level)


__all__ = [
    "ChinchillaLaw", "ComputeLaw", "FitResult", "IsoFlopLaw", "JointCurveLaw", "MultiPowerLaw", "TissueLaw",
    "backtest", "bootstrap", "calibrate", "calibrated_interval", "compute_optimal", "fit", "fit_chinchilla",
    "fit_compute", "fit_curves", "fit_isoflop", "fit_joint_curves", "predict", "predict_schedule",
    "prediction_band",
]
