"""The comparison page (`ladder compare A B --html OUT`): B's effect against A per size with its
bands, the trend carried to the hero with its band, the backtest and the heroes' actual difference,
as one offline HTML file built from the report's pieces (its CSS, tables and plotly figure helpers).
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from ladder.report import figures
from ladder.report.html import CSS, _json_safe, _section, _table

EFFECT, TREND, HERO = "#1f77b4", "#d62728", "#111111"


def _errors(rows: list[dict], key: str, lo: str, hi: str) -> dict:
    return {"type": "data", "symmetric": False, "array": [r[hi] - r[key] for r in rows],
            "arrayminus": [r[key] - r[lo] for r in rows], "color": EFFECT}


def multiplier_figure(effect: dict) -> dict:
    """Per-size multipliers with their bands, the trend's line and band out to the hero, the hero's
    predicted multiplier and the heroes' measured one."""
    rows, curve = effect["per_size"], effect["trend"]["curve"]
    data = figures._band([c["flops"] for c in curve], [c["lower"] for c in curve], [c["upper"] for c in curve],
                         "trend band", "rgba(214,39,40,0.15)", "trend")
    data.append({"x": [c["flops"] for c in curve], "y": [c["multiplier"] for c in curve], "mode": "lines",
                 "line": {"color": TREND}, "name": "trend (fitted on the sizes)", "legendgroup": "trend"})
    hero = effect.get("at_hero")
    if hero:  # where one measured pair of heroes should land: the band widened by their own seed luck
        data.append({"x": [hero["flops"], hero["flops"]], "y": [hero["pair_lower"], hero["pair_upper"]],
                     "mode": "lines", "line": {"color": TREND, "width": 1, "dash": "dot"},
                     "name": "one pair of heroes (their own luck too)"})
    data.append({"x": [r["flops_b"] for r in rows], "y": [r["multiplier"] for r in rows], "mode": "markers",
                 "marker": {"color": EFFECT, "size": 9}, "text": [r["size"] for r in rows], "name": "per size",
                 "error_y": _errors(rows, "multiplier", "lower", "upper")})
    if hero:
        data.append({"x": [hero["flops"]], "y": [hero["multiplier"]], "mode": "markers", "name": "at the hero (predicted)",
                     "marker": {"color": TREND, "size": 11, "symbol": "diamond"},
                     "error_y": _errors([hero], "multiplier", "lower", "upper") | {"color": TREND}})
    measured = effect.get("heroes")
    if measured and hero:
        data.append({"x": [hero["flops"]], "y": [measured["multiplier"]], "mode": "markers", "name": "heroes (measured)",
                     "marker": {"color": HERO, "size": 11, "symbol": "x"}})
    lay = figures._layout("B's compute (FLOPs)", "compute-equivalent multiplier (>1: B better)",
                          yaxis={"type": "log"},
                          shapes=[{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 1, "y1": 1,
                                   "line": {"color": "#888", "dash": "dot", "width": 1}}])
    return {"data": data, "layout": lay}


def delta_figure(effect: dict) -> dict:
    """Per-size loss differences with their bands, the hero's predicted difference and the heroes' actual one."""
    rows = effect["per_size"]
    data = [{"x": [r["flops_b"] for r in rows], "y": [r["delta"] for r in rows], "mode": "markers",
             "marker": {"color": EFFECT, "size": 9}, "text": [r["size"] for r in rows], "name": "per size",
             "error_y": _errors(rows, "delta", "delta_lower", "delta_upper")}]
    hero = effect.get("at_hero")
    if hero:
        data.append({"x": [hero["flops"]], "y": [hero["delta"]], "mode": "markers", "name": "at the hero (predicted)",
                     "marker": {"color": TREND, "size": 11, "symbol": "diamond"},
                     "error_y": _errors([hero], "delta", "delta_lower", "delta_upper") | {"color": TREND}})
    measured = effect.get("heroes")
    if measured and hero:
        data.append({"x": [hero["flops"]], "y": [measured["delta"]], "mode": "markers", "name": "heroes (actual)",
                     "marker": {"color": HERO, "size": 11, "symbol": "x"}})
    lay = figures._layout("B's compute (FLOPs)", "final loss, B minus A (<0: B better)",
                          shapes=[{"type": "line", "xref": "paper", "x0": 0, "x1": 1, "y0": 0, "y1": 0,
                                   "line": {"color": "#888", "dash": "dot", "width": 1}}])
    return {"data": data, "layout": lay}


def render_compare(a: dict, b: dict, effect: dict, verdict: str) -> str:
    from ladder.dashboard.server import plotly_js_path

    level = f"{effect['level']:.0%}"
    trend, hero, bt, heroes = effect["trend"], effect.get("at_hero"), effect["backtest"], effect.get("heroes")
    head = (f"<h1>Compare: {html.escape(a['ladder'])} (A) and {html.escape(b['ladder'])} (B)</h1>"
            f"<p class='sub'><b>{html.escape(verdict)}</b></p>"
            f"<p class='sub'>{level} bands; {html.escape(effect['noise']['text'])}; trend: log multiplier "
            f"{trend['log_multiplier_per_decade']:+.3f} per decade of compute [{trend['lower']:+.3f}, {trend['upper']:+.3f}] "
            f"({trend['verdict']})</p>")
    parts = [head]
    figs = {"f-mult": multiplier_figure(effect), "f-delta": delta_figure(effect)}
    parts.append(_section("Compute-equivalent multiplier per size, its trend and the hero",
                          "<div id='f-mult' class='fig'></div>", "mult"))
    parts.append(_section("Loss difference per size and at the hero", "<div id='f-delta' class='fig'></div>", "delta"))
    parts.append(_section("Per size", _table(effect["per_size"], [
        ("size", "size", ""), ("flops_b", "FLOPs (B)", ".3g"), ("loss_a", "loss A", ".4f"), ("loss_b", "loss B", ".4f"),
        ("delta", "delta", "+.4f"), ("delta_lower", "lower", "+.4f"), ("delta_upper", "upper", "+.4f"),
        ("multiplier", "multiplier", ".3f"), ("lower", "lower", ".3f"), ("upper", "upper", ".3f"),
        ("runs_a", "runs A", "d"), ("runs_b", "runs B", "d"), ("pairs", "pairs", "d")]), "sizes"))
    rows = []
    if hero:
        rows.append({"what": "at the hero (predicted)", **hero})
    if heroes:
        rows.append({"what": "heroes (measured)", "flops": heroes["flops_b"], "multiplier": heroes["multiplier"],
                     "delta": heroes["delta"], "inside": heroes.get("inside")})
    if bt.get("ok"):
        rows.append({"what": f"backtest: {bt['size']} predicted from {', '.join(bt['fit_on'])}", **bt["predicted"]})
        rows.append({"what": f"backtest: {bt['size']} measured", **bt["measured"], "inside": bt["inside"]})
    parts.append(_section("At the hero, and the backtest", _table(rows, [
        ("what", "", ""), ("flops", "FLOPs", ".3g"), ("multiplier", "multiplier", ".3f"), ("lower", "lower", ".3f"),
        ("upper", "upper", ".3f"), ("delta", "delta", "+.4f"), ("delta_lower", "lower", "+.4f"),
        ("delta_upper", "upper", "+.4f"), ("pair_lower", "one pair: lower", ".3f"), ("pair_upper", "upper", ".3f"),
        ("inside", "inside the pair band", "")]), "hero"))
    data = json.dumps(_json_safe(figs), allow_nan=False, default=str).replace("</", "<\\/")
    script = ("const FIGS=" + data + ";const cfg={displaylogo:false,responsive:true};"
              "Promise.all(Object.entries(FIGS).map(([id,f])=>Plotly.newPlot(id,f.data,f.layout,cfg))).then(()=>{"
              "const d=document.getElementById('diag');d.dataset.page='compare';d.dataset.ready='1';});")
    plotly = plotly_js_path().read_text(encoding="utf-8").replace("</script", "<\\/script")
    title = html.escape(f"ladder compare: {a['ladder']} and {b['ladder']}")
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><meta name='viewport' content='width=device-width'>"
            f"<title>{title}</title><style>{CSS}</style><script>{plotly}</script></head><body>"
            f"<main id='main'>{''.join(parts)}</main><div id='diag' hidden></div><script>{script}</script></body></html>")


def write_compare(out: Path, a: dict, b: dict, effect: dict, verdict: str) -> None:
    """The page written whole (a temporary file renamed), so no half page is ever left."""
    tmp = out.with_name(f".{out.name}.tmp")
    tmp.write_text(render_compare(a, b, effect, verdict), encoding="utf-8")
    tmp.replace(out)
