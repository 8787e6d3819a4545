"""The hero's live forecast (heroes trained here): a snapshot at each eval past every `every` steps.

One rule with `ladder follow` (ladder.analysis.follow_forecast.snapshot): the centre is the ladder's
curve law refitted with the hero's eval points so far, or the hero's latest eval carried along the
largest rung's shape (ladder.analysis.shape_centre), whichever backtests better on the rungs at the
snapshot's horizon to the end (`centre_rule` says which); its band is calibrated by horizon on that
centre's own rung backtests and on the hero's earlier snapshots (ladder.analysis.follow_bands), so a
trained hero's snapshots and a followed hero's mean the same thing. The rungs are read from the fit step's record of
its inputs (its step.json): a trained hero does not depend on the rungs itself.

Where the rungs cannot be read from here (a remote root's hero reads its fit and prediction through
local mirrors only) or fewer than 3 have eval points, the earlier rule stands, and each snapshot's
`band_rule` says so. With the rungs' eval ratios (predict/hero_eval_ratio.csv, ladder.analysis.eval_ratios), the final is
read from the hero's latest eval over the largest rung's eval(f) / eval(end) at the same fraction f,
with the ratio's own uncertainty as the band; the curve runs from the observed point to that final
along the prior curve's shape; on the recorded heroes it beat the prior re-anchored on the eval
(below) late in the run, whose band was far too narrow (experiments/tiny_record.md has the scores).
Weighting the ratio's final with the pre-hero prediction was tried and dropped: the prediction
carries the law's bias at the hero, which the rungs cannot show, and the weighting pulled the
snapshots toward it. Early in the run the heroes sit further above their final than the largest
rung did: the ratio there still grows with size. Without the ratios (rungs with no eval before
their last), the prior re-anchored as below.

The earlier rule's re-anchoring: the prediction written before the hero started (predict/hero_curve.csv and its final eval loss in
prediction.json) comes from the rungs alone. The curve's shape is put on the eval scale by
rescaling it to end at the predicted final eval loss; each snapshot then multiplies it by the
hero's latest eval loss over that curve at the same step. Eval points, not train loss through an
eval/train ratio (which drifts with size): the held-out set is fixed, so the latest eval point is
the hero's own measurement, and a snapshot at the last step lands on the final eval loss. The band
left is the prior band's width times the fraction of the run still to go. Each snapshot is kept
(forecasts.jsonl + forecasts/<step>.csv, in eval loss); the pre-hero prediction is never changed.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import norm

from ladder.analysis.eval_ratios import HERO_EVAL_RATIO_CSV
from ladder.outputs import layout
from ladder.spec import RungSpec


def ratio_forecast(prior: pd.DataFrame, prediction: dict, observed: pd.DataFrame, total_steps: int,
                   ratio: pd.DataFrame) -> tuple[pd.DataFrame, dict]:
    """The final from the hero's latest eval over the largest rung's eval ratio at the same fraction, the
    band from that ratio's sigma at the prediction's level; the same outputs as anchored_forecast."""
    obs = observed.dropna(subset=["eval_loss"]).sort_values("step")
    at_step = int(obs["step"].iloc[-1])
    seen = float(obs["eval_loss"].iloc[-1])
    frac = at_step / max(1, total_steps)
    # Before the rungs' first eval there is no ratio to read (extrapolating it would guess; a hundredth
    # of the run is step rounding: 1,232 of 6,162 against 919 of 4,596); at the end the final eval is the answer.
    if at_step >= total_steps or frac + 0.01 < float(ratio["frac"].min()):
        return anchored_forecast(prior, float(prediction["predicted_final_loss"]), observed, total_steps)
    fracs = np.append(ratio["frac"].to_numpy(float), 1.0)
    log_ratio = float(np.interp(frac, fracs, np.append(ratio["log_ratio"].to_numpy(float), 0.0)))
    sigma = float(np.interp(frac, fracs, np.append(ratio["sigma"].to_numpy(float), 0.0)))
    z = float(norm.ppf(0.5 + float(prediction["level"]) / 2))
    log_final = math.log(seen) - log_ratio
    # The prior's shape on the eval scale, through the observed point and ending at the new final.
    steps = prior["step"].to_numpy(float)
    shape = prior["loss"].to_numpy(float)
    at_prior = float(np.interp(at_step, steps, shape))
    c_now, c_end = math.log(seen / at_prior), log_final - math.log(float(shape[-1]))
    left = np.clip((steps - at_step) / max(total_steps - at_step, 1), 0.0, 1.0)
    loss = shape * np.exp(c_now + (c_end - c_now) * left)
    curve = pd.DataFrame({"step": prior["step"], "loss": loss, "lower": loss * np.exp(-z * sigma * left),
                          "upper": loss * np.exp(z * sigma * left)})
    final = math.exp(log_final)
    summary = {"at_step": at_step, "predicted_final": final, "lower": final * math.exp(-z * sigma),
               "upper": final * math.exp(z * sigma), "correction": final / float(prediction["predicted_final_loss"]),
               "observed_eval_loss": seen, "eval_ratio": math.exp(log_ratio), "ratio_from": str(ratio["from"].iloc[0]),
               "sigma": sigma,
               "method": "the hero's latest eval over the largest rung's eval / final ratio at the same fraction of its run"}
    return curve, summary


def anchored_forecast(prior: pd.DataFrame, predicted_final: float, observed: pd.DataFrame,
                      total_steps: int) -> tuple[pd.DataFrame, dict]:
    """Re-anchor the prior curve on the hero's latest eval point.

    prior: step, loss, lower, upper (the pre-hero curve, any loss scale); predicted_final: the
    prediction's final eval loss; observed: step, eval_loss (the hero's evals so far).
    Returns the refreshed eval-loss curve (step, loss, lower, upper) and a summary.
    """
    obs = observed.dropna(subset=["eval_loss"]).sort_values("step")
    at_step = int(obs["step"].iloc[-1])
    scale = predicted_final / float(prior["loss"].iloc[-1])  # the prior's shape on the eval scale
    expected = float(np.interp(at_step, prior["step"], prior["loss"])) * scale
    correction = float(obs["eval_loss"].iloc[-1]) / expected
    frac_left = max(0.0, 1.0 - at_step / max(1, total_steps))
    curve = pd.DataFrame({"step": prior["step"]})
    curve["loss"] = prior["loss"].to_numpy(float) * scale * correction
    half_lo = (prior["loss"] - prior["lower"]).to_numpy(float) * scale * correction * frac_left
    half_hi = (prior["upper"] - prior["loss"]).to_numpy(float) * scale * correction * frac_left
    curve["lower"] = curve["loss"] - half_lo
    curve["upper"] = curve["loss"] + half_hi
    if at_step >= total_steps:  # the run is over: its final eval is the answer, not a forecast
        final, lower, upper = (float(obs["eval_loss"].iloc[-1]),) * 3
    else:
        final, lower, upper = (float(curve[c].iloc[-1]) for c in ("loss", "lower", "upper"))
    summary = {"at_step": at_step, "predicted_final": final, "lower": lower, "upper": upper,
               "correction": correction, "observed_eval_loss": float(obs["eval_loss"].iloc[-1]),
               "method": "the prior curve on the eval scale, re-anchored on the hero's latest eval point"}
    return curve, summary


class ForecastCallback:
    """Trainer callback for the hero: a snapshot at the first eval past every ``every`` steps (0: about
    8 per run), and one at the final eval."""

    def __init__(self, rung: RungSpec, out_dir: str, dep_dirs: dict[str, str], every: int = 0):
        self.out_dir = Path(out_dir)
        self.total_steps = rung.steps
        self.every = every or max(1, rung.steps // 8)
        self.rows: list[dict] = []
        predict_dir = dep_dirs.get("predict")
        path = Path(predict_dir) / layout.HERO_CURVE if predict_dir else None
        self.prior = pd.read_csv(path) if path is not None and path.exists() else None
        prediction = layout.read_json(Path(predict_dir) / layout.PREDICTION, {}) if predict_dir else {}
        self.hero_prediction = (prediction or {}).get("hero") or {}
        self.predicted_final = self.hero_prediction.get("predicted_final_loss")
        ratio_path = Path(predict_dir) / HERO_EVAL_RATIO_CSV if predict_dir else None
        self.ratio = pd.read_csv(ratio_path) if ratio_path is not None and ratio_path.exists() else None
        done = {r.get("at_step") for r in layout.iter_jsonl(self.out_dir / layout.FORECASTS)}
        self.done = {s for s in done if s is not None}
        self.dep_dirs, self.batch_tokens, self.changes = dict(dep_dirs), rung.batch_tokens, tuple(rung.changes)
        self._live: list = []  # [Live | None] once looked for: the rungs are read at the first snapshot

    def on_eval(self, step: int, row: dict) -> None:
        loss = row.get("eval_loss")
        if loss is not None and math.isfinite(loss):
            self.rows.append({"step": step, "eval_loss": float(loss)})
        if self.prior is None or self.predicted_final is None or not self.rows or step in self.done:
            return
        due = (step // self.every) * self.every
        if step >= self.total_steps or (due > 0 and not any(due <= s for s in self.done)):
            self.snapshot(step)

    def snapshot(self, step: int) -> None:
        observed = pd.DataFrame(self.rows)
        # evals from before a resume are re-read from the eval file so a snapshot sees the whole run
        earlier = layout.read_jsonl(self.out_dir / layout.EVAL)
        if not earlier.empty and "eval_loss" in earlier:
            observed = pd.concat([earlier[["step", "eval_loss"]], observed]).drop_duplicates("step", keep="last")
        observed = observed[observed["step"] <= step]
        live = self.live()
        if live is not None:
            from ladder.analysis.trained_live import live_snapshot

            curve, summary = live_snapshot(live, observed, step, self.out_dir)
        elif self.ratio is not None and self.hero_prediction.get("upper") and self.hero_prediction.get("level"):
            curve, summary = ratio_forecast(self.prior, self.hero_prediction, observed, self.total_steps, self.ratio)
        else:
            curve, summary = anchored_forecast(self.prior, float(self.predicted_final), observed, self.total_steps)
        if live is None:
            summary["band_rule"] = "the earlier rule: the rungs' eval points cannot be read from here (" + summary["method"] + ")"
        layout.write_csv_atomic(self.out_dir / layout.FORECAST_DIR / f"{step}.csv", curve)
        with open(self.out_dir / layout.FORECASTS, "a") as fh:
            fh.write(json.dumps(summary) + "\n")
        self.done.add(step)

    def live(self):
        """The follow rule's context (ladder.analysis.trained_live), looked for once; None: the earlier rule."""
        if not self._live:
            from ladder.analysis.trained_live import live_context

            self._live.append(live_context(self.dep_dirs, self.total_steps, self.batch_tokens, self.changes))
        return self._live[0]
