"""The ladder's analysis steps: fit the laws on the rungs, predict the hero, gate it.

runs        reading the rungs: final results, cooldown branches, train-loss curves, imported eval curves
finals      the final-loss laws, their bootstrap over sizes, the seeds' spread
curves      curve laws on rungs trained here (schedule factor, whole-curve law)
progress    curve laws on imported eval curves (matched progress, chosen by backtests; Marin's baseline)
backtests   the final-loss law's backtest at the hero's ratio, the schedule-factor curve's backtest
intervals   the final prediction's interval, calibrated for extrapolation
fit, predict, gate, snapshots   the steps (and the hero's forecast snapshots)

Every number records where it came from: which runs, which law, which interval.
"""

from ladder.analysis.backtests import backtest_at_ratio, curve_backtest
from ladder.analysis.finals import bootstrap_fits, fit_final_law, law_predict, min_rungs, n_sizes, seed_spread
from ladder.analysis.fit import fit_ladder
from ladder.analysis.gate import gate_ladder
from ladder.analysis.intervals import prediction_interval
from ladder.analysis.predict import predict_ladder
from ladder.analysis.runs import collect_runs, interval_loss, rung_curve, smooth, tail_loss

__all__ = [
    "backtest_at_ratio", "bootstrap_fits", "collect_runs", "curve_backtest", "fit_final_law", "fit_ladder", "gate_ladder",
    "interval_loss", "law_predict", "min_rungs", "n_sizes", "predict_ladder", "prediction_interval", "rung_curve",
    "seed_spread", "smooth", "tail_loss",
]
