"""The fit step: the final-loss law with its bootstrap and backtest, the curve laws, and, on imported
eval curves, the matched-progress laws chosen by backtests (ladder.analysis.curve_laws)."""

from __future__ import annotations

import contextlib
from pathlib import Path

import numpy as np
import pandas as pd

from ladder.analysis.backtests import backtest_at_ratio, backtest_noise, curve_backtest
from ladder.analysis.beside import beside
from ladder.analysis.curve_laws import fit_progress
from ladder.analysis.curves import fit_curve_law, schedule_factors
from ladder.analysis.eval_ratios import EVAL_RATIOS_CSV, rung_eval_ratios
from ladder.analysis.finals import (
    _targets_along,
    bootstrap_fits,
    exactly_determined,
    fit_final_law,
    law_predict,
    min_rungs,
    n_sizes,
    predict_samples,
    seed_spread,
)
from ladder.analysis.intervals import carried_luck, hero_disagreement, target_intervals
from ladder.analysis.outliers import DESCRIBE_BELOW, describe_outlier, replica_outlier
from ladder.analysis.runs import collect_runs
from ladder.analysis.seeds import seed_noise
from ladder.outputs import layout
from ladder.spec import FitSpec, rung_from_dict


def _fit_spec(config: dict) -> FitSpec:
    return FitSpec(**{**config["fit"]})


def fit_ladder(config: dict, dep_dirs: dict[str, str], out_dir: str) -> dict:
    fit = _fit_spec(config)
    out = Path(out_dir)
    points, excluded = collect_runs(config["rungs"], dep_dirs)
    finals = points[points["kind"] == "final"] if not points.empty else points
    hero = rung_from_dict(config["hero"]) if config.get("hero") else None
    progress = fit_progress(config, dep_dirs, out_dir, fit, hero)
    exact = exactly_determined(points, fit) if not points.empty else None
    too_few = points.empty or n_sizes(points) < min_rungs(fit)
    if too_few or (exact and progress is not None and progress.get("chosen")):
        if progress is not None and progress.get("chosen"):
            note = (f"the {fit.law} law is refused: {exact}" if exact and not too_few else
                    f"only {len(finals)} rungs finished: no final-loss law")
            if not points.empty:  # the rungs' finals still plot against compute, without a law through them
                layout.write_csv_atomic(out / layout.RUNS_CSV, points)
            doc = {"summary": {"law": None, "fit_on": [], "excluded": excluded, "level": fit.level,
                               "note": f"{note}; the curve law forecasts", "underdetermined": exact,
                               "seed_noise": seed_noise(points) if not points.empty else None},
                   "law": None, "backtest": {"ok": False, "reason": note},
                   "progress": progress}
            layout.write_json_atomic(out / layout.FIT, doc)
            return {"law": None, "curve_law": progress["law"]}
        raise ValueError(f"only {len(finals)} rungs finished ({', '.join(e['name'] + ' ' + e['status'] for e in excluded)}); "
                         f"the {fit.law} law needs {min_rungs(fit)}")
    layout.write_csv_atomic(out / layout.RUNS_CSV, points)
    result = fit_final_law(points, fit)
    ratio = hero.flops / float(finals["flops"].max()) if hero else 10.0
    backtest = backtest_at_ratio(points, fit, ratio)
    # The whole-curve law on the second core while the final law bootstraps (ladder.analysis.beside).
    curve_fit = beside(fit_curve_law, points, dep_dirs, fit.curve_law, backtest) if fit.curve_law != "none" else None
    with curve_fit or contextlib.nullcontext(lambda: None) as curve_law_result:
        # As many redraws as the bootstrap allows, at most 64 (the band's sd to about 9%); none without one.
        if backtest.get("ok") and fit.bootstrap >= 3:
            backtest = {**backtest, "noise": backtest_noise(points, fit, backtest, result, n=min(64, fit.bootstrap))}
        doc, band = _final_law_doc(points, finals, excluded, dep_dirs, fit, result, backtest, ratio, exact, hero, out)
        curve_law = curve_law_result()
    doc = {**doc, "curve_law": curve_law, "progress": progress}
    # The band waits for the whole-curve law: where the two laws part at the hero, it widens (intervals.model_sigma).
    _write_law_band(points, fit, result, backtest, hero, doc, out, **band)
    layout.write_json_atomic(out / layout.FIT, doc)
    summary = doc["summary"]
    return {"law": summary["law"], "params": result.params, "backtest_error": backtest.get("relative_error"),
            "backtest_ratio": backtest.get("compute_ratio")}


def _final_law_doc(points, finals, excluded, dep_dirs, fit, result, backtest, ratio, exact, hero, out: Path) -> dict:
    """The final-loss law's part of fit.json (its bootstrap band written to law_curve.csv)."""
    # Bootstrap over rungs for parameters and for the law's band over compute.
    flops_grid = np.geomspace(finals["flops"].min() / 2, max(finals["flops"].max(), hero.flops if hero else 0) * 2, 60)
    grid_targets = _targets_along(points, flops_grid, hero)
    # An exactly determined law interpolates every resample: its bootstrap would be [x, x], so it is
    # not run, and the band carries the rungs' seed noise through the fit without it.
    samples = bootstrap_fits(points, fit, result, fit.bootstrap, seed=0) if fit.bootstrap and not exact else []
    boot = predict_samples(result, samples, grid_targets) if samples else np.empty((0, 0))
    level = fit.level
    seeds = seed_noise(points, result)
    factors = schedule_factors(points, dep_dirs, result, np.linspace(0.005, 1.0, 200))
    if not factors.empty:
        layout.write_csv_atomic(out / layout.CURVES_CSV, factors)
    ratios = rung_eval_ratios(points, dep_dirs)
    if not ratios.empty:  # the hero's live forecast reads its eval against these (ladder.analysis.eval_ratios)
        layout.write_csv_atomic(out / EVAL_RATIOS_CSV, ratios)
    curve_bt = curve_backtest(points, dep_dirs, fit, backtest)

    outlier = replica_outlier(points)
    if outlier is not None and outlier["p_family"] < DESCRIBE_BELOW:
        target = (hero.model.params_active, hero.tokens, hero.flops) if hero else None
        outlier = describe_outlier(points, fit, outlier, target, law_predict(result, *target) if target else None)
    summary = {"law": result.law if not result.config.get("tied_exponents") else "chinchilla_tied",
               "params": result.params, "n_points": result.n_points, "n_rungs": int(len(finals)),
               "objective": result.objective, "bootstrap": int(fit.bootstrap), "level": level,
               "fit_on": list(finals["name"]), "excluded": excluded, "seed_spread": seed_spread(points),
               "seed_noise": seeds, "underdetermined": exact, "replica_outlier": outlier}
    doc = {"summary": summary, "law": result.to_dict(), "backtest": backtest, "hero_ratio": ratio,
           "bootstrap_params": samples,
           "curve_method": "final-loss law at the tokens so far x the rungs' schedule factor c(run fraction)",
           "curve_backtest": curve_bt}
    # The band's costly part (a refit per redraw) runs here, beside the whole-curve law.
    carried = carried_luck(points, fit, result, grid_targets, seeds)
    return doc, {"flops_grid": flops_grid, "grid_targets": grid_targets, "boot": boot, "seeds": seeds, "carried": carried}


def _write_law_band(points, fit, result, backtest, hero, doc, out: Path, *, flops_grid, grid_targets, boot, seeds,
                    carried) -> None:
    """law_curve.csv: the calibrated interval at each compute, the hero's own composition, so the band
    at the hero's compute is its interval; the bootstrap's percentiles beside it (alone they are not
    calibrated: see intervals.py)."""
    _, disagreement = hero_disagreement(points, result, hero, doc, fit)
    level = fit.level
    calibrated = target_intervals(points, fit, result, backtest, grid_targets, boot, seeds, level, disagreement, carried)
    law_curve = pd.DataFrame({"flops": flops_grid, "loss": [c for c, _, _, _ in calibrated],
                              "lower": [lo for _, lo, _, _ in calibrated], "upper": [hi for _, _, hi, _ in calibrated]})
    if boot.size:
        law_curve["boot_lower"] = np.percentile(boot, 50 * (1 - level), axis=0)
        law_curve["boot_upper"] = np.percentile(boot, 50 * (1 + level), axis=0)
    layout.write_csv_atomic(out / "law_curve.csv", law_curve)
