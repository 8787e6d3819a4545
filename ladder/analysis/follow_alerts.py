"""The alerts of a followed hero, as pure functions of the follow state and what a poll brought.

- band_exit: a new eval point outside the band of the latest snapshot made before it (the rungs-only
  band before the first); once per excursion: the next alert needs a point back inside first, or
  one on the other side;
- forecast_moved: the forecast of the final moved by more than `move` (relative) since the last such
  alert (or the first snapshot); default a third of the current band's half-width;
- stalled: no new point for `stall` polls in a row; once, until a point comes;
- change: the hero passed a declared change (hero.changes): a mark, not an alert.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

ALERTS = ("band_exit", "forecast_moved", "stalled")


def score_points(new: pd.DataFrame, curve: pd.DataFrame, state: dict, snapshot_at: int | None) -> list[dict]:
    """band_exit events for the new points (step, tokens, loss) against `curve` (step, loss, lower, upper)."""
    events = []
    first = float(curve["step"].min())
    for p in new.itertuples():
        if p.step < first:  # before the law's support: nothing to score against
            continue
        pred, lo, hi = (float(np.interp(p.step, curve["step"], curve[c])) for c in ("loss", "lower", "upper"))
        side = "above" if p.loss > hi else "below" if p.loss < lo else None
        if side is not None and state.get("excursion") != side:
            events.append({"kind": "band_exit", "alert": True, "step": int(p.step), "tokens": _f(p.tokens),
                           "loss": float(p.loss), "predicted": pred, "lower": lo, "upper": hi, "side": side,
                           "snapshot_at": snapshot_at,
                           "message": f"step {int(p.step)}: eval loss {p.loss:.4f} {side} the band [{lo:.4f}, {hi:.4f}]"})
        state["excursion"] = side
    return events


def forecast_move(summary: dict, state: dict, move: float | None) -> list[dict]:
    final = float(summary["predicted_final"])
    ref = state.get("ref_final")
    if ref is None:
        state["ref_final"] = final
        return []
    limit = move if move is not None else (summary["upper"] - summary["lower"]) / 2 / final / 3
    change = final / ref - 1.0
    if abs(change) <= limit:
        return []
    state["ref_final"] = final
    return [{"kind": "forecast_moved", "alert": True, "step": int(summary["at_step"]), "predicted_final": final,
             "previous_final": ref, "relative_move": change, "threshold": limit,
             "lower": summary["lower"], "upper": summary["upper"],
             "message": f"step {summary['at_step']}: forecast of the final moved {change:+.2%} to {final:.4f} "
                        f"(from {ref:.4f}; threshold {limit:.2%})"}]


def stall(state: dict, got_points: bool, polls: int, last_step: int | None) -> list[dict]:
    if got_points:
        state["stall_polls"], state["stall_alerted"] = 0, False
        return []
    state["stall_polls"] = int(state.get("stall_polls") or 0) + 1
    if state["stall_polls"] < polls or state.get("stall_alerted"):
        return []
    state["stall_alerted"] = True
    return [{"kind": "stalled", "alert": True, "step": last_step, "polls": state["stall_polls"],
             "message": f"no new point for {state['stall_polls']} polls (last step {last_step})"}]


def changes_passed(changes: tuple, before: int | None, now: int) -> list[dict]:
    """A mark for each declared change the hero's points passed in this poll."""
    return [{"kind": "change", "alert": False, "step": c.step, "what": c.what, "note": c.note,
             "message": f"step {c.step}: {c.what} ({c.note})" if c.note else f"step {c.step}: {c.what}"}
            for c in changes if (before is None or before < c.step) and c.step <= now]


def _f(x) -> float | None:
    try:
        v = float(x)
    except (TypeError, ValueError):
        return None
    return v if np.isfinite(v) else None
