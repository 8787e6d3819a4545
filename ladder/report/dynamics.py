"""report.html's training-dynamics section: per metric the rungs' trajectories against the fraction of
the run, the hero's envelope per tenth (ladder.analysis.dynamics), the hero's steps over it and the
ones outside it, with the envelope's backtest and the hero's inside rate under each chart.

Upper-only metrics (drop rate, load max/mean) are drawn on a linear axis, their band from the floor:
a log axis has no place for the drop rate's floor 0. The two-sided ones (grad norm, router-bias norm)
span decades over a run and across sizes: log axis.
"""

from __future__ import annotations

import html

import pandas as pd

from ladder.analysis.dynamics import inside
from ladder.report.figures import ACTUAL, EXIT, SIZES, _layout

LABELS = {"grad_norm": "gradient norm", "drop_rate": "token drop rate",
          "expert_load_max_over_mean": "expert load: max / mean",
          "router_bias_norm": "router-bias norm (RMS over layers)"}
BAND, CENTRE = "rgba(44,160,44,0.18)", "#2ca02c"


def fig_id(metric: str) -> str:
    return f"f-dyn-{metric}"


def _segments(env: list[dict]) -> list[list[dict]]:
    """The envelope's tenths in runs of adjacent ones (a tenth fewer than 3 rungs reached is a gap)."""
    runs: list[list[dict]] = []
    for row in sorted(env, key=lambda r: r["frac_lo"]):
        if runs and abs(runs[-1][-1]["frac_hi"] - row["frac_lo"]) < 1e-9:
            runs[-1].append(row)
        else:
            runs.append([row])
    return runs


def _steps(rows: list[dict], key: str) -> tuple[list, list]:
    """A step line: each tenth's value held flat from its start to its end."""
    xs, ys = [], []
    for r in rows:
        xs += [r["frac_lo"], r["frac_hi"]]
        ys += [r[key], r[key]]
    return xs, ys


def outside_points(chart: dict) -> pd.DataFrame:
    """The hero's steps outside its envelope, judged by ladder.analysis.dynamics.inside (the report's
    inside rate counts the same steps)."""
    h, metric = chart["hero"], chart["metric"]
    if not h.get("step") or not chart["envelope"]:
        return pd.DataFrame(columns=["step", "frac", "value"])
    scored = inside(pd.DataFrame({"step": h["step"], "frac": h["frac"], metric: h["value"]}),
                    pd.DataFrame(chart["envelope"]), metric)
    return scored[~scored["inside"]] if not scored.empty else pd.DataFrame(columns=["step", "frac", "value"])


def figure(chart: dict, level: float) -> dict | None:
    """One metric's chart (plotly figure dict), or None without an envelope."""
    env, metric = chart.get("envelope") or [], chart["metric"]
    if not env:
        return None
    traces: list[dict] = []
    rungs = chart.get("rungs") or []
    for i, r in enumerate(rungs):
        color = SIZES[min(len(SIZES) - 1, 2 + round(i * (len(SIZES) - 3) / max(1, len(rungs) - 1)))]
        traces.append({"x": r["frac"], "y": r["value"], "mode": "lines", "name": r["name"], "opacity": 0.7,
                       "line": {"color": color, "width": 1},
                       "hovertemplate": f"{r['name']}<br>%{{x:.1%}} of the run<br>%{{y:.4g}}<extra></extra>"})
    what = f"hero's envelope ({level:.0%}" + (", upper bound)" if chart.get("upper_only") else ")")
    for k, seg in enumerate(_segments(env)):
        x, lo = _steps(seg, "lower")
        _, hi = _steps(seg, "upper")
        traces.append({"x": x, "y": lo, "mode": "lines", "line": {"width": 0, "color": CENTRE}, "hoverinfo": "skip",
                       "showlegend": False, "legendgroup": "env", "name": what + " lower edge"})
        traces.append({"x": x, "y": hi, "mode": "lines", "line": {"width": 0.8, "color": CENTRE}, "fill": "tonexty",
                       "fillcolor": BAND, "legendgroup": "env", "showlegend": k == 0, "name": what})
        x, c = _steps(seg, "centre")
        traces.append({"x": x, "y": c, "mode": "lines", "line": {"color": CENTRE, "dash": "dash", "width": 1.4},
                       "legendgroup": "centre", "showlegend": k == 0, "name": "envelope centre (the rungs' line at the hero's size)"})
    h = chart.get("hero") or {}
    if h.get("step"):
        many = len(h["step"]) > 200
        traces.append({"x": h["frac"], "y": h["value"], "mode": "lines" if many else "lines+markers", "name": "hero",
                       "line": {"color": ACTUAL, "width": 1.2}, "marker": {"color": ACTUAL, "size": 4},
                       "text": [f"step {s}" for s in h["step"]],
                       "hovertemplate": "hero %{text}<br>%{x:.1%} of the run<br>%{y:.4g}<extra></extra>"})
        out = outside_points(chart)
        if not out.empty:
            traces.append({"x": [float(v) for v in out["frac"]], "y": [float(v) for v in out["value"]], "mode": "markers",
                           "name": f"hero outside the envelope ({len(out)})", "text": [f"step {int(s)}" for s in out["step"]],
                           "marker": {"symbol": "x", "size": 9, "color": EXIT}})
    log = not chart.get("upper_only")
    lay = _layout("fraction of the run", LABELS.get(metric, metric), height=440,
                  xaxis={"type": "linear", "range": [0, 1], "tickformat": ".0%"},
                  yaxis={"type": "log" if log else "linear"},
                  legend={"x": 0, "xanchor": "left", "y": -0.2, "yanchor": "top", "orientation": "h"},
                  margin={"b": 120})
    return {"data": traces, "layout": lay}


def _caption(metric: str, dyn: dict) -> str:
    """The envelope's backtest on the largest rung and the hero's inside rate, for one metric."""
    parts = []
    for b in dyn.get("backtests") or []:
        if b["metric"] == metric:
            parts.append(f"backtest: {html.escape(b['predict'])} from {html.escape(', '.join(b['fit_on']))}: "
                         f"{b['inside']:.0%} of {b['points']} steps inside the {b['level']:.0%} envelope")
    for h in dyn.get("hero") or []:
        if h["metric"] == metric:
            first = (f", first outside at step {h['first_outside_step']:,}" if h.get("first_outside_step") is not None
                     else "")
            cls = "ok" if h["inside"] >= float(dyn.get("level") or 0) else "bad"
            parts.append(f"hero: <span class='{cls}'>{h['inside']:.0%}</span> of {h['points']} steps inside{first}")
    return "<p class='muted'>" + ("; ".join(parts) or "no backtest (fewer than 4 rungs) and no hero steps yet") + "</p>"


def section(dyn: dict) -> tuple[str, dict[str, dict]]:
    """The section's HTML (one card per metric with a chart) and its figures by element id; ("", {}) without charts."""
    level = float(dyn.get("level") or 0.9)
    figs = {fig_id(c["metric"]): f for c in dyn.get("charts") or [] if (f := figure(c, level)) is not None}
    if not figs:
        return "", {}
    cards = []
    for c in dyn["charts"]:
        if fig_id(c["metric"]) not in figs:
            continue
        bound = " (upper bound, from its floor)" if c.get("upper_only") else ""
        cards.append(f"<div><h3>{html.escape(LABELS.get(c['metric'], c['metric']))}{bound}</h3>"
                     f"<div id='{fig_id(c['metric'])}' class='fig'></div>{_caption(c['metric'], dyn)}</div>")
    rule = html.escape(str(dyn.get("rule") or ""))
    body = (f"<p class='muted'>Each rung's trajectory against the fraction of its run; the band is the hero's "
            f"{level:.0%} envelope per tenth of the run, extrapolated from the rungs to the hero's size ({rule}). "
            f"The hero's steps are drawn over it, those outside marked ×.</p>"
            f"<div class='grid'>{''.join(cards)}</div>")
    title = "Training dynamics: the hero against its rungs' envelopes"
    return f"<section id='dynamics'><h2>{html.escape(title)}</h2>{body}</section>", figs
