"""report.html: the report as a page a user can share (one file, works offline).

Real tables (runs, the law with its intervals, backtests, prediction against actual, each actual
point against ours and Marin's forecasts), interactive plotly figures (plotly.js from the installed
plotly package, inlined: no CDN), and a timeline of what was predicted when. The numbers are the
report's (ladder.report.build.build), which reads through ladder.outputs.readers like the dashboard.
A ``#diag`` element marks the page drawn, for the headless-browser checks.
"""

from __future__ import annotations

import html
import json
import math
import time
from pathlib import Path
from typing import Any

import pandas as pd

from ladder.outputs import layout, readers
from ladder.outputs.files import json_safe as _json_safe
from ladder.outputs.files import num
from ladder.report import dynamics as report_dynamics
from ladder.report import figures as report_figures
from ladder.report import tasks as report_tasks

MAX_POINT_ROWS = 60  # per-point table: every point up to this, else evenly spaced ones (all in report.json / CSV)
CSS = """
body{font:14px/1.45 system-ui,-apple-system,"Segoe UI",sans-serif;color:#1d232b;background:#f4f6f8;margin:0}
main{max-width:1240px;margin:0 auto;padding:20px 24px 48px}
h1{font-size:22px;margin:6px 0 2px}h2{font-size:17px;margin:0 0 10px}h3{font-size:14px;margin:4px 0}
.sub{color:#5b6670;margin:0 0 14px}
section{background:#fff;border:1px solid #dde3e8;border-radius:8px;padding:14px 16px;margin:14px 0}
.tw{overflow-x:auto}table{border-collapse:collapse;width:100%;font-size:13px}
th,td{padding:4px 8px;border-bottom:1px solid #e8ecef;text-align:left;white-space:nowrap}
th{background:#f7f9fa;font-weight:600}td.n{text-align:right;font-variant-numeric:tabular-nums}
.ok{color:#2e7d32;font-weight:600}.bad{color:#c62828;font-weight:600}.muted{color:#6b7680}
.grid{display:grid;grid-template-columns:1fr 1fr;gap:14px}.grid section{margin:0}
.fig{width:100%;min-height:340px}ul.tl{margin:0;padding-left:18px}ul.tl li{margin:2px 0}
@media (max-width:1000px){.grid{grid-template-columns:1fr}}
"""


def _fmt(x: Any, spec: str = ".4g") -> str:
    if x is None or (isinstance(x, float) and not math.isfinite(x)):
        return "–"
    if isinstance(x, bool):
        return "yes" if x else "no"
    if isinstance(x, int | float):
        return format(x, spec)
    return str(x)


def _when(t: Any) -> str:
    v = num(t)
    return time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime(v)) if v is not None else "–"


def _table(rows: list[dict], cols: list[tuple[str, str, str]]) -> str:
    """An HTML table of rows; cols: (key, heading, format spec or '' for text)."""
    if not rows:
        return "<p class='muted'>none</p>"
    cols = [c for c in cols if any(r.get(c[0]) is not None for r in rows)]  # no column of dashes
    head = "".join(f"<th>{html.escape(h)}</th>" for _, h, _ in cols)
    body = []
    for r in rows:
        cells = []
        for k, _, spec in cols:
            v = r.get(k)
            if spec and isinstance(v, int | float) and not isinstance(v, bool):
                cells.append(f"<td class='n'>{_fmt(v, spec)}</td>")
            else:
                cells.append(f"<td>{html.escape(_fmt(v))}</td>")
        body.append("<tr>" + "".join(cells) + "</tr>")
    return f"<div class='tw'><table><thead><tr>{head}</tr></thead><tbody>{''.join(body)}</tbody></table></div>"


def _section(title: str, body: str, sid: str = "") -> str:
    ident = f" id='{sid}'" if sid else ""
    return f"<section{ident}><h2>{html.escape(title)}</h2>{body}</section>"


def _csv(path: Path | None) -> pd.DataFrame:
    if path is None or not path.is_file():
        return pd.DataFrame()
    try:
        return pd.read_csv(path)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError):
        return pd.DataFrame()


def _dir(dep_dirs: dict[str, str], name: str | None) -> Path | None:
    return Path(dep_dirs[name]) if name and dep_dirs.get(name) else None


def _timeline(rep: dict, dep_dirs: dict[str, str]) -> str:
    """What was predicted when: the forecast's time and inputs, the hero's start, each import."""
    items = []
    pdir = _dir(dep_dirs, "predict")
    fit = rep.get("fit") or {}
    if pdir is not None:
        st = layout.read_json(pdir / layout.STATUS, {}) or {}
        law = (rep.get("hero") or {}).get("law") or fit.get("law", "?")
        names = ", ".join(r["name"] for r in rep.get("rungs") or [])
        items.append(f"<b>{_when(st.get('end'))}</b>: our forecast written (predict step) with {html.escape(str(law))}, "
                     f"from the rungs {html.escape(names)} alone; nothing of the hero was read")
    hero = rep.get("hero") or {}
    hdir = _dir(dep_dirs, hero.get("name"))
    if hdir is not None and (hdir / layout.METRICS).exists():
        st = layout.read_json(hdir / layout.STATUS, {}) or {}
        prog = layout.read_json(hdir / layout.PROGRESS, {}) or {}
        items.append(f"<b>{_when(readers.started(st, prog))}</b>: the hero started training here "
                     f"({html.escape(str(hero.get('status') or 'running'))} {_when(st.get('end')) if st.get('end') else ''})")
    for name in (rep.get("actuals") or {}):
        meta = layout.read_json(pdir.parent / "imported" / name / "meta.json", {}) if pdir else {}
        src = (meta or {}).get("from_csv") or (meta or {}).get("run_path") or "?"
        metric = (meta or {}).get("metric")
        items.append(f"<b>{_when((meta or {}).get('imported_at'))}</b>: actual hero curve <code>{html.escape(name)}</code> "
                     f"imported from {html.escape(Path(str(src)).name)}" + (f" (metric {html.escape(metric)})" if metric else ""))
    items.append(f"<b>{_when(time.time())}</b>: this report")
    return "<ul class='tl'>" + "".join(f"<li>{i}</li>" for i in items) + "</ul>"


def _headline(rep: dict) -> str:
    h = rep.get("hero") or {}
    if not h:
        return "no hero prediction yet"
    parts = [f"hero {html.escape(str(h.get('name')))}: predicted final loss {_fmt(h.get('predicted_final_loss'), '.4f')} "
             f"[{_fmt(h.get('lower'), '.4f')}, {_fmt(h.get('upper'), '.4f')}] ({_fmt(h.get('level'), '.0%')} interval)"]
    if h.get("actual_final_loss") is not None:
        cls = "ok" if h.get("inside_interval") else "bad"
        parts.append(f"actual {_fmt(h['actual_final_loss'], '.4f')}, error <span class='{cls}'>{_fmt(h['relative_error'], '+.2%')}</span>")
    for name, s in (rep.get("actuals_summary") or {}).items():
        parts.append(f"{html.escape(name)}: {s['inside_band']} of {s['points']} points inside our band, mean |error| "
                     f"ours {_fmt(s['mean_abs_rel_error'], '.2%')}" + (f", Marin's {_fmt(s['marin_mean_abs_rel_error'], '.2%')}"
                                                                        if "marin_mean_abs_rel_error" in s else ""))
    return "; ".join(parts)


def _prediction_rows(rep: dict, baselines: dict) -> list[dict]:
    h = rep.get("hero") or {}
    rows = []
    if h:
        rows.append({"what": f"{h.get('name')}: final eval loss ({h.get('law')})", "predicted": h.get("predicted_final_loss"),
                     "lower": h.get("lower"), "upper": h.get("upper"), "actual": h.get("actual_final_loss"),
                     "error": h.get("relative_error"), "inside": h.get("inside_interval")})
        cl = h.get("curve_law") or {}
        if cl:
            rows.append({"what": "second estimate: whole-curve law, final train loss", "predicted": cl.get("predicted_final_train_loss"),
                         "actual": cl.get("actual_final_train_loss"), "error": cl.get("relative_error")})
    marin = (rep.get("baselines") or baselines or {}).get("marin") or {}
    if marin.get("predicted_final_loss") is not None:
        rows.append({"what": "Marin's method: final loss (no interval published)", "predicted": marin["predicted_final_loss"],
                     "lower": marin.get("lower"), "upper": marin.get("upper")})
    for t in rep.get("targets") or []:
        rows.append({"what": f"target {t.get('name')}", "predicted": t.get("loss"), "lower": t.get("lower"), "upper": t.get("upper")})
    return rows


def _curve_rows(rep: dict) -> list[dict]:
    docs = {}
    h = rep.get("hero") or {}
    if h.get("comparison"):
        docs[f"{h['name']} (train loss, trained here)"] = h["comparison"]
    for name, s in (rep.get("actuals_summary") or {}).items():
        docs[f"{name} (imported)"] = s
    return [{"actual": k, "from_step": d["from_step"], "points": d["points"], "inside": d["inside_band"],
             "outside": d["outside_band"], "fraction_inside": d["fraction_inside_band"], "ours": d["mean_abs_rel_error"],
             "ours_2nd_half": d["mean_abs_rel_error_second_half"], "marin": d.get("marin_mean_abs_rel_error")}
            for k, d in docs.items()]


def _point_rows(frame: pd.DataFrame) -> tuple[list[dict], str]:
    if len(frame) <= MAX_POINT_ROWS:
        return frame.to_dict("records"), f"all {len(frame)} points"
    idx = sorted({round(i * (len(frame) - 1) / (MAX_POINT_ROWS - 1)) for i in range(MAX_POINT_ROWS)})
    return frame.iloc[idx].to_dict("records"), f"{len(idx)} of {len(frame)} points, evenly spaced (all in curve.csv / report.json)"


def render_html(rep: dict[str, Any], tables: dict[str, pd.DataFrame], dep_dirs: dict[str, str]) -> str:
    from ladder.dashboard.server import plotly_js_path

    fdir, pdir = _dir(dep_dirs, "fit"), _dir(dep_dirs, "predict")
    runs = _csv(fdir / layout.RUNS_CSV if fdir else None)
    law_curve = _csv(fdir / "law_curve.csv" if fdir else None)
    pred = tables.get("hero_predicted_curve", pd.DataFrame())
    baseline = _csv(pdir / readers.BASELINE_MARIN_CSV if pdir else None)
    actuals = {("hero" if k == "hero_curve" else k.split("/", 1)[1]): f for k, f in tables.items()
               if (k == "hero_curve" or k.startswith("actual/")) and not f.empty}
    fit_doc = layout.read_json(fdir / layout.FIT, {}) if fdir else {}
    pred_doc = (layout.read_json(pdir / layout.PREDICTION, {}) if pdir else {}) or {}
    start = None
    if not pred.empty:
        start = readers.comparison_start(pred.to_dict("records"), "tokens" if "tokens" in pred else "step")
    pred_when = _when((layout.read_json(pdir / layout.STATUS, {}) or {}).get("end")) if pdir else "–"
    labels = {"ours": f"our forecast (written {pred_when})", "marin": "Marin's forecast (Marin's method, same rungs)",
              "hero": "actual: hero (eval points)"}
    labels.update({k: f"actual: {k} (imported)" for k in actuals if k != "hero"})
    first = next(iter(actuals.values()), None)
    figs = {"f-rungs": report_figures.rungs_figure(rep, tables, law_curve, pred, first),
            "f-hero": report_figures.hero_figure(pred, baseline, actuals, start, labels),
            "f-errors": report_figures.error_figure(actuals, "tokens" if "tokens" in pred else "step"),
            "f-law": report_figures.law_figure(rep, runs, law_curve)}
    # titles name only the baselines this ladder has (a ladder without Marin's method has no Marin curve)
    has_marin = baseline is not None and not getattr(baseline, "empty", True)
    titles = {"f-rungs": "Rungs and the law at each fraction of the run",
              "f-hero": "Hero: our forecast and band, " + ("Marin's forecast, " if has_marin else "") + "the actual points",
              "f-errors": "Each point's error, ours" + (" and Marin's" if has_marin else ""),
              "f-law": "Final loss against compute"}
    fit = rep.get("fit") or {}
    bt = rep.get("backtest") or {}
    bt_rows = [{"what": "final-loss law", "fit_on": ", ".join(bt.get("fit_on") or []), "predict": bt.get("predict"),
                "ratio": bt.get("compute_ratio"), "predicted": bt.get("predicted"), "actual": bt.get("actual"),
                "error": bt.get("relative_error")}] if bt.get("ok") else []
    chosen = str((rep.get("hero") or {}).get("law") or "")
    for c in ((fit_doc or {}).get("progress") or {}).get("candidates") or []:
        name = f"curve law {c.get('candidate')} on {c.get('axis')} compute"
        chosen_mark = " (chosen)" if chosen == f"{c.get('candidate')} on {c.get('axis')} compute" else ""
        for b in c.get("backtests") or []:
            bt_rows.append({"what": name + chosen_mark, "fit_on": ", ".join(b.get("fit_on") or []), "predict": b.get("predict"),
                            "ratio": b.get("compute_ratio"), "error": b.get("mean_rel_error"), "abs": b.get("mean_abs_rel_error"),
                            "to": b.get("last_frac")})
    cbt = (fit_doc or {}).get("curve_backtest") or {}
    if cbt.get("ok"):
        bt_rows.append({"what": "curve (law x schedule factor), 2nd half", "fit_on": ", ".join(cbt.get("fit_on") or []),
                        "predict": cbt.get("predict"), "error": cbt.get("mean_rel_error_second_half")})
    gate = rep.get("gate") or {}
    verdict = ("passed" if gate.get("passed") else "OVERRIDDEN" if gate.get("overridden") else "BLOCKED") if gate else "not run"
    parts = [f"<h1>Ladder report: {html.escape(str(rep.get('ladder')))}</h1><p class='sub'>{_headline(rep)}</p>",
             _section("What was predicted when", _timeline(rep, dep_dirs), "timeline")]
    for fid in ("f-hero", "f-errors"):
        if figs[fid]:
            parts.append(_section(titles[fid], f"<div id='{fid}' class='fig'></div>", fid + "-card"))
    parts.append(_section("Prediction against actual", _table(_prediction_rows(rep, pred_doc.get("baselines") or {}), [
        ("what", "", ""), ("predicted", "predicted", ".4f"), ("lower", "lower", ".4f"), ("upper", "upper", ".4f"),
        ("actual", "actual", ".4f"), ("error", "error", "+.2%"), ("inside", "inside interval", "")])
        + "<h2 style='margin-top:14px'>The curve, point by point</h2>" + _table(_curve_rows(rep), [
            ("actual", "actual curve", ""), ("from_step", "compared from step", ",.0f"), ("points", "points", ",.0f"),
            ("inside", "inside band", ",.0f"), ("outside", "outside", ",.0f"), ("fraction_inside", "% inside", ".1%"),
            ("ours", "mean |error| ours", ".2%"), ("ours_2nd_half", "ours, 2nd half", ".2%"),
            *([("marin", "mean |error| Marin's", ".2%")] if has_marin else [])]), "prediction"))
    for name, frame in actuals.items():
        rows, note = _point_rows(frame)
        cols = [("step", "step", ",.0f"), ("tokens", "tokens", ".4g"), ("actual", "actual", ".4f"), ("predicted", "ours", ".4f"),
                ("lower", "lower", ".4f"), ("upper", "upper", ".4f"), ("inside", "inside band", ""), ("rel_error", "error ours", "+.2%")]
        if frame["marin"].notna().any():
            cols += [("marin", "Marin's", ".4f"), ("marin_error", "error Marin's", "+.2%")]
        parts.append(_section(f"Each point of {name} against the forecasts ({note})", _table(rows, cols), f"points-{name}"))
    parts += _history_sections(rep.get("hero") or {}, has_marin)
    if rep.get("domains"):
        rows = [{**d, **{f"bt_{k}": v for k, v in d["backtest"].items()}} for d in rep["domains"]]
        parts.append(_section(f"Per-domain forecasts ({len(rows)} domains; backtest: the largest rung from the others)",
                              _table(rows, [("domain", "domain", ""), ("predicted_final", "final", ".4f"),
                                            ("lower", "lower", ".4f"), ("upper", "upper", ".4f"),
                                            ("actual_final", "actual", ".4f"), ("bt_predict", "backtest on", ""),
                                            ("bt_mean_abs_rel_error", "backtest mean |error|", ".2%"),
                                            ("bt_band_coverage", "backtest inside band", ".0%")]), "domains"))
    exits = (rep.get("hero") or {}).get("band_exits") or []
    exits = exits + [e for s in (rep.get("actuals_summary") or {}).values() for e in s["band_exits"]]
    parts.append(_section(f"Where the actual left our band ({len(exits)} stretches)", _table(exits, [
        ("from_step", "from step", ",.0f"), ("to_step", "to step", ",.0f"), ("points", "points", ",.0f"),
        ("side", "side", ""), ("max_gap", "max gap", ".4f")]), "exits"))
    if rep.get("tasks"):
        from ladder.analysis.tasks import rung_points

        task_html, task_figs = report_tasks.section(rep["tasks"], rep.get("tasks_summary"),
                                                    rung_points(dep_dirs, [r["name"] for r in rep.get("rungs") or []]), _table)
        parts.append(task_html)
        figs.update(task_figs)
    dyn_html, dyn_figs = report_dynamics.section(rep.get("dynamics") or {})
    parts += [dyn_html] if dyn_html else []
    figs.update(dyn_figs)
    parts += [_section(titles[f], f"<div id='{f}' class='fig'></div>", f + "-card") for f in ("f-rungs", "f-law") if figs[f]]
    parts.append(_section("Runs", _table(rep.get("rungs") or [], [
        ("name", "run", ""), ("status", "status", ""), ("params_active", "N active", ".3g"), ("tokens", "tokens", ".3g"),
        ("flops", "FLOPs", ".3g"), ("final_eval_loss", "final eval loss", ".4f"), ("final_train_loss", "final train loss", ".4f"),
        ("wall_s", "wall s", ",.0f"), ("note", "note", "")]), "runs"))
    params = readers.param_rows(fit_doc)
    flat = params and all(p["lower"] is not None and p["lower"] == p["upper"] for p in params)
    note = ("<p class='muted'>Every bootstrap refit gave the same parameters: too few distinct rung sizes to "
            "resample, so these intervals say nothing.</p>") if flat else ""
    parts.append(_section(f"Law: {fit.get('law', '–')} on {fit.get('n_points', '–')} points, {fit.get('bootstrap', 0)} bootstrap refits",
                          note + _table(params, [("param", "parameter", ""), ("value", "value", ".5g"),
                                                               ("lower", "lower", ".5g"), ("upper", "upper", ".5g"),
                                                               ("level", "level", ".0%")]), "law"))
    parts.append(_section("Backtests (the rungs held out, predicted from the others)", _table(bt_rows, [
        ("what", "", ""), ("fit_on", "fit on", ""), ("predict", "predict", ""), ("ratio", "compute ratio", ".2f"),
        ("predicted", "predicted", ".4f"), ("actual", "actual", ".4f"), ("error", "(mean) error", "+.2%"),
        ("abs", "mean |error|", ".2%"), ("to", "up to", ".0%")]), "backtests"))
    notes = list(gate.get("reasons") or []) + [f"warning: {w}" for w in gate.get("warnings") or []]
    parts.append(_section(f"Gate: {verdict}", "<ul class='tl'>" + "".join(
        f"<li>{html.escape(r)}</li>" for r in notes) + "</ul>" if notes else "", "gate"))
    data = json.dumps(_json_safe({k: v for k, v in figs.items() if v}), allow_nan=False, default=str).replace("</", "<\\/")
    script = ("const FIGS=" + data + ";const cfg={displaylogo:false,responsive:true};"
              "Promise.all(Object.entries(FIGS).map(([id,f])=>Plotly.newPlot(id,f.data,f.layout,cfg))).then(()=>{"
              "const d=document.getElementById('diag');d.dataset.page='report';"
              "d.dataset.traces=String(document.querySelectorAll('.js-plotly-plot .trace').length);d.dataset.ready='1';});")
    plotly = plotly_js_path().read_text(encoding="utf-8").replace("</script", "<\\/script")
    title = html.escape(f"ladder report: {rep.get('ladder')}")
    return (f"<!doctype html><html lang='en'><head><meta charset='utf-8'><meta name='viewport' content='width=device-width'>"
            f"<title>{title}</title><style>{CSS}</style><script>{plotly}</script></head><body>"
            f"<main id='main'>{''.join(parts)}</main><div id='diag' hidden></div><script>{script}</script></body></html>")


def centre_text(snapshot: dict) -> str:
    """Which centre a live snapshot took and the rung backtest errors at its horizon that chose it
    (ladder.analysis.follow_forecast.choose_centre), e.g. "shape (law 1.20%, shape 0.45%)"; "" before the rule existed."""
    rule = snapshot.get("centre_rule")
    if not rule:
        return ""
    errs = snapshot.get("centre_errors") or {}
    if not errs:
        return str(rule)
    return f"{rule} (" + ", ".join(f"{name} {float(err):.2%}" for name, err in sorted(errs.items())) + ")"


def _history_sections(hero: dict, has_marin: bool) -> list[str]:
    """The forecast history (each snapshot's final, band and error on the points after it), the alerts and
    the declared changes."""
    out = []
    snaps = hero.get("snapshots") or []
    if snaps:
        cols = [("at_step", "snapshot at step", ",.0f"), ("predicted_final", "final", ".4f"), ("lower", "lower", ".4f"),
                ("upper", "upper", ".4f"), ("later_points", "later points", ",.0f"),
                ("later_mean_abs_rel_error", "mean |error| on them", ".2%"), ("later_inside_band", "inside band", ".0%"),
                ("later_mean_band_half_width", "band half-width", ".2%")]
        if has_marin:
            cols.append(("later_marin_mean_abs_rel_error", "Marin's |error| on them", ".2%"))
        cols.append(("centre", "centre (rung backtest error at its horizon)", ""))
        rows = [{**s, "centre": centre_text(s)} for s in snaps]
        out.append(_section(f"Forecast history ({len(snaps)} snapshots)", _table(rows, cols), "forecast-history"))
    changes = hero.get("changes") or []
    if changes:
        out.append(_section(f"Declared changes ({len(changes)})", _table(changes, [
            ("step", "step", ",.0f"), ("what", "what", ""), ("note", "note", "")]), "changes"))
    alerts = [e for e in hero.get("events") or [] if e.get("alert")]
    if alerts:
        out.append(_section(f"Alerts ({len(alerts)})", _table(alerts, [
            ("poll", "poll", ",.0f"), ("kind", "kind", ""), ("step", "step", ",.0f"), ("message", "", "")]), "alerts"))
    return out
