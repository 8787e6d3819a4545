"""The predict step: written before the hero starts, from the rungs alone: its final loss with an
interval calibrated for extrapolation, and its whole curve (step, tokens, loss, lower, upper)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ladder.analysis.curves import _hero_curve
from ladder.analysis.eval_ratios import EVAL_RATIOS_CSV, HERO_EVAL_RATIO_CSV, hero_eval_ratio
from ladder.analysis.finals import predict_samples
from ladder.analysis.fit import _fit_spec
from ladder.analysis.intervals import hero_disagreement, target_intervals
from ladder.analysis.seeds import seed_noise
from ladder.outputs import layout
from ladder.spec import rung_from_dict


def predict_ladder(config: dict, fit_dir: str, out_dir: str) -> dict:
    fit = _fit_spec(config)
    out = Path(out_dir)
    doc = layout.read_json(Path(fit_dir) / layout.FIT)
    hero = rung_from_dict(config["hero"]) if config.get("hero") else None
    prediction: dict[str, Any] = {"law": doc["summary"]["law"], "level": fit.level, "fit_on": doc["summary"]["fit_on"],
                                  "backtest": doc["backtest"], "targets": []}
    rows = _final_law(config, doc, fit_dir, fit, hero, prediction, out) if doc.get("law") else []
    progress = doc.get("progress") or {}
    if hero is not None and progress.get("chosen"):
        _progress_hero(prediction, hero, progress, fit_dir, fit.level, out)
    prediction["targets"] = rows[1:]
    layout.write_json_atomic(out / layout.PREDICTION, prediction)
    return {"hero": prediction.get("hero"), "targets": [r["name"] for r in rows[1:]]}


def _final_law(config: dict, doc: dict, fit_dir: str, fit, hero, prediction: dict, out: Path) -> list[dict]:
    """The final-loss law's predictions for the hero and the extra targets (targets.csv, hero_curve.csv)."""
    from fits.result import FitResult

    points = pd.read_csv(Path(fit_dir) / layout.RUNS_CSV)
    result = FitResult.from_dict(doc["law"])
    finals = points[points["kind"] == "final"]
    largest = float(finals["flops"].max())
    targets: list[tuple[str, float, float, float]] = []
    if hero:
        targets.append((hero.name, hero.model.params_active, hero.tokens, hero.flops))
    for t in config.get("targets") or []:
        from ladder.spec import ModelSpec, TargetSpec

        spec = TargetSpec(name=t["name"], model=ModelSpec(**t["model"]), tokens=t["tokens"], seq_len=t["seq_len"])
        targets.append((spec.name, spec.model.params_active, spec.tokens, spec.flops))
    samples = doc.get("bootstrap_params") or []
    boot = predict_samples(result, samples, [t[1:] for t in targets]) if samples else np.empty((0, 0))
    seeds = doc["summary"].get("seed_noise") or seed_noise(points)
    second, disagreement = hero_disagreement(points, result, hero, doc, fit)
    intervals = target_intervals(points, fit, result, doc["backtest"], [t[1:] for t in targets], boot, seeds, fit.level,
                                 disagreement)
    rows = []
    for (name, n, d, c), (central, lower, upper, info) in zip(targets, intervals, strict=True):
        rows.append({"name": name, "params": n, "tokens": d, "flops": c, "loss": central, "lower": lower, "upper": upper,
                     "compute_ratio": c / largest, **info})
    if rows:
        layout.write_csv_atomic(out / layout.TARGETS_CSV, pd.DataFrame(rows))
    if hero:
        h = rows[0]
        prediction["hero"] = {"name": hero.name, "predicted_final_loss": h["loss"], "lower": h["lower"], "upper": h["upper"],
                              "level": fit.level, "law": prediction["law"], "params": h["params"], "tokens": h["tokens"],
                              "flops": h["flops"], "compute_ratio": h["compute_ratio"],
                              "interval": {k: h[k] for k in ("sigma_bootstrap", "bootstrap_in_sum", "sigma_extrapolation",
                                                             "sigma_seed", "sigma_seed_fit", "sigma_residual", "sigma_model",
                                                             "method")},
                              "seeds": seeds, "seed_note": seeds["text"],
                              "underdetermined": doc["summary"].get("underdetermined")}
        curve = _hero_curve(hero, h, fit_dir, doc)
        if curve is not None:
            layout.write_csv_atomic(out / layout.HERO_CURVE, curve)
        ratios_csv = Path(fit_dir) / EVAL_RATIOS_CSV
        ratio = hero_eval_ratio(pd.read_csv(ratios_csv), hero.flops) if ratios_csv.exists() else None
        if ratio is not None:
            layout.write_csv_atomic(out / HERO_EVAL_RATIO_CSV, ratio)
        if second is not None:
            law_curve, ratio, final_eval = second
            layout.write_csv_atomic(out / "hero_curve_law.csv", law_curve)
            prediction["hero"]["curve_law_final_train_loss"] = float(law_curve["loss"].iloc[-1])
            prediction["hero"]["curve_law_eval_over_train"] = ratio
            prediction["hero"]["curve_law_final_eval_loss"] = final_eval
            # Where it stays out of the band (fit.disagreement "report"), the report says so beside the band.
            prediction["hero"]["laws_disagreement"] = disagreement
    return rows


def _progress_hero(prediction: dict, hero, progress: dict, fit_dir: str, level: float, out: Path) -> None:
    """The hero from the curve law chosen on imported rung curves: its final, its whole curve, and the baselines.

    This replaces the final-loss law's hero (kept under hero.final_law): on eval curves the curve law
    is the one the backtests validated at every fraction, the final included.
    """
    from ladder.analysis.curve_laws import BASELINE_MARIN_CSV, HERO_PROGRESS_CSV

    curve = pd.read_csv(Path(fit_dir) / HERO_PROGRESS_CSV)
    last = curve.iloc[-1]
    info = progress["forecast"]
    previous = prediction.get("hero")
    prediction["law"] = progress["law"]
    prediction["hero"] = {
        "name": hero.name, "predicted_final_loss": float(last["loss"]), "lower": float(last["lower"]),
        "upper": float(last["upper"]), "level": level, "law": progress["law"], "params": hero.model.params_active,
        "tokens": hero.tokens, "flops": float(last["flops"]), "compute_ratio": 10 ** info["decades"],
        "asymptote_E": info["E"], "source": "rungs only (imported eval curves)",
        "backtests": [{k: b[k] for k in ("fit_on", "predict", "compute_ratio", "mean_abs_rel_error", "mean_rel_error")}
                      for b in progress["backtests"]],
        "coverage": progress["coverage"],
        "interval": {"sigma_final": float(last["sigma"]), "sigma_extrapolation": float(last["sigma_extrapolation"]),
                     "sigma_missing": float(last["sigma_missing"]), "sigma_fit": info["sigma_fit"],
                     "sigma_seed": float(last["sigma_seed"]) if "sigma_seed" in last else None,
                     "method": info["method"]},
        "seeds": info.get("seeds"), "seed_note": (info.get("seeds") or {}).get("text"),
    }
    if previous is not None:
        prediction["hero"]["final_law"] = {k: previous[k] for k in ("predicted_final_loss", "lower", "upper", "law")}
    layout.write_csv_atomic(out / layout.HERO_CURVE, curve[["step", "tokens", "frac", "flops", "loss", "lower", "upper"]])
    marin = progress.get("baseline_marin")
    if marin:
        table = pd.read_csv(Path(fit_dir) / BASELINE_MARIN_CSV)
        layout.write_csv_atomic(out / BASELINE_MARIN_CSV, table[["step", "tokens", "frac", "loss"]])
        prediction["baselines"] = {"marin": {"predicted_final_loss": marin["predicted_final_loss"], "lower": None,
                                             "upper": None, "level": None, "law": "marin", "E": marin["E"],
                                             "method": marin["method"]}}
