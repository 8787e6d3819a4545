"""Curve laws on imported eval curves: the matched-progress laws (fits.matched_progress), chosen by backtests
on the rungs (fits.matched_progress_choice), the hero's whole curve with its band, and Marin's forecast as a
named baseline (fits.marin).

Compute axes tried: 6ND (6 x active params x tokens), ours (spec.py's FLOPs, with the lm_head and
attention), and the baseline's own figures where the spec gives them (Marin's lm_head-free count).
The axis is part of the candidate, so the backtests choose it too.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ladder.outputs import layout
from ladder.spec import FitSpec, RungSpec

POINTS_CSV = "progress_points.csv"
HERO_PROGRESS_CSV = "hero_progress.csv"
BASELINE_MARIN_CSV = "baseline_marin.csv"


def curve_points(rung_names: list[str], dep_dirs: dict[str, str], fit: FitSpec) -> tuple[pd.DataFrame, dict[str, bool]]:
    """Every imported rung eval point with its fraction and its compute on each axis; which runs are complete."""
    from fits.marin import snap

    rows, complete = [], {}
    for name in rung_names:
        d = dep_dirs.get(name)
        result = layout.read_json(Path(d) / layout.RESULT, None) if d else None
        if not result or not result.get("curve"):
            continue
        ev = layout.read_jsonl(Path(d) / layout.EVAL)
        if ev.empty:
            continue
        steps, n = int(result["steps"]), float(result["params_active"])
        complete[name] = not result.get("partial")
        frame = pd.DataFrame({"run": name, "step": ev["step"].astype(int), "steps": steps,
                              "frac": ev["step"].to_numpy(float) / steps, "tokens": ev["tokens"].astype(float),
                              "loss": ev["eval_loss"].astype(float), "params": n})
        frame["frac_snap"] = np.round(snap(frame["step"], steps), 2)
        frame["flops_6nd"] = 6.0 * n * frame["tokens"]
        frame["total_6nd"] = 6.0 * n * float(result["spec_tokens"])
        frame["flops_ours"] = ev["flops"].astype(float)
        frame["total_ours"] = float(result["spec_flops"])
        fps = (fit.baseline_flops_per_step or {}).get(name)
        if fps:
            frame["flops_baseline"] = float(fps) * frame["step"]
            frame["total_baseline"] = float(fps) * steps
        rows.append(frame[frame["frac"] > 0])
    if not rows:
        return pd.DataFrame(), {}
    return pd.concat(rows, ignore_index=True), complete


def hero_totals(hero: RungSpec, fit: FitSpec) -> dict[str, float]:
    out = {"6nd": 6.0 * hero.model.params_active * hero.tokens, "ours": hero.flops}
    fps = (fit.baseline_flops_per_step or {}).get(hero.name)
    if fps:
        out["baseline"] = float(fps) * hero.steps
    return out


def axes(points: pd.DataFrame, totals: dict[str, float]):
    from fits.matched_progress_choice import Axis

    out = []
    for name, total in totals.items():
        if f"flops_{name}" not in points or points[f"flops_{name}"].isna().any():
            continue
        pts = points.assign(flops=points[f"flops_{name}"], total_flops=points[f"total_{name}"])
        out.append(Axis(name, pts[["run", "step", "frac", "frac_snap", "flops", "total_flops", "loss"]], total))
    return out


def hero_fracs(hero: RungSpec, first: float, n: int = 400) -> np.ndarray:
    """Fractions of the hero's run from `first` (the rungs' earliest point: the law has no support before it)."""
    start = max(1, int(np.ceil(first * hero.steps)))
    steps = np.unique(np.linspace(start, hero.steps, min(hero.steps - start + 1, n)).astype(int))
    return steps / hero.steps


def _compact(bt: dict) -> dict:
    """A backtest without its per-point lists, for the fit's summary table."""
    return {k: v for k, v in bt.items() if k not in ("frac", "actual", "predicted", "log_error", "relative_error")}


def fit_progress(config: dict, dep_dirs: dict[str, str], out_dir: str, fit: FitSpec, hero: RungSpec | None) -> dict[str, Any] | None:
    """Choose the law by backtests, forecast the hero's curve with its band, and Marin's baseline; None without curves."""
    from fits.matched_progress_choice import CANDIDATES, calibration_backtests, choose, nested_coverage, sizes
    from fits.matched_progress_forecast import forecast

    points, complete = curve_points(config["rungs"], dep_dirs, fit)
    if fit.curve_fit == "none" or points.empty or len(sizes(points, "total_ours")) < 3 or hero is None:
        return None
    out = Path(out_dir)
    layout.write_csv_atomic(out / POINTS_CSV, points)
    totals = hero_totals(hero, fit)
    table, best = choose(axes(points, totals))
    doc: dict[str, Any] = {"complete": complete, "hero_totals": totals,
                           "candidates": [{**{k: v for k, v in r.items() if k != "backtests"},
                                           "backtests": [_compact(b) for b in r["backtests"]]} for r in table]}
    if best is None:
        doc["error"] = "no candidate could be backtested on these rungs"
        return doc
    axis = next(a for a in axes(points, totals) if a.name == best["axis"])
    fracs = hero_fracs(hero, float(points.groupby("run")["frac"].min().max()))
    seeds = curve_seed_noise(points, complete)
    # The band is calibrated on every backtest the rungs allow (several distances), the method chosen on the splits.
    calibration = calibration_backtests(axis.points, CANDIDATES[best["candidate"]])
    curve, info = forecast(axis, CANDIDATES[best["candidate"]], calibration, fracs, fit.level, complete,
                           seed_sigma=float(seeds["sigma"]))
    info["seeds"] = seeds
    curve.insert(0, "step", fracs * hero.steps)
    curve.insert(1, "tokens", curve["step"] * hero.batch_tokens)
    layout.write_csv_atomic(out / HERO_PROGRESS_CSV, curve)
    doc.update({"chosen": {"candidate": best["candidate"], "axis": best["axis"], "score": best["score"]},
                "backtests": best["backtests"], "coverage": nested_coverage(calibration, fit.level, nested=False),
                "calibration_backtests": [_compact(b) for b in calibration],
                "growth": growth(calibration),
                "forecast": info, "law": f"{best['candidate']} on {best['axis']} compute"})
    if fit.baseline == "marin":
        doc["baseline_marin"] = _marin(points, fit, hero, out)
    return doc


def growth(backtests: list[dict]) -> dict:
    """How the backtests' error grows with distance: RMS log error of each, and the exponent p of
    rms = s * decades^p fitted across them (p = 1 is the band's linear rule; p < 1 would say it is too wide)."""
    rows = [{"fit_on": b["fit_on"], "predict": b["predict"], "decades": b["decades"],
             "rms_log_error": float(np.sqrt(np.mean(np.square(b["log_error"]))))} for b in backtests]
    out: dict[str, Any] = {"backtests": rows}
    d = np.array([r["decades"] for r in rows])
    e = np.array([r["rms_log_error"] for r in rows])
    if len(rows) >= 2 and np.ptp(np.log(d)) > 0.05:
        p, _ = np.polyfit(np.log(d), np.log(e), 1)
        out["exponent"] = float(p)
    out["per_decade"] = float(np.sqrt(np.mean((e / d) ** 2))) if len(rows) else None
    return out


def curve_seed_noise(points: pd.DataFrame, complete: dict[str, bool]) -> dict:
    """ladder.analysis.seeds.seed_noise on the complete runs' last points (a size: params x steps)."""
    from ladder.analysis.seeds import seed_noise

    last = points[points["run"].map(complete).fillna(False).astype(bool)].sort_values("frac").groupby("run").tail(1)
    finals = pd.DataFrame({"name": last["run"], "kind": "final", "loss": last["loss"], "tokens": last["tokens"],
                           "size": last["params"].map("{:.0f}".format) + "x" + last["steps"].astype(str)})
    return seed_noise(finals)


def _marin(points: pd.DataFrame, fit: FitSpec, hero: RungSpec, out: Path) -> dict:
    from fits.marin import MARIN_E, marin_forecast

    steps = points.groupby("run")["steps"].first().to_dict()
    fps = {r: float(fit.baseline_flops_per_step[r]) for r in steps}
    table = marin_forecast(points[["run", "step", "loss"]], steps, fps, float(fit.baseline_flops_per_step[hero.name]),
                           hero.steps, hero.batch_tokens)
    layout.write_csv_atomic(out / BASELINE_MARIN_CSV, table)
    return {"method": f"Marin's plotting script: ln(L - {MARIN_E}) = ln A - alpha ln C per 5% fraction over the rungs "
                      "(Marin's lm_head-free compute); a rung stopped early gets a linear fit of its 0.60-0.80 points "
                      "+ 0.005 past its last point; no interval",
            "predicted_final_loss": float(table["loss"].iloc[-1]), "E": MARIN_E}
