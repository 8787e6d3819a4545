"""A followed hero in the report: each snapshot's final, band and whole curve, its error on the points
after it beside the baselines' on the same points, the alerts and the declared changes."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ladder.analysis.follow import FOLLOW_DIR, POINTS
from ladder.outputs import layout


def curve_after(curve: pd.DataFrame, at_step: float) -> list[dict]:
    """The snapshot's curve over the rest of the run: [{tokens, loss, lower, upper}]."""
    rest = curve[curve["step"] >= at_step]
    return [{"tokens": float(r.tokens), "loss": float(r.loss), "lower": float(r.lower), "upper": float(r.upper)}
            for r in rest.itertuples()]


def score_later(curve: pd.DataFrame, later: pd.DataFrame, baselines: dict[str, pd.DataFrame]) -> dict:
    """A snapshot's curve (step, loss, lower, upper) on the points after it (step, loss), and each baseline's."""
    if later.empty:
        return {}
    s, y = later["step"].to_numpy(float), later["loss"].to_numpy(float)
    pred = np.interp(s, curve["step"], curve["loss"])
    lo, hi = np.interp(s, curve["step"], curve["lower"]), np.interp(s, curve["step"], curve["upper"])
    out = {"later_points": int(len(later)), "later_mean_abs_rel_error": float(np.mean(np.abs(pred / y - 1))),
           "later_mean_rel_error": float(np.mean(pred / y - 1)),
           "later_inside_band": float(np.mean((y >= lo) & (y <= hi))),
           "later_mean_band_half_width": float(np.mean((hi - lo) / 2 / pred))}
    for name, table in baselines.items():
        b = np.interp(s, table["step"], table["loss"])
        out[f"later_{name}_mean_abs_rel_error"] = float(np.mean(np.abs(b / y - 1)))
    return out


def snapshot_row(summary: dict, curve: pd.DataFrame | None, points: pd.DataFrame,
                 baselines: dict[str, pd.DataFrame]) -> dict:
    """report.json's row of one snapshot: its summary, its curve over the rest of the run, and its scores on
    the hero's points after it (points: step, loss) beside each baseline's; the same row however the points arrived."""
    row = dict(summary)
    if curve is None:
        return row
    row["curve"] = curve_after(curve, summary["at_step"])
    if not points.empty:
        row.update(score_later(curve, points[points["step"] > summary["at_step"]], baselines))
    return row


def followed(ladder_dir: Path, baselines: dict[str, pd.DataFrame]) -> dict | None:
    """report.json's hero.snapshots / hero.events / hero.follow for a followed hero, or None."""
    out = ladder_dir / FOLLOW_DIR
    if not (out / layout.FORECASTS).exists():
        return None
    points = layout.read_jsonl(out / POINTS)
    snaps = []
    for s in layout.iter_jsonl(out / layout.FORECASTS):
        path = out / layout.FORECAST_DIR / f"{s['at_step']}.csv"
        snaps.append(snapshot_row(s, pd.read_csv(path) if path.exists() else None, points, baselines))
    events = list(layout.iter_jsonl(out / layout.EVENTS))
    state = layout.read_json(out / "state.json", {}) or {}
    return {"snapshots": snaps, "events": events,
            "follow": {"polls": state.get("polls"), "last_step": state.get("last_step"), "done": state.get("done"),
                       "alerts": sum(1 for e in events if e.get("alert")), "points": int(len(points)),
                       # declared changes whose replayed rungs' effect the live forecast carried, or why not
                       "change_effects": [{k: c[k] for k in ("step", "what", "effect", "effect_ok")}
                                          for c in state.get("changes") or [] if "effect" in c]}}
