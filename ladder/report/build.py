"""The report: the hero's prediction against its actual curve, the fit and its backtest.

Written by the report step and by `ladder report` from whatever the ladder has produced so far:
report.json (the numbers), curve.csv (predicted vs actual over the hero's run), PNGs and a
self-contained report.html (ladder.report.html: tables and interactive plots, offline).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pandas as pd

from ladder.analysis import tail_loss
from ladder.outputs import layout
from ladder.report.html import centre_text, render_html
from ladder.report.png import write_pngs

COMPARISON_COLUMNS = ["step", "tokens", "actual", "actual_raw", "predicted", "lower", "upper", "rel_error", "inside",
                      "marin", "marin_error"]


def comparison_frame(cmp: dict[str, Any]) -> pd.DataFrame:
    """A comparison of ladder.outputs.readers as a table (actual = the interval-mean loss)."""
    if not cmp["points"]:
        return pd.DataFrame(columns=COMPARISON_COLUMNS)
    f = pd.DataFrame(cmp["points"]).rename(columns={"loss": "actual", "error": "rel_error"})
    return f.assign(actual_raw=f["actual"])[COMPARISON_COLUMNS]


def hero_comparison(pred_curve: pd.DataFrame, metrics: pd.DataFrame) -> pd.DataFrame:
    """The hero's actual loss (interval means) beside the predicted curve and band, from where the
    comparison starts (ladder.outputs.readers: the same definition the dashboard uses)."""
    from ladder.outputs import readers

    if pred_curve.empty or metrics.empty or "loss" not in metrics:
        return pd.DataFrame(columns=COMPARISON_COLUMNS)
    cmp = readers.compare(pred_curve.to_dict("records"), readers.actual_series(metrics.to_dict("records")))
    return comparison_frame(cmp)


def _curve_law_check(path: Path, metrics: pd.DataFrame) -> tuple[dict[str, Any], pd.DataFrame] | None:
    """The whole-curve law's hero curve (a second estimate, from the rungs' whole curves) against the actual.

    That law predicts train loss, so it is scored on the hero's train loss: the final as
    ladder.analysis.tail_loss, the curve over the second half.
    """
    if not path.exists() or metrics.empty or "loss" not in metrics:
        return None
    law = pd.read_csv(path)
    comp = hero_comparison(law.assign(lower=law["loss"], upper=law["loss"]), metrics)
    if comp.empty:
        return None
    predicted, actual = float(law["loss"].iloc[-1]), tail_loss(comp["actual_raw"])
    half = comp[comp["step"] >= comp["step"].max() / 2]
    doc = {"predicted_final_train_loss": predicted, "actual_final_train_loss": actual,
           "relative_error": predicted / actual - 1.0,
           "curve_mean_abs_rel_error_second_half": float(half["rel_error"].abs().mean())}
    return doc, comp


def build(config: dict, dep_dirs: dict[str, str]) -> tuple[dict[str, Any], dict[str, pd.DataFrame]]:
    """The report's numbers and tables from the steps' files (every file optional)."""
    fit = layout.read_json(Path(dep_dirs.get("fit", "/nonexistent")) / layout.FIT, None)
    prediction = layout.read_json(Path(dep_dirs.get("predict", "/nonexistent")) / layout.PREDICTION, None)
    gate = layout.read_json(Path(dep_dirs.get("gate", "/nonexistent")) / layout.GATE, None)
    tables: dict[str, pd.DataFrame] = {}
    rungs = []
    for name in config.get("rungs", []):
        d = dep_dirs.get(name)
        result = layout.read_json(Path(d) / layout.RESULT, {}) if d else {}
        rungs.append({"name": name, "status": result.get("status"), "final_eval_loss": result.get("final_eval_loss"),
                      "final_train_loss": result.get("final_train_loss"), "params_active": result.get("params_active"),
                      "tokens": result.get("tokens"), "flops": result.get("flops"), "wall_s": result.get("wall_s"),
                      "partial": bool(result.get("partial")), "note": result.get("note"),
                      "final_eval_loss_se": result.get("final_eval_loss_se"),
                      "epochs_by_domain": result.get("epochs_by_domain")})
        if d:
            tables[f"metrics/{name}"] = layout.read_jsonl(Path(d) / layout.METRICS)
            tables[f"eval/{name}"] = layout.read_jsonl(Path(d) / layout.EVAL)
    from ladder.analysis.repetition import warnings as repetition_warnings

    report: dict[str, Any] = {"ladder": config.get("ladder"), "rungs": rungs, "fit": None, "backtest": None,
                              "gate": gate, "hero": None, "targets": [],
                              "data_warnings": repetition_warnings([r for r in rungs if r["status"] == "SUCCESS"])}
    if fit:
        report["fit"] = fit.get("summary", fit)
        report["backtest"] = fit.get("backtest")
    if prediction:
        report["targets"] = prediction.get("targets", [])
    hero_name = config.get("hero")
    hero_dir = dep_dirs.get(hero_name) if hero_name else None
    if prediction and prediction.get("hero"):
        p = prediction["hero"]
        hero: dict[str, Any] = {
            "name": hero_name, "predicted_final_loss": p.get("predicted_final_loss"), "lower": p.get("lower"),
            "upper": p.get("upper"), "level": p.get("level"), "law": p.get("law"), "compute_ratio": p.get("compute_ratio"),
            "actual_final_loss": None, "relative_error": None, "inside_interval": None, "status": None,
            "seeds": p.get("seeds"), "interval": p.get("interval"), "laws_disagreement": p.get("laws_disagreement"),
        }
        pred_curve = pd.read_csv(Path(dep_dirs["predict"]) / layout.HERO_CURVE) \
            if (Path(dep_dirs["predict"]) / layout.HERO_CURVE).exists() else pd.DataFrame()
        tables["hero_predicted_curve"] = pred_curve
        if hero_dir:
            status = layout.read_json(Path(hero_dir) / layout.STATUS, {}) or {}
            result = layout.read_json(Path(hero_dir) / layout.RESULT, {}) or {}
            hero["status"] = result.get("status") or status.get("status")
            metrics = layout.read_jsonl(Path(hero_dir) / layout.METRICS)
            tables["metrics/" + hero_name] = metrics
            tables["eval/" + hero_name] = layout.read_jsonl(Path(hero_dir) / layout.EVAL)
            tables["forecasts"] = layout.read_jsonl(Path(hero_dir) / layout.FORECASTS)
            actual = result.get("final_eval_loss") if result.get("status") == "SUCCESS" else None
            if actual is not None and hero["predicted_final_loss"] is not None:
                hero["actual_final_loss"] = actual
                hero["relative_error"] = (hero["predicted_final_loss"] - actual) / actual
                hero["inside_interval"] = bool(hero["lower"] <= actual <= hero["upper"])
            second = _curve_law_check(Path(dep_dirs["predict"]) / "hero_curve_law.csv", metrics)
            if second is not None:
                hero["curve_law"], tables["hero_curve_law"] = second
                if p.get("curve_law_final_eval_loss") is not None and actual is not None:
                    hero["curve_law"]["predicted_final_eval_loss"] = p["curve_law_final_eval_loss"]
                    hero["curve_law"]["eval_relative_error"] = p["curve_law_final_eval_loss"] / actual - 1.0
        _compare_actuals(report, hero, tables, dep_dirs)
        report["hero"] = hero
    from ladder.report.curves import add_progress

    add_progress(report, prediction, dep_dirs, config, tables)
    from ladder.analysis.domain_forecasts import add_domains

    add_domains(report, prediction, dep_dirs, config)
    from ladder.analysis.tasks import add_tasks

    add_tasks(report, prediction, dep_dirs, config)
    from ladder.analysis.dynamics import add_dynamics

    add_dynamics(report, prediction, dep_dirs, config)
    return report, tables


def _compare_actuals(report: dict[str, Any], hero: dict[str, Any], tables: dict[str, pd.DataFrame],
                     dep_dirs: dict[str, str]) -> None:
    """The actual hero curves (trained here, or imported as hero_actual) against the forecast and
    Marin's baseline, through the readers the dashboard uses: one definition of every number."""
    from ladder.outputs import readers
    from ladder.outputs.files import FileCache

    predict = Path(dep_dirs["predict"])
    imported_dir = predict.parent / "imported"
    imported = {d.name: d for d in sorted(imported_dir.iterdir()) if d.is_dir()} if imported_dir.is_dir() else {}
    hero_dir = dep_dirs.get(hero["name"]) if hero.get("name") else None
    comparisons = readers.hero_comparisons(FileCache(), predict, Path(hero_dir) if hero_dir else None, imported)
    for name, cmp in comparisons.items():
        s = readers.summary(cmp)
        if not s["points"]:
            continue
        tables["hero_curve" if name == "hero" else f"actual/{name}"] = comparison_frame(cmp)
        doc = {"points": s["points"], "compared_on": s["x"], "from_step": s["first_step"],
               "inside_band": s["inside"], "outside_band": s["outside"],
               "fraction_inside_band": s["fraction_inside"], "mean_abs_rel_error": s["mean_abs_error"],
               "mean_abs_rel_error_second_half": s["mean_abs_error_second_half"],
               "band_exits": readers.exit_stretches(cmp["points"])}
        if "marin_mean_abs_error" in s:
            doc["marin_mean_abs_rel_error"] = s["marin_mean_abs_error"]
        if name == "hero":
            hero["curve_mean_abs_rel_error_second_half"] = doc["mean_abs_rel_error_second_half"]
            hero["curve_fraction_inside_band"] = doc["fraction_inside_band"]
            hero["band_exits"] = doc["band_exits"]
            hero["comparison"] = doc
            continue
        report.setdefault("actuals", {})[name] = [
            {k: p[k] for k in ("step", "tokens", "loss", "predicted", "lower", "upper", "marin")} for p in cmp["points"]]
        report.setdefault("actuals_summary", {})[name] = doc


def report_lines(rep: dict[str, Any]) -> list[str]:
    """A readable table of the report."""
    def fmt(x, spec=".4f"):
        return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)

    lines = [f"ladder {rep.get('ladder')}", "",
             f"{'run':<10} {'status':<10} {'N active':>10} {'tokens':>10} {'FLOPs':>10} {'eval loss':>10}"]
    for r in rep.get("rungs", []):
        status = "PARTIAL" if r.get("partial") else str(r["status"])
        lines.append(f"{r['name']:<10} {status:<10} {fmt(r['params_active'], '>10.3g')} {fmt(r['tokens'], '>10.3g')} "
                     f"{fmt(r['flops'], '>10.3g')} {fmt(r['final_eval_loss'], '>10.4f')}")
    from ladder.analysis.repetition import standard_errors

    se_line = standard_errors(rep.get("rungs", []))
    lines += [se_line] if se_line else []
    lines += [f"! {w}" for w in rep.get("data_warnings") or []]
    fit = rep.get("fit") or {}
    if fit:
        params = "  ".join(f"{k}={fmt(v, '.4g')}" for k, v in (fit.get("params") or {}).items())
        lines += ["", f"fit: {fit.get('law') or 'no final-loss law'}  " + params]
        if fit.get("underdetermined"):
            lines.append(f"  not pinned: {fit['underdetermined']}" + ("" if fit.get("law") else "; the law is refused")
                         + ("; its band carries the rungs' seed noise through the fit, no bootstrap" if fit.get("law") else ""))
        elif fit.get("note"):
            lines.append(f"  {fit['note']}")
    spread = fit.get("seed_spread") if fit else None
    if spread:
        lines.append(f"seeds: runs of one size differ by {fmt(spread['median'], '.2%')} (median) to {fmt(spread['max'], '.2%')} "
                     f"over {spread['sizes']} sizes: errors within that are noise")
    from ladder.report.isoflop import lines as isoflop_lines

    lines += isoflop_lines(rep.get("isoflop"))
    bt = rep.get("backtest") or {}
    if bt and not bt.get("ok", True):
        lines.append(f"backtest (final-loss law): {bt.get('reason')}")
    elif bt:
        lines.append(f"backtest: fit on {bt.get('fit_on')}, predict {bt.get('predict')} at {fmt(bt.get('compute_ratio'), '.1f')}x compute: "
                     f"predicted {fmt(bt.get('predicted'))} actual {fmt(bt.get('actual'))} error {fmt(bt.get('relative_error'), '+.2%')}")
    gate = rep.get("gate") or {}
    if gate:
        verdict = "passed" if gate.get("passed") else ("OVERRIDDEN" if gate.get("overridden") else "BLOCKED")
        lines.append(f"gate: {verdict}" + "".join(f"\n  - {r}" for r in gate.get("reasons", []))
                     + "".join(f"\n  ! {w}" for w in gate.get("warnings") or []))
    hero = rep.get("hero")
    if hero:
        lines += ["", f"hero {hero['name']} ({hero.get('status') or 'not run'}) at "
                      f"{fmt(hero.get('compute_ratio'), '.1f')}x the largest rung's compute",
                  f"  predicted final eval loss {fmt(hero['predicted_final_loss'])} [{fmt(hero['lower'])}, {fmt(hero['upper'])}] "
                  f"({fmt(hero.get('level'), '.0%')} interval, {hero.get('law')})",
                  f"  actual final eval loss    {fmt(hero['actual_final_loss'])}  relative error {fmt(hero['relative_error'], '+.2%')}  "
                  f"inside interval: {hero['inside_interval']}"]
        if hero.get("seeds"):
            lines.append(f"  seeds: {hero['seeds']['text']}")
        gap = hero.get("laws_disagreement")
        if gap:
            lines.append(f"  the whole-curve law at the hero: {math.expm1(gap['log_ratio']):+.2%} from the final-loss law, "
                         + ("in the band" if gap.get("in_band", True) else
                            "beside the band, not in it (fit.disagreement 'report')"))
        if "curve_mean_abs_rel_error_second_half" in hero:
            lines.append(f"  curve: mean |error| over the second half {fmt(hero['curve_mean_abs_rel_error_second_half'], '.2%')}, "
                         f"{fmt(hero['curve_fraction_inside_band'], '.0%')} of logged points from step "
                         f"{hero['comparison']['from_step']} inside the band")
            lines += _exit_lines(hero.get("band_exits") or [])
        cl = hero.get("curve_law")
        if cl:
            lines.append("  second estimate, the whole-curve law on the rungs' curves: "
                         + (f"final eval loss {fmt(cl['predicted_final_eval_loss'])} ({fmt(cl['eval_relative_error'], '+.2%')}); "
                            if "predicted_final_eval_loss" in cl else "")
                         + f"final train loss {fmt(cl['predicted_final_train_loss'])} against {fmt(cl['actual_final_train_loss'])} "
                         f"({fmt(cl['relative_error'], '+.2%')}); "
                         f"curve second half {fmt(cl['curve_mean_abs_rel_error_second_half'], '.2%')}")
    for name, s in (rep.get("actuals_summary") or {}).items():
        lines.append(f"actual {name} (imported): {s['inside_band']} of {s['points']} points from step {s['from_step']} inside "
                     f"the band; mean |error| ours {fmt(s['mean_abs_rel_error'], '.2%')}"
                     + (f", Marin's {fmt(s['marin_mean_abs_rel_error'], '.2%')}" if "marin_mean_abs_rel_error" in s else ""))
    lines += _progress_lines(rep, fmt)
    for t in rep.get("targets", []):
        lines.append(f"target {t.get('name')}: predicted loss {fmt(t.get('loss'))} [{fmt(t.get('lower'))}, {fmt(t.get('upper'))}] "
                     f"at {fmt(t.get('flops'), '.3g')} FLOPs")
    return lines


def _progress_lines(rep: dict[str, Any], fmt) -> list[str]:
    """The curve forecast's lines: backtests and coverage, baselines, the recorded points, snapshots."""
    hero, lines = rep.get("hero") or {}, []
    for r in rep.get("rungs", []):
        if r.get("note"):
            lines.append(f"{r['name']}: {r['note']}")
    for b in hero.get("backtests") or []:
        lines.append(f"  curve backtest {', '.join(b['fit_on'])} -> {b['predict']} at {b['compute_ratio']:.1f}x: "
                     f"mean |error| {fmt(b['mean_abs_rel_error'], '.2%')} (mean {fmt(b['mean_rel_error'], '+.2%')})")
    for c in hero.get("coverage") or []:
        if c.get("coverage") is not None:
            lines.append(f"  band coverage on {c['predict']} from {', '.join(c.get('fit_on') or [])} "
                         f"(band calibrated on {', '.join(c['calibrated_on'])} only): "
                         f"{fmt(c['coverage'], '.0%')} of {c['n_points']} points")
    rec = hero.get("recorded")
    if rec:
        lines.append(f"  hero's recorded points {rec['from_frac']:.0%}-{rec['to_frac']:.1%} ({rec['n_points']}): ours mean |error| "
                     f"{fmt(rec['mean_abs_rel_error'], '.2%')}, {fmt(rec.get('inside_band'), '.0%')} inside the band "
                     f"(half-width {fmt(rec.get('mean_band_half_width'), '.1%')})")
    for name, b in (rep.get("baselines") or {}).items():
        brec = b.get("recorded") or {}
        lines.append(f"  baseline {name}: final {fmt(b.get('predicted_final_loss'))} (no interval)"
                     + (f"; recorded points mean |error| {fmt(brec['mean_abs_rel_error'], '.2%')}" if brec else ""))
    for snap in hero.get("snapshots") or []:
        at = f"{snap['at_frac']:.1%}" if "at_frac" in snap else f"step {snap['at_step']}"
        later = ""
        if "later_points" in snap:
            later = f", later points mean |error| {fmt(snap['later_mean_abs_rel_error'], '.2%')}"
            if snap.get("later_inside_band") is not None:
                later += f", {fmt(snap['later_inside_band'], '.0%')} inside"
            if snap.get("later_marin_mean_abs_rel_error") is not None:
                later += f" (Marin's curve on the same points {fmt(snap['later_marin_mean_abs_rel_error'], '.2%')})"
        centre = f"; centre {centre_text(snap)}" if snap.get("centre_rule") else ""
        band = f"[{fmt(snap['lower'])}, {fmt(snap['upper'])}]"
        lines.append(f"  snapshot at {at}: final {fmt(snap['predicted_final'])} {band}{later}{centre}")
    for d in rep.get("domains") or []:
        bt = d["backtest"]
        cov = f", band held {fmt(bt.get('band_coverage'), '.0%')} of {bt.get('band_points')}" if bt.get("band_coverage") is not None else ""
        act = f"; actual {fmt(d['actual_final'])} ({fmt(d['relative_error'], '+.2%')})" if d.get("actual_final") is not None else ""
        lines.append(f"  domain {d['domain']}: final {fmt(d['predicted_final'])} [{fmt(d['lower'])}, {fmt(d['upper'])}]{act}; "
                     f"backtest {','.join(bt['fit_on'])} -> {bt['predict']}: mean |error| {fmt(bt['mean_abs_rel_error'], '.2%')}{cov}")
    dyn = rep.get("dynamics") or {}
    for b in dyn.get("backtests") or []:
        lines.append(f"  envelope backtest {b['metric']}: {b['predict']} from {', '.join(b['fit_on'])}: "
                     f"{fmt(b['inside'], '.0%')} of {b['points']} steps inside the {fmt(b['level'], '.0%')} envelope")
    for h in dyn.get("hero") or []:
        lines.append(f"  hero {h['metric']}: {fmt(h['inside'], '.0%')} of {h['points']} steps inside its envelope"
                     + (f" (first outside at step {h['first_outside_step']})" if h.get("first_outside_step") is not None else ""))
    for e in dyn.get("spikes") or []:
        lines.append(f"  spike in {e['metric']} at step {e['step']}: {fmt(e.get('size'), '.1f')}x its recent mean")
    from ladder.report.tasks import lines as task_lines

    lines += task_lines(rep)
    carried = {c["step"]: c for c in (hero.get("follow") or {}).get("change_effects") or []}
    for c in hero.get("changes") or []:
        lines.append(f"  declared change at step {c['step']:,}: {c['what']}" + (f" ({c['note']})" if c.get("note") else "")
                     + (f"; the live forecast past it: {carried[c['step']]['effect']}" if c["step"] in carried else ""))
    for e in hero.get("events") or []:
        if e.get("alert"):
            lines.append(f"  alert {e['kind']} (poll {e.get('poll')}): {e['message']}")
    return lines


def write_report(config: dict, dep_dirs: dict[str, str], out_dir: str) -> tuple[dict[str, Any], str]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rep, tables = build(config, dep_dirs)
    prediction = layout.read_json(Path(dep_dirs.get("predict", "/nonexistent")) / layout.PREDICTION, {}) or {}
    if rep.get("hero") and prediction.get("hero"):
        rep["hero"]["flops"] = prediction["hero"].get("flops")
    if dep_dirs.get("fit"):
        from ladder.outputs.readers import param_rows

        rep["fit_params"] = param_rows(layout.read_json(Path(dep_dirs["fit"]) / layout.FIT, {}))
    if dep_dirs.get("isoflop"):
        from ladder.report import isoflop as isoflop_report

        rep["isoflop"] = isoflop_report.section(dep_dirs["isoflop"])
    write_pngs(rep, tables, out, dep_dirs.get("fit"))
    if "hero_curve" in tables and not tables["hero_curve"].empty:
        layout.write_csv_atomic(out / "curve.csv", tables["hero_curve"])
    for key, frame in tables.items():
        if key.startswith("actual/"):
            layout.write_csv_atomic(out / f"curve_{key.split('/', 1)[1]}.csv", frame)
    layout.write_json_atomic(out / layout.REPORT, rep)
    html_path = out / layout.REPORT_HTML
    tmp = out / f".{layout.REPORT_HTML}.tmp"
    tmp.write_text(render_html(rep, tables, dep_dirs))
    tmp.replace(html_path)
    return rep, str(html_path)


def _exit_lines(exits: list[dict]) -> list[str]:
    """One line a side: single-point crossings of a noisy curve listed one by one buried the report's figures."""
    lines = []
    for side in ("above", "below"):
        mine = [e for e in exits if e["side"] == side]
        if not mine:
            continue
        worst = max(mine, key=lambda e: e["max_gap"])
        span = (f"step {mine[0]['from_step']}" if len(mine) == 1 and mine[0]["from_step"] == mine[0]["to_step"]
                else f"steps {mine[0]['from_step']}-{mine[-1]['to_step']}")
        lines.append(f"  left the band {side}: {len(mine)} stretch{'es' if len(mine) > 1 else ''} within {span}, "
                     f"largest gap {worst['max_gap']:.4f} (steps {worst['from_step']}-{worst['to_step']})")
    return lines
