"""The predict step: written before the hero starts, from the rungs alone: its final loss with an
interval calibrated for extrapolation, and its whole curve (step, tokens, loss, lower, upper)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ladder import layout
from ladder.analysis.curves import _hero_curve, _hero_curve_law
from ladder.analysis.finals import law_predict, predict_samples
from ladder.analysis.fit import _fit_spec
from ladder.analysis.intervals import prediction_interval
from ladder.spec import rung_from_dict


def predict_ladder(config: dict, fit_dir: str, out_dir: str) -> dict:
    fit = _fit_spec(config)
    out = Path(out_dir)
    doc = layout.read_json(Path(fit_dir) / layout.FIT)
    points = pd.read_csv(Path(fit_dir) / layout.RUNS_CSV)
    from fits.result import FitResult

    result = FitResult.from_dict(doc["law"])
    finals = points[points["kind"] == "final"]
    largest = float(finals["flops"].max())
    prediction: dict[str, Any] = {"law": doc["summary"]["law"], "level": fit.level, "fit_on": doc["summary"]["fit_on"],
                                  "backtest": doc["backtest"], "targets": []}
    targets: list[tuple[str, float, float, float]] = []
    hero = rung_from_dict(config["hero"]) if config.get("hero") else None
    if hero:
        targets.append((hero.name, hero.model.params_active, hero.tokens, hero.flops))
    for t in config.get("targets") or []:
        from ladder.spec import ModelSpec, TargetSpec

        spec = TargetSpec(name=t["name"], model=ModelSpec(**t["model"]), tokens=t["tokens"], seq_len=t["seq_len"])
        targets.append((spec.name, spec.model.params_active, spec.tokens, spec.flops))
    samples = doc.get("bootstrap_params") or []
    boot = predict_samples(result, samples, [t[1:] for t in targets]) if samples else np.empty((0, 0))
    rows = []
    for i, (name, n, d, c) in enumerate(targets):
        central = law_predict(result, n, d, c)
        decades = math.log10(c / largest)
        lower, upper, info = prediction_interval(central, boot[:, i] if boot.size else boot, doc["backtest"], decades, fit.level)
        rows.append({"name": name, "params": n, "tokens": d, "flops": c, "loss": central, "lower": lower, "upper": upper,
                     "compute_ratio": c / largest, **info})
    if rows:
        layout.write_csv_atomic(out / layout.TARGETS_CSV, pd.DataFrame(rows))
    if hero:
        h = rows[0]
        prediction["hero"] = {"name": hero.name, "predicted_final_loss": h["loss"], "lower": h["lower"], "upper": h["upper"],
                              "level": fit.level, "law": prediction["law"], "params": h["params"], "tokens": h["tokens"],
                              "flops": h["flops"], "compute_ratio": h["compute_ratio"],
                              "interval": {k: h[k] for k in ("sigma_bootstrap", "sigma_extrapolation", "method")}}
        curve = _hero_curve(hero, h, fit_dir, doc)
        second = _hero_curve_law(hero, doc)
        if curve is not None:
            layout.write_csv_atomic(out / layout.HERO_CURVE, curve)
        if second is not None and np.all(np.isfinite(second["loss"])):
            layout.write_csv_atomic(out / "hero_curve_law.csv", second)
            prediction["hero"]["curve_law_final_train_loss"] = float(second["loss"].iloc[-1])
            prediction["hero"]["curve_law_final_eval_loss"] = float(second["loss"].iloc[-1]) * doc["curve_law"]["eval_over_train"]
    prediction["targets"] = rows[1:]
    layout.write_json_atomic(out / layout.PREDICTION, prediction)
    return {"hero": prediction.get("hero"), "targets": [r["name"] for r in rows[1:]]}
