"""The hero's forecast refreshed from its own eval points as they come (imported or trained here).

Each snapshot refits the chosen curve law (ladder.analysis.curve_laws) with the hero's points up to
it and forecasts the rest; every snapshot is kept, with its forecast of the final and its error on
the hero's recorded points after it, so a user sees how the forecast moved and when it settled.
The pre-hero prediction (rungs only) is never changed.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ladder.outputs import layout

SNAPSHOT_EVERY = 0.05  # of the hero's steps


def hero_points(hero_dir: str | Path, total_steps: int) -> pd.DataFrame:
    """The hero's recorded eval points: step, frac, tokens, loss (frac > 0)."""
    ev = layout.read_jsonl(Path(hero_dir) / layout.EVAL)
    if ev.empty or "eval_loss" not in ev:
        return pd.DataFrame(columns=["step", "frac", "tokens", "loss"])
    out = pd.DataFrame({"step": ev["step"].astype(int), "frac": ev["step"].to_numpy(float) / total_steps,
                        "tokens": ev["tokens"].astype(float), "loss": ev["eval_loss"].astype(float)})
    return out[(out["frac"] > 0) & np.isfinite(out["loss"])].sort_values("step").reset_index(drop=True)


def snapshot_fracs(points: pd.DataFrame, every: float = SNAPSHOT_EVERY) -> list[float]:
    """Every `every` of the run that has points before it, and the last recorded point."""
    last = float(points["frac"].max())
    grid = [g for g in np.arange(every, last + 1e-12, every) if (points["frac"] <= g + 1e-12).sum() >= 2]
    out = [float(round(g, 6)) for g in grid]
    if not out or last - out[-1] > 1e-9:
        out.append(last)
    return out


def snapshots(fit_dir: str, hero_pts: pd.DataFrame, prior: pd.DataFrame, level: float,
              out_dir: str | None = None) -> list[dict]:
    """One refit per snapshot fraction; returns their summaries (and writes each curve under out_dir/snapshots/)."""
    from fits.matched_progress_choice import CANDIDATES, calibration_pairs
    from fits.matched_progress_forecast import snapshot
    from ladder.analysis.curve_laws import POINTS_CSV, axes

    doc = layout.read_json(Path(fit_dir) / layout.FIT) or {}
    progress = doc.get("progress") or {}
    if not progress.get("chosen") or hero_pts.empty:
        return []
    points = pd.read_csv(Path(fit_dir) / POINTS_CSV)
    axis = next(a for a in axes(points, progress["hero_totals"]) if a.name == progress["chosen"]["axis"])
    fit_fn = CANDIDATES[progress["chosen"]["candidate"]]
    fracs = prior["frac"].to_numpy(float)
    sigma = np.log(prior["upper"].to_numpy(float) / prior["loss"].to_numpy(float)) / _z(level)
    pairs = calibration_pairs(axis.points)
    out = []
    for at in snapshot_fracs(hero_pts):
        curve, info = snapshot(axis, fit_fn, hero_pts[["frac", "loss"]], at, fracs, level, sigma,
                               float(progress["forecast"]["decades"]), pairs=pairs)
        later = hero_pts[hero_pts["frac"] > at + 1e-12]
        row = {k: info[k] for k in ("at_frac", "n_points", "E", "predicted_final", "lower", "upper", "band_rule")}
        row["at_step"] = int(round(at * float(prior["step"].iloc[-1] / prior["frac"].iloc[-1])))
        if not later.empty:
            pred = np.interp(later["frac"], curve["frac"], curve["loss"])
            lo = np.interp(later["frac"], curve["frac"], curve["lower"])
            hi = np.interp(later["frac"], curve["frac"], curve["upper"])
            row.update({"later_points": int(len(later)),
                        "later_mean_abs_rel_error": float(np.mean(np.abs(pred / later["loss"].to_numpy() - 1))),
                        "later_inside_band": float(np.mean((later["loss"] >= lo) & (later["loss"] <= hi))),
                        "later_mean_band_half_width": float(np.mean((hi - lo) / 2 / pred))})
        steps = curve["frac"].to_numpy(float) * float(prior["step"].iloc[-1] / prior["frac"].iloc[-1])
        rest = steps >= row["at_step"]
        tokens = np.interp(steps, prior["step"], prior["tokens"]) if "tokens" in prior else steps * np.nan
        row["curve"] = [{"tokens": float(t), "loss": float(lo_), "lower": float(a), "upper": float(b)}
                        for t, lo_, a, b in zip(tokens[rest], curve["loss"][rest], curve["lower"][rest],
                                                curve["upper"][rest], strict=True)]
        out.append(row)
        if out_dir is not None:
            layout.write_csv_atomic(Path(out_dir) / "snapshots" / f"{row['at_step']}.csv", curve)
    return out


def _z(level: float) -> float:
    from scipy.stats import norm

    return float(norm.ppf(0.5 + level / 2))
