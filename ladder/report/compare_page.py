"""The comparison page (`ladder compare A B --html OUT`): B's effect against A per size with its
bands, the trend carried to the hero with its band, the backtest and the heroes' actual difference,
as one offline HTML file built from the report's pieces (its CSS and tables) and the comparison's figures
(ladder.report.compare_figures, which the dashboard's Compare page draws too).
"""

from __future__ import annotations

import html
import json
from pathlib import Path

from ladder.report.compare_figures import delta_figure, multiplier_figure
from ladder.report.html import CSS, _json_safe, _section, _table


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
