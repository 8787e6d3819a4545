"""The hero's live forecast: every K steps, refit the prediction with the hero's own partial curve.

The prediction written before the hero started (predict/hero_curve.csv) comes from the rungs
alone. As the hero trains, its own curve says how far it runs from that prediction: each
snapshot anchors the remaining predicted curve to the hero's observed loss over the most recent
stretch (a multiplicative correction, fitted in log space) and shrinks the band toward the
correction's own uncertainty. Each snapshot is kept (forecasts.jsonl + forecasts/<step>.csv), so
the report shows how the forecast moved; the prediction written before the start is never changed.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from ladder import layout
from ladder.spec import RungSpec


def anchored_forecast(prior: pd.DataFrame, observed: pd.DataFrame, total_steps: int) -> tuple[pd.DataFrame, dict]:
    """Correct the prior curve by the hero's observed ratio to it over the last quarter observed.

    prior: step, loss, lower, upper (the pre-hero prediction). observed: step, loss (train loss rows).
    Returns the refreshed curve (same columns) and a summary (at_step, predicted_final, lower, upper).
    """
    obs = observed.dropna(subset=["loss"]).sort_values("step")
    at_step = int(obs["step"].iloc[-1])
    recent = obs[obs["step"] >= at_step * 0.75]
    prior_at = np.interp(recent["step"], prior["step"], prior["loss"])
    log_ratio = np.log(recent["loss"].to_numpy(float)) - np.log(prior_at)
    shift = float(np.mean(log_ratio))
    # Per-batch noise of the ratio, shrunk by the number of points; the band keeps at least that.
    shift_se = float(np.std(log_ratio) / math.sqrt(max(1, len(log_ratio))))
    frac_left = max(0.0, 1.0 - at_step / max(1, total_steps))
    curve = prior.copy()
    factor = math.exp(shift)
    curve["loss"] = prior["loss"] * factor
    # The prior band covers the whole extrapolation; what is left of it scales with the run still to go.
    half_lo = (prior["loss"] - prior["lower"]) * factor * frac_left
    half_hi = (prior["upper"] - prior["loss"]) * factor * frac_left
    floor = curve["loss"] * (math.exp(2 * shift_se) - 1)
    curve["lower"] = curve["loss"] - np.maximum(half_lo, floor)
    curve["upper"] = curve["loss"] + np.maximum(half_hi, floor)
    final = curve.iloc[-1]
    summary = {"at_step": at_step, "predicted_final": float(final["loss"]), "lower": float(final["lower"]),
               "upper": float(final["upper"]), "correction": factor, "method": "anchored on the last 25% observed"}
    return curve, summary


class ForecastCallback:
    """Trainer callback for the hero: a forecast snapshot every ``every`` steps (0: about 8 per run)."""

    def __init__(self, rung: RungSpec, out_dir: str, dep_dirs: dict[str, str], every: int = 0):
        self.out_dir = Path(out_dir)
        self.total_steps = rung.steps
        self.every = every or max(1, rung.steps // 8)
        self.rows: list[dict] = []
        predict_dir = dep_dirs.get("predict")
        path = Path(predict_dir) / layout.HERO_CURVE if predict_dir else None
        self.prior = pd.read_csv(path) if path is not None and path.exists() else None
        done = {r.get("at_step") for r in layout.iter_jsonl(self.out_dir / layout.FORECASTS)}
        self.done = {s for s in done if s is not None}

    def on_step(self, step: int, row: dict) -> None:
        if "loss" in row and row["loss"] is not None and math.isfinite(row["loss"]):
            self.rows.append({"step": step, "loss": float(row["loss"])})
        # Logged steps need not be multiples of `every`: snapshot at the first logged step past each due point.
        due = (step // self.every) * self.every
        if self.prior is None or due == 0 or len(self.rows) < 4 or any(due <= s for s in self.done):
            return
        self.snapshot(step)

    def snapshot(self, step: int) -> None:
        observed = pd.DataFrame(self.rows)
        observed = observed[observed["step"] <= step]
        # Rows from before a resume are re-read from the metrics file so a snapshot sees the whole curve.
        earlier = layout.read_jsonl(self.out_dir / layout.METRICS)
        if not earlier.empty and "loss" in earlier:
            earlier = earlier[earlier["step"] <= step][["step", "loss"]]
            observed = pd.concat([earlier, observed]).drop_duplicates("step", keep="last")
        curve, summary = anchored_forecast(self.prior, observed, self.total_steps)
        layout.write_csv_atomic(self.out_dir / layout.FORECAST_DIR / f"{step}.csv", curve)
        with open(self.out_dir / layout.FORECASTS, "a") as fh:
            import json

            fh.write(json.dumps(summary) + "\n")
        self.done.add(step)
