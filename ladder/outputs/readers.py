"""The one definition of each number the report and the dashboard both show.

Both read a ladder's files through :class:`ladder.outputs.files.FileCache` and these functions, so
a number cannot differ between them: the hero's actual series (interval means), where the
comparison with the forecast starts, which points are outside the band, each point's error for
our forecast and for a baseline (Marin's), the law's parameters with their bootstrap intervals,
when a step began running and a run's throughput.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import numpy as np

from ladder.outputs import layout
from ladder.outputs.files import JsonlTable, num

# The first 10% of a run is warmup and the descent from the initial loss (ln vocab), which no law
# of loss against compute describes and where a per-fraction law has least to stand on; the
# comparison with the forecast starts there, in the report, the dashboard and the curve forecast's
# own scoring (ladder.report.curves). Defined on the predicted curve's x (its last point is the
# run's end).
COMPARE_FROM_FRAC = 0.10
HERO_ACTUAL = "hero_actual"  # the imported run compared with the hero's forecast (import-wandb --as)
BASELINE_MARIN_CSV = "baseline_marin.csv"  # predict: Marin's method's hero curve (step, tokens, frac, loss)


def _col(rows, key: str) -> np.ndarray:
    if isinstance(rows, JsonlTable):
        c = rows.column(key)
        return np.full(len(rows), np.nan) if c is None else np.array(c, dtype=float)
    return np.array([v if isinstance(v := r.get(key), int | float) and not isinstance(v, bool) else np.nan
                     for r in rows], dtype=float)


def actual_series(rows) -> dict[str, np.ndarray]:
    """A run's loss series as compared with a forecast: step, tokens and the logged interval's mean
    loss where the trainer wrote one (``loss_mean``), else the logged step's loss (as
    ladder.analysis.interval_loss); one row per step (the last wins), sorted by step."""
    if len(rows) == 0:
        return {k: np.empty(0) for k in ("step", "tokens", "loss")}
    step, tokens = _col(rows, "step"), _col(rows, "tokens")
    loss, mean = _col(rows, "loss"), _col(rows, "loss_mean")
    loss = np.where(np.isfinite(mean), mean, loss)
    ok = np.isfinite(step) & np.isfinite(loss)
    step, tokens, loss = step[ok], tokens[ok], loss[ok]
    # the last row of each step wins (a resumed run rewrites the steps after its checkpoint)
    rev = np.unique(step[::-1], return_index=True)[1]
    keep = np.sort(len(step) - 1 - rev)
    return {"step": step[keep], "tokens": tokens[keep], "loss": loss[keep]}


def _x_key(predicted: list[dict], series: dict[str, np.ndarray]) -> str | None:
    """Tokens where both sides have them (a recorded run's steps may count another batch), else steps."""
    for key in ("tokens", "step"):
        px = _col(predicted, key)
        if np.isfinite(px).sum() >= 2 and len(series[key]) and np.isfinite(series[key]).all():
            return key
    return None


def comparison_start(predicted: list[dict], xkey: str) -> float:
    """Where the comparison starts on ``xkey``: COMPARE_FROM_FRAC of the predicted run, or the
    predicted curve's first point if later."""
    px = _col(predicted, xkey)
    px = px[np.isfinite(px)]
    return max(float(px.max()) * COMPARE_FROM_FRAC, float(px.min())) if len(px) else math.inf


def compare(predicted: list[dict], series: dict[str, np.ndarray], baseline: list[dict] | None = None) -> dict[str, Any]:
    """The actual points against the predicted curve and band (interpolated at each point), and
    against a baseline's curve where one is given.

    Returns {"x": the key matched on, "start": where judging starts, "points": [{step, tokens,
    loss, predicted, lower, upper, inside, error, marin, marin_error}]} for the points from the
    start to the predicted curve's end; ``error`` is predicted / actual - 1.
    """
    xkey = _x_key(predicted, series) if predicted else None
    if xkey is None:
        return {"x": None, "start": None, "points": []}
    px, mid, lo, hi = (_col(predicted, k) for k in (xkey, "loss", "lower", "upper"))
    ok = np.isfinite(px) & np.isfinite(mid) & np.isfinite(lo) & np.isfinite(hi)
    if ok.sum() < 2:
        return {"x": xkey, "start": None, "points": []}
    order = np.argsort(px[ok])
    px, mid, lo, hi = px[ok][order], mid[ok][order], lo[ok][order], hi[ok][order]
    start = comparison_start(predicted, xkey)
    ax = series[xkey]
    judged = np.flatnonzero((ax >= start) & (ax <= px[-1]))
    x = ax[judged]
    pred, a_lo, a_hi = np.interp(x, px, mid), np.interp(x, px, lo), np.interp(x, px, hi)
    marin = np.full(len(x), np.nan)
    if baseline:
        bx, by = _col(baseline, xkey), _col(baseline, "loss")
        good = np.isfinite(bx) & np.isfinite(by)
        if good.sum() >= 2:
            o = np.argsort(bx[good])
            bx, by = bx[good][o], by[good][o]
            inside_b = (x >= bx[0]) & (x <= bx[-1])
            marin = np.where(inside_b, np.interp(x, bx, by), np.nan)
    points = []
    for j, i in enumerate(judged):
        y = float(series["loss"][i])
        m = float(marin[j]) if np.isfinite(marin[j]) else None
        points.append({"step": _int(series["step"][i]), "tokens": _int(series["tokens"][i]), "loss": y,
                       "predicted": float(pred[j]), "lower": float(a_lo[j]), "upper": float(a_hi[j]),
                       "inside": bool(a_lo[j] <= y <= a_hi[j]), "error": float(pred[j]) / y - 1.0,
                       "marin": m, "marin_error": None if m is None else m / y - 1.0})
    return {"x": xkey, "start": start, "points": points}


def _int(v: float) -> float | int | None:
    if not math.isfinite(v):
        return None
    return int(v) if float(v).is_integer() else float(v)


def exits(points: list[dict]) -> list[dict]:
    """The compared points outside the band, each with the side it left on."""
    return [{**p, "side": "above" if p["loss"] > p["upper"] else "below"} for p in points if not p["inside"]]


def exit_stretches(points: list[dict]) -> list[dict]:
    """Contiguous runs of points outside the band: where each starts and ends, its side, how far out."""
    out: list[dict] = []
    cur = None
    for p in points:
        if p["inside"]:
            cur = None
            continue
        side = "above" if p["loss"] > p["upper"] else "below"
        gap = p["loss"] - p["upper"] if side == "above" else p["lower"] - p["loss"]
        if cur is not None and cur["side"] == side:
            cur.update(to_step=p["step"], max_gap=max(cur["max_gap"], gap), points=cur["points"] + 1)
            continue
        cur = {"from_step": p["step"], "to_step": p["step"], "side": side, "max_gap": gap, "points": 1}
        out.append(cur)
    return out


def summary(cmp: dict[str, Any]) -> dict[str, Any]:
    """The comparison's headline numbers: points judged, inside, mean |error| (ours and Marin's)."""
    pts = cmp["points"]
    if not pts:
        return {"points": 0}
    err = np.array([p["error"] for p in pts])
    half = np.array([p[cmp["x"]] for p in pts], dtype=float) >= pts[-1][cmp["x"]] / 2 if cmp["x"] else np.ones(len(pts), bool)
    out = {"points": len(pts), "x": cmp["x"], "start": cmp["start"], "first_step": pts[0]["step"],
           "inside": int(sum(p["inside"] for p in pts)), "outside": int(sum(not p["inside"] for p in pts)),
           "fraction_inside": float(np.mean([p["inside"] for p in pts])),
           "mean_abs_error": float(np.mean(np.abs(err))),
           "mean_abs_error_second_half": float(np.mean(np.abs(err[half]))),
           "last": pts[-1]}
    marin = [p["marin_error"] for p in pts if p["marin_error"] is not None]
    if marin:
        out["marin_points"] = len(marin)
        out["marin_mean_abs_error"] = float(np.mean(np.abs(marin)))
    return out


# ------------------------------------------------------------------------------------------
# The fit.


def find_law(obj: Any, depth: int = 0) -> dict | None:
    """The final-loss law inside fit.json: a dict with 'law' and 'params' (FitResult.to_dict()).
    Prefers a compute law at the top or under 'final'/'law'/'laws'."""
    if depth > 4 or not isinstance(obj, dict):
        return None
    if isinstance(obj.get("law"), str) and isinstance(obj.get("params"), dict):
        return obj
    found = []
    for key in ("final", "law", "laws", "compute", "fit", "loss_law"):
        if key in obj:
            f = find_law(obj[key], depth + 1)
            if f:
                found.append(f)
    if not found:
        for v in obj.values():
            f = find_law(v, depth + 1) if isinstance(v, dict) else None
            if f:
                found.append(f)
    for f in found:
        if f.get("law") == "compute":
            return f
    return found[0] if found else None


def fit_level(fit_doc: dict) -> float:
    s = fit_doc.get("summary") if isinstance(fit_doc.get("summary"), dict) else {}
    return num(s.get("level")) or num(fit_doc.get("level")) or 0.9


def param_rows(fit_doc: Any) -> list[dict]:
    """The law's parameters with their intervals: the law's own ``ci`` where it has one, else the
    percentiles of the fit's bootstrap refits (fit.json ``bootstrap_params``) at the fit's level."""
    if not isinstance(fit_doc, dict):
        return []
    law = find_law(fit_doc)
    if law is None:
        return []
    level = fit_level(fit_doc)
    ci = law.get("ci") if isinstance(law.get("ci"), dict) else {}
    boot = [s for s in fit_doc.get("bootstrap_params") or [] if isinstance(s, dict)]
    rows = []
    for k, v in (law.get("params") or {}).items():
        lo = hi = None
        n = 0
        if isinstance(ci.get(k), list) and len(ci[k]) >= 2:
            lo, hi = num(ci[k][0]), num(ci[k][1])
        else:
            vals = np.array([x for s in boot if (x := num(s.get(k))) is not None])
            n = len(vals)
            if n >= 5:
                lo, hi = (float(q) for q in np.percentile(vals, [50 * (1 - level), 50 * (1 + level)]))
        rows.append({"law": law.get("law"), "param": k, "value": num(v), "lower": lo, "upper": hi,
                     "level": level if lo is not None else None, "bootstrap_samples": n or None})
    return rows


def backtest_rows(fit_doc: Any) -> list[dict]:
    """The fit's backtest as table rows (one per held-out prediction)."""
    from ladder.outputs.files import scalars

    if not isinstance(fit_doc, dict):
        return []
    bt = fit_doc.get("backtest")
    if bt is None:
        bt = next((v["backtest"] for v in fit_doc.values() if isinstance(v, dict) and "backtest" in v), None)
    if isinstance(bt, dict):
        bt = {k: (", ".join(map(str, v)) if isinstance(v, list) and all(isinstance(x, str | int | float) for x in v) else v)
              for k, v in bt.items()}
        for key in ("rows", "points", "runs", "held_out"):
            if isinstance(bt.get(key), list) and all(isinstance(x, dict) for x in bt[key]):
                summary_ = scalars(bt)
                return [{**scalars(r), **{f"summary.{k}": v for k, v in summary_.items()}} for r in bt[key]]
        return [scalars(bt)] if scalars(bt) else []
    if isinstance(bt, list):
        return [scalars(r) for r in bt if isinstance(r, dict)]
    return []


def hero_prediction(pred: Any) -> dict:
    """The hero's entry of prediction.json: its 'hero' object, else the top level (flat form)."""
    if not isinstance(pred, dict):
        return {}
    h = pred.get("hero")
    if isinstance(h, dict):
        return {**{k: v for k, v in pred.items() if k in ("law", "level")}, **h}
    return pred


# ------------------------------------------------------------------------------------------
# Steps.


def started(status: Any, progress: Any) -> Any:
    """When a step began running: its progress' ``started`` (set when the worker starts it), else
    the lease's start (taken when the driver queued it)."""
    if isinstance(progress, dict) and num(progress.get("started")) is not None:
        return progress["started"]
    return status.get("start") if isinstance(status, dict) else None


def tokens_per_s(progress: Any, result: Any) -> float | None:
    """A run's throughput: the finished run's (result.json: tokens over the time it trained), else
    the latest logging interval's (progress.json) while it runs."""
    if isinstance(result, dict) and num(result.get("tokens_per_s")) is not None:
        return num(result["tokens_per_s"])
    return num(progress.get("tokens_per_s")) if isinstance(progress, dict) else None


def _hero_series(files, hero_dir) -> dict[str, np.ndarray]:
    """The hero's eval points (trained here or recorded with import-results): the forecast's final is an
    eval loss, and the train loss's step-to-step noise crossed the band some 30 times on tiny's hero with
    no news in it (issue 47); the train loss only where the hero has fewer than two evals."""
    from ladder.outputs import layout

    evals = [{**r, "loss": r.get("eval_loss")} for r in files.jsonl(hero_dir / layout.EVAL)]
    series = actual_series(evals)
    if len(series["step"]) >= 2:
        return series
    metrics = files.jsonl(hero_dir / layout.METRICS)
    return actual_series(metrics) if len(metrics) else series


def hero_comparisons(files, predict_dir, hero_dir, imported: dict) -> dict[str, dict[str, Any]]:
    """Every actual hero curve against the forecast: the hero trained here (its eval points) and each
    imported run named hero* (import-wandb --as hero_actual).
    {name: compare(...)}, the trained hero first."""
    from ladder.outputs import layout

    if predict_dir is None:
        return {}
    predicted = files.csv(predict_dir / layout.HERO_CURVE)
    baseline = files.csv(predict_dir / BASELINE_MARIN_CSV)
    out: dict[str, dict[str, Any]] = {}
    if hero_dir is not None:
        out["hero"] = compare(predicted, _hero_series(files, hero_dir), baseline)
    for name, d in imported.items():
        if name.startswith("hero"):
            out[name] = compare(predicted, actual_series(files.jsonl(d / layout.METRICS)), baseline)
    return out


TASK_KEYS = ("task", "method", "predicted", "lower", "upper", "level", "actual", "error", "inside", "note")


def hero_tasks(files, report_dir: Path | None) -> list[dict]:
    """The report's task forecasts (report.json "tasks"), flat for a table: the dashboard's hero page."""
    doc = files.json(report_dir / layout.REPORT, {}) if report_dir is not None else {}
    return [{k: r.get(k) for k in TASK_KEYS} for r in ((doc or {}).get("tasks") or []) if isinstance(r, dict)]
