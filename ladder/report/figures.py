"""The report's interactive figures, as plotly figure dicts (drawn by the plotly.js bundled in the page).

Each takes the report's numbers and tables (ladder.report.build.build) and the files the report read, and
returns {"data": [...], "layout": {...}} or None when there is nothing to draw. Colours: our
forecast red, Marin's purple, actual points black, band exits magenta, rungs a sequential scale by
size (seeds of one size share a colour and a legend entry).
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

OURS, MARIN, ACTUAL, EXIT = "#d62728", "#6a3d9a", "#111111", "#ff00aa"
SIZES = ("#c6dbef", "#9ecae1", "#6baed6", "#4292c6", "#2171b5", "#08519c", "#08306b")
FRACTIONS = (0.1, 0.25, 0.5, 0.75, 1.0)


def _clean(v: Any) -> Any:
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, np.generic):
        return _clean(v.item())
    return v


def _xy(frame: pd.DataFrame, x: str, y: str) -> tuple[list, list]:
    if frame is None or frame.empty or x not in frame or y not in frame:
        return [], []
    f = frame[[x, y]].astype(float).replace([np.inf, -np.inf], np.nan).dropna()
    return [_clean(v) for v in f[x]], [_clean(v) for v in f[y]]


def _layout(xtitle: str, ytitle: str, **extra) -> dict:
    lay = {"margin": {"l": 64, "r": 16, "t": 16, "b": 52}, "height": 460, "hovermode": "closest",
           "xaxis": {"title": {"text": xtitle}, "type": "log"}, "yaxis": {"title": {"text": ytitle}},
           "legend": {"font": {"size": 11}, "x": 1.01, "xanchor": "left", "y": 1}, "paper_bgcolor": "#fff",
           "plot_bgcolor": "#fff"}
    for k, v in extra.items():
        lay[k] = {**lay.get(k, {}), **v} if isinstance(v, dict) else v
    return lay


def _band(x: list, lo: list, hi: list, name: str, color: str, group: str) -> list[dict]:
    return [{"x": x, "y": lo, "mode": "lines", "line": {"width": 0}, "hoverinfo": "skip", "showlegend": False,
             "legendgroup": group, "name": name + " lower"},
            {"x": x, "y": hi, "mode": "lines", "line": {"width": 0}, "fill": "tonexty", "fillcolor": color,
             "legendgroup": group, "name": name}]


def rung_series(tables: dict[str, pd.DataFrame], name: str) -> pd.DataFrame:
    """A rung's curve as the report draws it: train loss as interval means (the forecast's quantity
    for a ladder trained here), else its eval points (a ladder imported from recorded curves)."""
    from ladder.outputs.readers import actual_series

    m = tables.get(f"metrics/{name}")
    if m is not None and not m.empty and "loss" in m:
        s = actual_series(m.to_dict("records"))
        f = pd.DataFrame(s)
        if "flops" in m and "tokens" in m and len(m):
            fpt = float((m["flops"] / m["tokens"]).replace([np.inf], np.nan).dropna().median()) if m["tokens"].gt(0).any() else np.nan
            f["flops"] = f["tokens"] * fpt
        return f.assign(kind="train")
    e = tables.get(f"eval/{name}")
    if e is not None and not e.empty and "eval_loss" in e:
        return e.rename(columns={"eval_loss": "loss"}).assign(kind="eval")
    return pd.DataFrame()


def rungs_figure(rep: dict, tables: dict[str, pd.DataFrame], law_curve: pd.DataFrame, pred: pd.DataFrame,
                 actual: pd.DataFrame | None) -> dict | None:
    """Each rung's curve against compute, the law over compute with its band, the hero's predicted
    curve and actual points, and at each fraction of the runs the rungs' points joined to the hero's
    prediction at the same fraction: what the law says at that fraction."""
    rungs = [r for r in rep.get("rungs", []) if r.get("flops")]
    sizes = sorted({r.get("params_active") for r in rungs if r.get("params_active")})
    traces: list[dict] = []
    seen: set = set()
    at_frac: dict[float, list[tuple[float, float]]] = {f: [] for f in FRACTIONS}
    for r in rungs:
        s = rung_series(tables, r["name"])
        if s.empty or "flops" not in s:
            continue
        i = sizes.index(r["params_active"]) if r.get("params_active") in sizes else 0
        color = SIZES[min(len(SIZES) - 1, 2 + round(i * (len(SIZES) - 3) / max(1, len(sizes) - 1)))]
        group = f"N={r.get('params_active'):.3g}" if r.get("params_active") else r["name"]
        x, y = _xy(s, "flops", "loss")
        traces.append({"x": x, "y": y, "mode": "lines", "name": f"rungs {group}", "legendgroup": group,
                       "showlegend": group not in seen, "line": {"color": color, "width": 1.4},
                       "hovertemplate": f"{r['name']}<br>C %{{x:.3g}}<br>loss %{{y:.4f}}<extra></extra>"})
        seen.add(group)
        steps = s["step"].to_numpy(float)
        for f in FRACTIONS:
            at = f * steps.max()
            if steps.min() <= at:
                at_frac[f].append((float(np.interp(at, steps, s["flops"])), float(np.interp(at, steps, s["loss"]))))
    if not traces:
        return None
    if law_curve is not None and not law_curve.empty:
        x, lo = _xy(law_curve, "flops", "lower")
        _, hi = _xy(law_curve, "flops", "upper")
        traces += _band(x, lo, hi, "law's band (final loss)", "rgba(31,119,180,0.12)", "law")
        x, y = _xy(law_curve, "flops", "loss")
        traces.append({"x": x, "y": y, "mode": "lines", "name": "law on final loss", "legendgroup": "law",
                       "line": {"color": "#1f77b4", "dash": "dash", "width": 1.5}})
    if pred is not None and not pred.empty and "flops" in pred:
        from ladder.outputs.readers import COMPARE_FROM_FRAC

        x, y = _xy(pred[pred["step"] >= COMPARE_FROM_FRAC * pred["step"].max()], "flops", "loss")
        traces.append({"x": x, "y": y, "mode": "lines", "name": "hero: our forecast", "line": {"color": OURS, "width": 2}})
        total = float(pred["step"].max())
        for f in FRACTIONS:
            at = pred.iloc[(pred["step"] - f * total).abs().argmin()]
            pts = sorted(at_frac[f] + [(float(at["flops"]), float(at["loss"]))])
            traces.append({"x": [p[0] for p in pts], "y": [p[1] for p in pts], "mode": "lines+markers",
                           "name": "at the same fraction of each run (10, 25, 50, 75, 100%)",
                           "legendgroup": "fractions", "showlegend": f == FRACTIONS[0],
                           "line": {"color": "rgba(90,90,90,0.55)", "dash": "dot", "width": 1},
                           "marker": {"size": 5, "color": "rgba(90,90,90,0.8)"},
                           "hovertemplate": f"{f:.0%} of the run<br>C %{{x:.3g}}<br>loss %{{y:.4f}}<extra></extra>"})
    if actual is not None and not actual.empty and pred is not None and "flops" in pred:
        fpt = float(pred["flops"].iloc[-1] / pred["tokens"].iloc[-1])
        traces.append({"x": [_clean(v) for v in actual["tokens"] * fpt], "y": [_clean(v) for v in actual["actual"]],
                       "mode": "markers", "name": "hero: actual", "marker": {"color": ACTUAL, "size": 5}})
    ys = [v for t in traces for v in t["y"] if v is not None]
    lay = _layout("training compute C (FLOPs)", "loss", yaxis={"type": "log"})
    if ys:
        lo = min(ys)
        hi = float(np.quantile(ys, 0.9))
        lay["yaxis"]["range"] = [math.log10(lo * 0.97), math.log10(hi * 1.1)]
    return {"data": traces, "layout": lay}


def hero_figure(pred: pd.DataFrame, baseline: pd.DataFrame, actuals: dict[str, pd.DataFrame], start: float | None,
                labels: dict[str, str]) -> dict | None:
    """The hero: our band and forecast, Marin's curve, the actual points and the ones outside the band."""
    if pred is None or pred.empty:
        return None
    xk = "tokens" if "tokens" in pred else "step"
    x, lo = _xy(pred, xk, "lower")
    _, hi = _xy(pred, xk, "upper")
    traces = _band(x, lo, hi, "our band", "rgba(214,39,40,0.15)", "ours")
    x, y = _xy(pred, xk, "loss")
    traces.append({"x": x, "y": y, "mode": "lines", "name": labels.get("ours", "our forecast"), "legendgroup": "ours",
                   "line": {"color": OURS, "width": 2}})
    if baseline is not None and not baseline.empty:
        bx, by = _xy(baseline, xk, "loss")
        traces.append({"x": bx, "y": by, "mode": "lines+markers", "name": labels.get("marin", "Marin's forecast"),
                       "line": {"color": MARIN, "width": 2, "dash": "dash"}, "marker": {"size": 5}})
    for name, f in actuals.items():
        ax, ay = _xy(f, xk, "actual")
        many = len(ax) > 200
        traces.append({"x": ax, "y": ay, "mode": "lines" if many else "markers",
                       "name": labels.get(name, f"actual: {name}"), "line": {"color": ACTUAL, "width": 1.2},
                       "marker": {"color": ACTUAL, "size": 6}})
        out = f[~f["inside"].astype(bool)]
        ox, oy = _xy(out, xk, "actual")
        if ox:
            traces.append({"x": ox, "y": oy, "mode": "markers", "name": f"outside our band ({len(ox)})",
                           "marker": {"symbol": "x", "size": 9, "color": EXIT}})
    ys = [y for t in traces[1:] for x, y in zip(t["x"], t["y"], strict=True)
          if y is not None and x is not None and x >= (start or 0)]
    lay = _layout(xk, "loss")
    if ys:
        lay["yaxis"]["range"] = [min(ys) * 0.985, max(ys) * 1.015]
    if start:
        from ladder.outputs.readers import COMPARE_FROM_FRAC

        lay["xaxis"]["range"] = [math.log10(start / 3), math.log10(max(v for v in x if v) * 1.1)]
        lay["shapes"] = [{"type": "line", "xref": "x", "yref": "paper", "x0": start, "x1": start, "y0": 0, "y1": 1,
                          "line": {"color": "#888", "dash": "dot", "width": 1}}]
        lay["annotations"] = [{"x": math.log10(start), "xref": "x", "y": 1, "yref": "paper", "showarrow": False,
                               "xanchor": "left", "yanchor": "top", "text": f" comparison starts ({COMPARE_FROM_FRAC:.0%} of the run)",
                               "font": {"size": 11, "color": "#555"}}]
    return {"data": traces, "layout": lay}


def error_figure(actuals: dict[str, pd.DataFrame], xk: str) -> dict | None:
    """Each actual point's error, ours and Marin's side by side: predicted / actual - 1."""
    traces = []
    for name, f in actuals.items():
        if f.empty:
            continue
        x, y = _xy(f.assign(pct=f["rel_error"] * 100), xk, "pct")
        traces.append({"x": x, "y": y, "mode": "lines+markers" if len(x) < 200 else "lines", "name": f"ours ({name})",
                       "line": {"color": OURS}, "marker": {"size": 5}})
        if "marin_error" in f and f["marin_error"].notna().any():
            x, y = _xy(f.assign(pct=f["marin_error"].astype(float) * 100), xk, "pct")
            traces.append({"x": x, "y": y, "mode": "lines+markers", "name": f"Marin's ({name})",
                           "line": {"color": MARIN, "dash": "dash"}, "marker": {"size": 5}})
    if not traces:
        return None
    lay = _layout(xk, "error: predicted / actual − 1 (%)", height=340,
                  shapes=[{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 0, "y1": 0, "line": {"color": "#999"}}])
    return {"data": traces, "layout": lay}


def law_figure(rep: dict, runs: pd.DataFrame, law_curve: pd.DataFrame) -> dict | None:
    """Final loss against compute: the rungs, the law with its band, the hero's prediction and actual."""
    if runs is None or runs.empty or "flops" not in runs:
        return None
    traces = []
    if law_curve is not None and not law_curve.empty:
        x, lo = _xy(law_curve, "flops", "lower")
        _, hi = _xy(law_curve, "flops", "upper")
        traces += _band(x, lo, hi, "law's band", "rgba(31,119,180,0.16)", "law")
        x, y = _xy(law_curve, "flops", "loss")
        traces.append({"x": x, "y": y, "mode": "lines", "name": "fitted law", "line": {"color": "#1f77b4", "width": 2}})
    kinds = runs["kind"] if "kind" in runs else pd.Series("final", index=runs.index)
    finals = runs[kinds == "final"]
    x, y = _xy(finals, "flops", "loss")
    traces.append({"x": x, "y": y, "mode": "markers", "name": "rungs (final)", "text": list(finals.get("name", [])),
                   "marker": {"size": 9, "color": "#ff7f0e", "line": {"color": "#fff", "width": 1}}})
    other = runs[kinds != "final"]
    if not other.empty:
        x, y = _xy(other, "flops", "loss")
        traces.append({"x": x, "y": y, "mode": "markers", "name": "cooldown branches", "marker": {"size": 6, "color": "#ffbb78"}})
    h = rep.get("hero") or {}
    if h.get("flops") and h.get("predicted_final_loss") is not None:
        p = h["predicted_final_loss"]
        traces.append({"x": [h["flops"]], "y": [p], "mode": "markers", "name": "hero: our forecast",
                       "marker": {"symbol": "diamond", "size": 12, "color": OURS},
                       "error_y": {"type": "data", "symmetric": False, "array": [h["upper"] - p], "arrayminus": [p - h["lower"]],
                                   "color": OURS}})
        if h.get("actual_final_loss") is not None:
            traces.append({"x": [h["flops"]], "y": [h["actual_final_loss"]], "mode": "markers", "name": "hero: actual",
                           "marker": {"symbol": "star", "size": 13, "color": ACTUAL}})
    return {"data": traces, "layout": _layout("training compute C (FLOPs)", "final eval loss", yaxis={"type": "log"})}
