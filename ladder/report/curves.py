"""The report's curve-forecast part: the hero's predicted curve (rungs only) and band, the baselines
(Marin's), the backtests and their coverage, the hero's recorded points against both, and the
forecast snapshots refitted from the hero's own points.

Keys (report.json):
  hero.curve               [{step, tokens, loss, lower, upper}] over the hero's whole run, rungs only
  hero.backtests, hero.coverage, hero.asymptote_E, hero.interval
  hero.partial             the hero's recorded curve stops short of its steps (no actual final yet)
  hero.recorded            the hero's recorded points against ours (and each baseline), from COMPARE_FROM on
  hero.snapshots           [{at_frac, at_step, predicted_final, lower, upper, later_mean_abs_rel_error, ...,
                            curve: [{tokens, loss, lower, upper}] over the rest of the run}]
  hero.events, hero.follow a followed hero's alerts and marks, and where `ladder follow` stands
  hero.changes             the hero's declared changes (hero.changes in the spec)
  baselines.<name>         {predicted_final_loss, lower, upper, level, law, method, curve, recorded}
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ladder.outputs import layout
from ladder.outputs.readers import COMPARE_FROM_FRAC

# The first 10% of a run is warmup and the fast early drop, where a per-fraction law has least
# to stand on (Marin's own forecast starts at 5%); the comparison starts here, the same start as
# the report's and the dashboard's point-by-point comparison.
COMPARE_FROM = COMPARE_FROM_FRAC


def _curve_records(frame: pd.DataFrame) -> list[dict]:
    cols = [c for c in ("step", "tokens", "frac", "loss", "lower", "upper") if c in frame]
    out = frame[cols].astype(float).to_dict("records")
    for r in out:
        r.setdefault("lower", None)
        r.setdefault("upper", None)
    return out


def compare(curve: pd.DataFrame, points: pd.DataFrame, start: float = COMPARE_FROM) -> dict[str, Any] | None:
    """A predicted curve (frac, loss, optional lower/upper) against recorded points from `start` on."""
    pts = points[points["frac"] >= start - 1e-12]
    if pts.empty:
        return None
    fr = pts["frac"].to_numpy(float)
    pred = np.interp(fr, curve["frac"], curve["loss"])
    err = pred / pts["loss"].to_numpy(float) - 1.0
    out = {"from_frac": start, "to_frac": float(fr.max()), "n_points": int(len(pts)),
           "mean_abs_rel_error": float(np.mean(np.abs(err))), "mean_rel_error": float(np.mean(err)),
           "max_abs_rel_error": float(np.max(np.abs(err)))}
    if "lower" in curve and curve["lower"].notna().all():
        lo = np.interp(fr, curve["frac"], curve["lower"])
        hi = np.interp(fr, curve["frac"], curve["upper"])
        actual = pts["loss"].to_numpy(float)
        out["inside_band"] = float(np.mean((actual >= lo) & (actual <= hi)))
        out["mean_band_half_width"] = float(np.mean((hi - lo) / 2 / pred))
    return out


def add_progress(report: dict, prediction: dict, dep_dirs: dict[str, str], config: dict,
                 tables: dict[str, pd.DataFrame]) -> None:
    """Fill the curve-forecast keys of `report` in place (nothing when the prediction has no curve law)."""
    from ladder.analysis.curve_laws import BASELINE_MARIN_CSV
    from ladder.analysis.snapshots import hero_points, imported_snapshots

    p = (prediction or {}).get("hero") or {}
    hero = report.get("hero")
    predict_dir = dep_dirs.get("predict")
    hero_dir = dep_dirs.get(config.get("hero") or "")
    if hero and hero_dir and (Path(hero_dir) / layout.FORECASTS).exists():
        hero["snapshots"] = trained_snapshots(hero_dir)
    if hero is not None and predict_dir:
        hero["changes"] = list(config.get("hero_changes") or [])
    if hero is not None and predict_dir and not p.get("source"):  # a hero trained here, followed with `ladder follow`
        from ladder.analysis.follow_report import followed

        trained_live = followed(Path(predict_dir).parent, {})
        if trained_live is not None:
            hero.update(trained_live)
    if not hero or not p.get("source") or not predict_dir:
        return
    curve = pd.read_csv(Path(predict_dir) / layout.HERO_CURVE)
    for key in ("backtests", "coverage", "asymptote_E", "interval", "source", "tokens", "flops"):
        hero[key] = p.get(key)
    hero["curve"] = _curve_records(curve)
    baselines: dict[str, Any] = {}
    for name, b in ((prediction or {}).get("baselines") or {}).items():
        path = Path(predict_dir) / (BASELINE_MARIN_CSV if name == "marin" else f"baseline_{name}.csv")
        table = pd.read_csv(path) if path.exists() else pd.DataFrame()
        baselines[name] = {**b, "curve": _curve_records(table) if not table.empty else []}
        tables[f"baseline/{name}"] = table
    report["baselines"] = baselines
    from ladder.analysis.follow_report import followed

    live = followed(Path(predict_dir).parent, {n: tables[f"baseline/{n}"] for n in baselines
                                               if not tables[f"baseline/{n}"].empty})
    if live is not None:  # `ladder follow`: its snapshots are the hero's forecast history
        hero.update(live)

    if not hero_dir:
        return
    result = layout.read_json(Path(hero_dir) / layout.RESULT, {}) or {}
    total = int(result.get("steps") or round(curve["step"].iloc[-1] / curve["frac"].iloc[-1]))
    pts = hero_points(hero_dir, total)
    if pts.empty:
        return
    if result.get("partial"):
        # a curve stopped short: its last point is not the final loss, so nothing is scored as one
        hero.update({"partial": True, "completed_frac": result.get("completed_frac"), "note": result.get("note"),
                     "actual_final_loss": None, "relative_error": None, "inside_interval": None})
    hero["recorded"] = compare(curve, pts)
    for name, b in baselines.items():
        table = tables.get(f"baseline/{name}")
        if table is not None and not table.empty:
            b["recorded"] = compare(table, pts)
    if live is None:  # the same rule and the same rows as a followed hero's (ladder.analysis.snapshots)
        hero["snapshots"] = imported_snapshots(dep_dirs["fit"], predict_dir, pts, {
            n: tables[f"baseline/{n}"] for n in baselines if not tables[f"baseline/{n}"].empty})
    tables["hero_recorded"] = pts


def trained_snapshots(hero_dir: str) -> list[dict]:
    """A hero trained here: each forecast snapshot (forecasts.jsonl) scored on the evals after it as a
    followed hero's is (ladder.analysis.follow_report.score_later: error, inside the band, half-width)."""
    from ladder.analysis.follow_report import curve_after, score_later

    evals = layout.read_jsonl(Path(hero_dir) / layout.EVAL)
    # tokens per step from the hero's own evals: its snapshot files are by step
    per_step = None
    if not evals.empty and {"tokens", "step"} <= set(evals.columns) and float(evals["step"].max()) > 0:
        last = evals.sort_values("step").iloc[-1]
        per_step = float(last["tokens"]) / float(last["step"])
    points = evals.rename(columns={"eval_loss": "loss"})[["step", "loss"]] if "eval_loss" in evals else pd.DataFrame()
    out = []
    for snap in layout.iter_jsonl(Path(hero_dir) / layout.FORECASTS):
        row = dict(snap)
        path = Path(hero_dir) / layout.FORECAST_DIR / f"{snap['at_step']}.csv"
        curve = pd.read_csv(path) if path.exists() else None
        if curve is None or not {"lower", "upper"} <= set(curve.columns):
            out.append(row)
            continue
        if "tokens" not in curve and per_step:
            curve = curve.assign(tokens=curve["step"] * per_step)
        if "tokens" in curve:
            row["curve"] = curve_after(curve, snap["at_step"])
        if not points.empty:
            row.update(score_later(curve, points[points["step"] > snap["at_step"]], {}))
        out.append(row)
    return out
