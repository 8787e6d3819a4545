"""report.html's task section: a table of every task's forecast (method, backtest, band, actual) and one
chart per task: the rungs' checkpoints (accuracy against the loss the chosen chain runs through), the
fitted step-2 sigmoid, the hero's forecast with its band at its predicted loss, and its actual."""

from __future__ import annotations

import html
from typing import Any

import numpy as np
import pandas as pd

from ladder.report.figures import ACTUAL, OURS, _clean, _layout

TABLE_COLS = [("task", "task", ""), ("method", "method (from the backtest)", ""), ("predicted", "predicted", ".3f"),
              ("lower", "lower", ".3f"), ("upper", "upper", ".3f"), ("actual", "actual", ".3f"),
              ("error", "error (points)", "+.1f"), ("inside", "inside interval", ""), ("bt", "backtest mean |error| (points)", ""),
              ("bt_on", "backtest", "")]


def _drawn(row: dict) -> str:
    """The figure's caption: the method whose chain it draws (under the weighted rule, the heaviest)."""
    drawn = row.get("drawn") or row.get("method")
    return str(drawn) if drawn == row.get("method") else f"weighted; drawn: {drawn}"


def fig_id(task: str) -> str:
    return "f-task-" + "".join(ch if ch.isalnum() else "-" for ch in task)


def _x_column(row: dict) -> str | None:
    cfg = (row.get("law") or {}).get("config") or {}
    return cfg.get("loss")  # the chain's loss column; None for the single-step law


def figure(row: dict, points: pd.DataFrame) -> dict | None:
    """Accuracy against the chain's loss: rungs' checkpoints, the step-2 sigmoid, the hero's forecast and actual."""
    from fits.laws.registry import build_law

    xcol, ycol = _x_column(row), "task_acc/" + row["task"]
    if row.get("predicted") is None:
        return None
    if xcol is None:
        return _single_step_figure(row, points, ycol)
    if points.empty or xcol not in points or ycol not in points:
        return None
    use = points[["run", xcol, ycol]].dropna()
    traces: list[dict[str, Any]] = [
        {"x": [_clean(v) for v in use[xcol]], "y": [_clean(v) for v in use[ycol]], "mode": "markers",
         "name": "rungs' checkpoints", "text": list(use["run"]), "marker": {"size": 4, "color": "#6baed6", "opacity": 0.6}}]
    law = build_law(row["law"]["name"], row["law"]["params"], row["law"]["config"])
    hero_x = row.get("chain_loss")
    lo = float(min(use[xcol].min(), hero_x if hero_x is not None else np.inf))
    hi = float(use[xcol].max())
    grid = np.linspace(lo * 0.97, hi, 120)
    traces.append({"x": [_clean(v) for v in grid], "y": [_clean(v) for v in law.step2.predict(grid)], "mode": "lines",
                   "name": "step 2: accuracy from the loss", "line": {"color": "#1f77b4", "width": 2}})
    if hero_x is not None:
        p = row["predicted"]
        traces.append({"x": [hero_x], "y": [p], "mode": "markers", "name": f"hero: forecast, {row['level']:.0%} band",
                       "marker": {"symbol": "diamond", "size": 12, "color": OURS},
                       "error_y": {"type": "data", "symmetric": False, "array": [row["upper"] - p],
                                   "arrayminus": [p - row["lower"]], "color": OURS}})
        if row.get("actual") is not None:
            ax = row.get("actual_chain_loss") if row.get("actual_chain_loss") is not None else hero_x
            traces.append({"x": [ax], "y": [row["actual"]], "mode": "markers", "name": "hero: actual (at its own loss)",
                           "marker": {"symbol": "star", "size": 13, "color": ACTUAL}})
    lay = _layout(xcol.replace("task_bpb/", "task loss (bits per byte): ").replace("loss", "loss", 1), "accuracy")
    lay["xaxis"]["type"] = "linear"
    lay["height"] = 360
    return {"data": traces, "layout": lay}


def _single_step_figure(row: dict, points: pd.DataFrame, ycol: str) -> dict | None:
    """The single-step law against compute (6 N D): the rungs' finals, the law along the hero's tokens
    per parameter from the smallest rung's N to the hero's, the hero's forecast with its band and actual."""
    from fits.laws.registry import build_law

    hero = row.get("hero") or {}
    if points.empty or ycol not in points or not hero.get("params"):
        return None
    fin = points.sort_values("tokens").groupby("run").tail(1).dropna(subset=[ycol])
    law = build_law(row["law"]["name"], row["law"]["params"], row["law"]["config"])
    N_h, D_h = float(hero["params"]), float(hero["tokens"])
    grid = np.geomspace(float(fin["params"].min()), N_h, 80)
    C_h = 6.0 * N_h * D_h
    traces: list[dict[str, Any]] = [
        {"x": [_clean(v) for v in 6.0 * fin["params"] * fin["tokens"]], "y": [_clean(v) for v in fin[ycol]],
         "mode": "markers", "name": "rungs' finals", "text": list(fin["run"]), "marker": {"size": 7, "color": "#6baed6"}},
        {"x": [_clean(v) for v in 6.0 * grid * grid * D_h / N_h], "y": [_clean(v) for v in law.predict(grid, grid * D_h / N_h)],
         "mode": "lines", "name": "single-step law at the hero's tokens per parameter", "line": {"color": "#1f77b4", "width": 2}},
        {"x": [C_h], "y": [row["predicted"]], "mode": "markers", "name": f"hero: forecast, {row['level']:.0%} band",
         "marker": {"symbol": "diamond", "size": 12, "color": OURS},
         "error_y": {"type": "data", "symmetric": False, "array": [row["upper"] - row["predicted"]],
                     "arrayminus": [row["predicted"] - row["lower"]], "color": OURS}}]
    if row.get("actual") is not None:
        traces.append({"x": [C_h], "y": [row["actual"]], "mode": "markers", "name": "hero: actual",
                       "marker": {"symbol": "star", "size": 13, "color": ACTUAL}})
    lay = _layout("training compute 6ND (FLOPs)", "accuracy")
    lay["height"] = 360
    return {"data": traces, "layout": lay}


def section(rows: list[dict], summary: dict | None, points: pd.DataFrame, table) -> tuple[str, dict[str, dict]]:
    """The section's HTML (its table drawn by `table`, the page's own) and its figures by element id;
    ("", {}) without task rows."""
    if not rows:
        return "", {}
    table_rows = []
    for r in rows:
        bt = r.get("backtest") or {}
        mae = bt.get("mae_by_method") or {}
        weights = bt.get("weights") or {}
        table_rows.append({**r, "bt": ", ".join(f"{m} {v:.2f}" + (f" (weight {weights[m]:.2f})" if m in weights else "")
                                                for m, v in mae.items() if v == v) or r.get("note"),
                           "bt_on": f"{', '.join(bt.get('predict') or [])} from {len(bt.get('fit_on') or [])} smaller runs"
                           if bt else None})
    figs = {fig_id(r["task"]): f for r in rows if (f := figure(r, points)) is not None}
    cards = "".join(f"<div><h3>{html.escape(r['task'])} ({html.escape(_drawn(r))})</h3>"
                    f"<div id='{fig_id(r['task'])}' class='fig'></div></div>" for r in rows if fig_id(r["task"]) in figs)
    head = ""
    if summary:
        head = (f"<p>On the {summary['scored']} tasks the hero has: mean |error| {summary['mean_abs_error_points']:.2f} "
                f"points, {summary['within_2_points']} within 2 points, {summary['inside_interval']} inside their "
                f"{summary['level']:.0%} intervals (mean half-width {summary['mean_half_width_points']:.1f} points).</p>")
    body = (head + "<p class='muted'>Each task's methods are scored on the rungs alone: the largest size's runs "
            "predicted from the smallest cut's sizes, the farthest backtest the rungs allow (mean |error| in accuracy "
            "points per method). The weighted rule weighs every method's forecast by 1 / that error squared (the chart "
            "draws the heaviest method's chain); the best rule takes the one with the lowest. The band adds the runs' "
            "bootstrap (step 1), the checkpoints' scatter about the sigmoid (step 2), the backtests' error per decade "
            "of N at the hero's distance, and under the weighted rule the methods' spread at the hero.</p>"
            + table(table_rows, TABLE_COLS) + f"<div class='grid'>{cards}</div>")
    return f"<section id='tasks'><h2>Task accuracy forecasts ({_count(rows)})</h2>{body}</section>", figs


def lines(rep: dict) -> list[str]:
    """The report's text lines for the tasks: each forecast, its method and the backtest that chose it."""
    rows = rep.get("tasks") or []
    if not rows:
        return []
    out = ["", f"task accuracy ({_count(rows)}; methods scored by backtest on the rungs: the largest size from the smallest cut)"]
    for r in rows:
        if r.get("predicted") is None:
            out.append(f"  {r['task']:<14} no forecast: {r.get('note')}")
            continue
        act = (f"  actual {100 * r['actual']:.1f}  error {r['error']:+.1f}  inside {'yes' if r['inside'] else 'no'}"
               if r.get("actual") is not None else "")
        out.append(f"  {r['task']:<14} {100 * r['predicted']:5.1f} [{100 * r['lower']:.1f}, {100 * r['upper']:.1f}]{act}  "
                   + method_text(r))
    s = rep.get("tasks_summary")
    if s:
        out.append(f"  tasks: mean |error| {s['mean_abs_error_points']:.2f} points over {s['scored']}, {s['within_2_points']} "
                   f"within 2 points, {s['inside_interval']} inside their {s['level']:.0%} intervals "
                   f"(mean half-width {s['mean_half_width_points']:.1f} points)")
    return out


def method_text(row: dict) -> str:
    """How a task's forecast was made, in one phrase: the chosen method and every method's backtest error,
    or the weighted rule's weights beside each method's error."""
    bt = row.get("backtest") or {}
    mae, weights = bt.get("mae_by_method") or {}, bt.get("weights")
    if weights:
        return ("weighted by backtest (" + ", ".join(f"{m} {weights[m]:.2f} at {mae[m]:.2f}" for m in
                sorted(weights, key=weights.get, reverse=True)) + " points)")
    return (f"{row['method']} (backtest mean |error| {mae.get(row['method'], float('nan')):.2f} points; "
            + ", ".join(f"{m} {v:.2f}" for m, v in mae.items() if m != row["method"] and v == v) + ")")


def _count(rows: list) -> str:
    return f"{len(rows)} task{'' if len(rows) == 1 else 's'}"
