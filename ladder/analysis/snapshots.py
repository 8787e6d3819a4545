"""The forecast history of a hero whose points were recorded elsewhere (`ladder import-results`).

Its snapshots are made by the one live rule every hero has (ladder.analysis.follow_forecast.snapshot),
replayed over the recorded points as `ladder follow` would have made them had the points arrived
one 5% of the run at a time: a snapshot at the last point at or before every 5% of the run and one at
the last point, each band scored on the hero's own earlier snapshots, the hero's declared changes
carried. So an imported hero's report and a followed one's mean the same thing (the same snapshots,
the same bands). The earlier rule here refitted the law with a band calibrated at the snapshot's own
fraction only, and held 23-60% of the 535B hero's points after its mix switch (issue 47; issue 55).
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


def snapshot_steps(points: pd.DataFrame, total_steps: int, every: float = SNAPSHOT_EVERY) -> list[int]:
    """The last recorded step at or before every `every` of the run, and the last recorded step: where a
    follow polling every `every` of the run snapshots (it snapshots at its newest point)."""
    steps = np.sort(points["step"].to_numpy(int))
    grid = np.arange(every, steps[-1] / total_steps + every, every) * total_steps
    at = {int(steps[steps <= g + 1e-6][-1]) for g in grid if (steps <= g + 1e-6).any()}
    return sorted(at | {int(steps[-1])})


def replay(ctx, points: pd.DataFrame, at_steps: list[int], rungs: dict, changes: tuple = ()) -> list[tuple]:
    """(curve, summary) of each snapshot at `at_steps` (ascending) from the hero's points (step, loss), each
    scored on the snapshots before it, as `ladder follow` and a trained hero's callback make them."""
    from ladder.analysis.follow_forecast import snapshot

    hero = points[["step", "loss"]].assign(frac=points["step"].to_numpy(float) / ctx.total_steps)
    out, earlier = [], []
    for at in at_steps:
        curve, summary = snapshot(ctx, hero, at, earlier, rungs, changes)
        earlier.append({"at_frac": summary["at_frac"], "curve": curve})
        out.append((curve, summary))
    return out


def imported_snapshots(fit_dir: str, predict_dir: str, points: pd.DataFrame,
                       baselines: dict[str, pd.DataFrame]) -> list[dict]:
    """report.json's hero.snapshots for a hero's recorded points (step, loss): [] where the ladder has no
    curve forecast to follow against (follow_forecast.NoForecast)."""
    from ladder.analysis.follow_forecast import NoForecast, load_context, rung_profile
    from ladder.analysis.follow_report import snapshot_row
    from ladder.spec import rung_from_dict

    config = (layout.read_json(Path(predict_dir) / layout.STEP_JSON, {}) or {}).get("config") or {}
    if points.empty or not config.get("hero"):
        return []
    hero = rung_from_dict(config["hero"])
    try:
        ctx = load_context(fit_dir, predict_dir, hero.steps, hero.batch_tokens)
    except NoForecast:
        return []
    snaps = replay(ctx, points, snapshot_steps(points, hero.steps), rung_profile(ctx), tuple(hero.changes))
    return [snapshot_row(summary, curve, points, baselines) for curve, summary in snaps]
