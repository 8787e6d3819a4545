"""A trained hero's live snapshots by `ladder follow`'s rule (ladder.analysis.follow_forecast.snapshot).

The hero's training step depends on the fit and the prediction, not on the rungs; the rungs' eval
points (which choose the curve law and calibrate the band by horizon) are found through the fit
step's record of its inputs, as siblings of the fit's directory (a root copied or moved elsewhere
still finds its own rungs). None where they cannot be read here: see ladder.analysis.forecast.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pandas as pd

from ladder.analysis.follow_forecast import Context, NoForecast, load_context, rung_profile, snapshot
from ladder.outputs import layout


@dataclass(frozen=True)
class Live:
    ctx: Context
    rungs: dict  # the rungs' snapshot error by horizon (follow_bands.horizon_profile)
    changes: tuple


def rung_dirs(fit_dir: str) -> dict[str, str]:
    """The fit's rung inputs that exist beside it: step name -> local directory."""
    prov = layout.read_json(Path(fit_dir) / layout.STEP_JSON, {}) or {}
    out = {}
    for dep in prov.get("deps") or []:
        sibling = Path(fit_dir).parent / Path(str(dep.get("path", ""))).name
        if dep.get("step") and sibling.is_dir():
            out[str(dep["step"])] = str(sibling)
    return out


def live_context(dep_dirs: dict[str, str], total_steps: int, batch_tokens: int, changes: tuple = ()) -> Live | None:
    """The follow rule's context for a hero trained here, or None where the rungs cannot be read."""
    fit_dir, predict_dir = dep_dirs.get("fit"), dep_dirs.get("predict")
    if not fit_dir or not predict_dir or "://" in fit_dir:
        return None
    rungs = rung_dirs(fit_dir)
    try:
        ctx = load_context(fit_dir, predict_dir, total_steps, batch_tokens, {**dep_dirs, **rungs}, list(rungs))
    except NoForecast:
        return None
    return Live(ctx=ctx, rungs=rung_profile(ctx), changes=tuple(changes))


def live_snapshot(live: Live, observed: pd.DataFrame, at_step: int, out_dir: Path) -> tuple[pd.DataFrame, dict]:
    """The snapshot at `at_step` from the hero's evals so far (observed: step, eval_loss), scored against
    its own earlier snapshots of the same rule (forecasts.jsonl and forecasts/<step>.csv in out_dir)."""
    total = live.ctx.total_steps
    hero = pd.DataFrame({"step": observed["step"].astype(int), "loss": observed["eval_loss"].astype(float)})
    hero = hero[hero["step"] > 0].assign(frac=lambda f: f["step"] / total)
    earlier = []
    for s in layout.iter_jsonl(out_dir / layout.FORECASTS):
        path = out_dir / layout.FORECAST_DIR / f"{s.get('at_step')}.csv"
        curve = pd.read_csv(path) if "at_frac" in s and path.exists() else None
        if curve is not None and "frac" in curve and s["at_step"] < at_step:
            earlier.append({"at_frac": float(s["at_frac"]), "curve": curve})
    return snapshot(live.ctx, hero, at_step, earlier, live.rungs, live.changes)
