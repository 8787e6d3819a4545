"""The report: the hero's prediction against its actual curve, the fit and its backtest.

Written by the report step and by `ladder report` from whatever the ladder has produced so far:
report.json (the numbers), curve.csv (predicted vs actual over the hero's run), PNGs and a
self-contained report.html (images embedded, no network).
"""

from __future__ import annotations

import base64
import html
import math
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from ladder import layout
from ladder.analysis import interval_loss, tail_loss
from ladder.analysis import smooth as smooth_series


def hero_comparison(pred_curve: pd.DataFrame, metrics: pd.DataFrame, smooth: int = 5) -> pd.DataFrame:
    """Actual train loss (smoothed) beside the predicted curve and band at the hero's logged steps."""
    if pred_curve.empty or metrics.empty or "loss" not in metrics:
        return pd.DataFrame(columns=["step", "tokens", "actual", "predicted", "lower", "upper", "inside"])
    m = interval_loss(metrics).dropna(subset=["loss"]).sort_values("step").drop_duplicates("step", keep="last")
    pc = pred_curve.sort_values("step")
    steps = m["step"].to_numpy(float)
    out = pd.DataFrame({
        "step": m["step"].to_numpy(int),
        "tokens": m["tokens"].to_numpy(float) if "tokens" in m else np.nan,
        "actual_raw": m["loss"].to_numpy(float),
        "actual": smooth_series(m["loss"].to_numpy(float), smooth),
        "predicted": np.interp(steps, pc["step"], pc["loss"]),
        "lower": np.interp(steps, pc["step"], pc["lower"]),
        "upper": np.interp(steps, pc["step"], pc["upper"]),
    })
    out["rel_error"] = (out["predicted"] - out["actual"]) / out["actual"]
    out["inside"] = (out["actual"] >= out["lower"]) & (out["actual"] <= out["upper"])
    return out


def _band_exits(comp: pd.DataFrame) -> list[dict[str, Any]]:
    """Contiguous stretches where the actual left the band: where they start, end and how far out."""
    exits, start = [], None
    rows = comp.to_dict("records")
    for i, row in enumerate(rows):
        if not row["inside"] and start is None:
            start = i
        if (row["inside"] or i == len(rows) - 1) and start is not None:
            end = i if not row["inside"] else i - 1
            seg = comp.iloc[start:end + 1]
            gap = np.where(seg["actual"] > seg["upper"], seg["actual"] - seg["upper"], seg["lower"] - seg["actual"])
            exits.append({"from_step": int(seg["step"].iloc[0]), "to_step": int(seg["step"].iloc[-1]),
                          "side": "above" if (seg["actual"] > seg["upper"]).any() else "below",
                          "max_gap": float(gap.max())})
            start = None
    return exits


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
                      "partial": bool(result.get("partial")), "note": result.get("note")})
        if d:
            tables[f"metrics/{name}"] = layout.read_jsonl(Path(d) / layout.METRICS)
            tables[f"eval/{name}"] = layout.read_jsonl(Path(d) / layout.EVAL)
    report: dict[str, Any] = {"ladder": config.get("ladder"), "rungs": rungs, "fit": None, "backtest": None,
                              "gate": gate, "hero": None, "targets": []}
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
        }
        pred_curve = pd.read_csv(Path(dep_dirs["predict"]) / layout.HERO_CURVE) \
            if (Path(dep_dirs["predict"]) / layout.HERO_CURVE).exists() else pd.DataFrame()
        tables["hero_predicted_curve"] = pred_curve
        if hero_dir:
            status = layout.read_json(Path(hero_dir) / layout.STATUS, {}) or {}
            result = layout.read_json(Path(hero_dir) / layout.RESULT, {}) or {}
            hero["status"] = result.get("status") or status.get("status")
            metrics = layout.read_jsonl(Path(hero_dir) / layout.METRICS)
            comp = hero_comparison(pred_curve, metrics)
            tables["hero_curve"] = comp
            tables["metrics/" + hero_name] = metrics
            tables["eval/" + hero_name] = layout.read_jsonl(Path(hero_dir) / layout.EVAL)
            tables["forecasts"] = layout.read_jsonl(Path(hero_dir) / layout.FORECASTS)
            actual = result.get("final_eval_loss") if result.get("status") == "SUCCESS" else None
            if actual is not None and hero["predicted_final_loss"] is not None:
                hero["actual_final_loss"] = actual
                hero["relative_error"] = (hero["predicted_final_loss"] - actual) / actual
                hero["inside_interval"] = bool(hero["lower"] <= actual <= hero["upper"])
            if not comp.empty:
                half = comp[comp["step"] >= comp["step"].max() / 2]
                hero["curve_mean_abs_rel_error_second_half"] = float(half["rel_error"].abs().mean())
                hero["curve_fraction_inside_band"] = float(comp["inside"].mean())
                hero["band_exits"] = _band_exits(comp)
            second = _curve_law_check(Path(dep_dirs["predict"]) / "hero_curve_law.csv", metrics)
            if second is not None:
                hero["curve_law"], tables["hero_curve_law"] = second
                if p.get("curve_law_final_eval_loss") is not None and actual is not None:
                    hero["curve_law"]["predicted_final_eval_loss"] = p["curve_law_final_eval_loss"]
                    hero["curve_law"]["eval_relative_error"] = p["curve_law_final_eval_loss"] / actual - 1.0
        report["hero"] = hero
    from ladder.report_progress import add_progress

    add_progress(report, prediction, dep_dirs, config, tables)
    return report, tables


def report_lines(rep: dict[str, Any]) -> list[str]:
    """A readable table of the report."""
    def fmt(x, spec=".4f"):
        return "-" if x is None or (isinstance(x, float) and math.isnan(x)) else format(x, spec)

    lines = [f"ladder {rep.get('ladder')}", "", f"{'run':<10} {'status':<10} {'N active':>10} {'tokens':>10} {'FLOPs':>10} {'eval loss':>10}"]
    for r in rep.get("rungs", []):
        status = "PARTIAL" if r.get("partial") else str(r["status"])
        lines.append(f"{r['name']:<10} {status:<10} {fmt(r['params_active'], '>10.3g')} {fmt(r['tokens'], '>10.3g')} "
                     f"{fmt(r['flops'], '>10.3g')} {fmt(r['final_eval_loss'], '>10.4f')}")
    fit = rep.get("fit") or {}
    if fit:
        lines += ["", f"fit: {fit.get('law', '?')}  " + "  ".join(f"{k}={fmt(v, '.4g')}" for k, v in (fit.get("params") or {}).items())]
    spread = fit.get("seed_spread") if fit else None
    if spread:
        lines.append(f"seeds: runs of one size differ by {fmt(spread['median'], '.2%')} (median) to {fmt(spread['max'], '.2%')} "
                     f"over {spread['sizes']} sizes: errors within that are noise")
    bt = rep.get("backtest") or {}
    if bt and not bt.get("ok", True):
        lines.append(f"backtest (final-loss law): {bt.get('reason')}")
    elif bt:
        lines.append(f"backtest: fit on {bt.get('fit_on')}, predict {bt.get('predict')} at {fmt(bt.get('compute_ratio'), '.1f')}x compute: "
                     f"predicted {fmt(bt.get('predicted'))} actual {fmt(bt.get('actual'))} error {fmt(bt.get('relative_error'), '+.2%')}")
    gate = rep.get("gate") or {}
    if gate:
        verdict = "passed" if gate.get("passed") else ("OVERRIDDEN" if gate.get("overridden") else "BLOCKED")
        lines.append(f"gate: {verdict}" + "".join(f"\n  - {r}" for r in gate.get("reasons", [])))
    hero = rep.get("hero")
    if hero:
        lines += ["", f"hero {hero['name']} ({hero.get('status') or 'not run'}) at {fmt(hero.get('compute_ratio'), '.1f')}x the largest rung's compute",
                  f"  predicted final eval loss {fmt(hero['predicted_final_loss'])} [{fmt(hero['lower'])}, {fmt(hero['upper'])}] "
                  f"({fmt(hero.get('level'), '.0%')} interval, {hero.get('law')})",
                  f"  actual final eval loss    {fmt(hero['actual_final_loss'])}  relative error {fmt(hero['relative_error'], '+.2%')}  "
                  f"inside interval: {hero['inside_interval']}"]
        if "curve_mean_abs_rel_error_second_half" in hero:
            lines.append(f"  curve: mean |error| over the second half {fmt(hero['curve_mean_abs_rel_error_second_half'], '.2%')}, "
                         f"{fmt(hero['curve_fraction_inside_band'], '.0%')} of logged points inside the band")
            for e in hero.get("band_exits", [])[:5]:
                lines.append(f"  left the band {e['side']} from step {e['from_step']} to {e['to_step']} (max gap {e['max_gap']:.4f})")
        cl = hero.get("curve_law")
        if cl:
            lines.append("  second estimate, the whole-curve law on the rungs' curves: "
                         + (f"final eval loss {fmt(cl['predicted_final_eval_loss'])} ({fmt(cl['eval_relative_error'], '+.2%')}); "
                            if "predicted_final_eval_loss" in cl else "")
                         + f"final train loss {fmt(cl['predicted_final_train_loss'])} against {fmt(cl['actual_final_train_loss'])} "
                         f"({fmt(cl['relative_error'], '+.2%')}); curve second half {fmt(cl['curve_mean_abs_rel_error_second_half'], '.2%')}")
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
            lines.append(f"  band coverage on {c['predict']} (band calibrated on {', '.join(c['calibrated_on'])} only): "
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
        lines.append(f"  snapshot at {at}: final {fmt(snap['predicted_final'])} [{fmt(snap['lower'])}, {fmt(snap['upper'])}]{later}")
    return lines


def _finish(fig, ax, xlabel: str, ylabel: str, title: str, path: Path) -> Path:
    import matplotlib.pyplot as plt

    ax.set_xlabel(xlabel)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def _plots(rep: dict[str, Any], tables: dict[str, pd.DataFrame], out_dir: Path, fit_dir: str | None) -> list[Path]:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    paths = []
    fig, ax = plt.subplots(figsize=(7, 4.5))
    for key, frame in tables.items():
        if key.startswith("eval/") and not frame.empty and "eval_loss" in frame:
            ax.plot(frame["tokens"], frame["eval_loss"], marker="o", ms=3, label=key[5:])
    ax.set_xscale("log")
    paths.append(_finish(fig, ax, "tokens", "eval loss (nats/byte)", "rungs and hero: eval loss", out_dir / "rung_curves.png"))

    runs_csv = Path(fit_dir) / layout.RUNS_CSV if fit_dir else None
    law_csv = Path(fit_dir) / "law_curve.csv" if fit_dir else None
    if runs_csv and runs_csv.exists():
        runs = pd.read_csv(runs_csv)
        fig, ax = plt.subplots(figsize=(7, 4.5))
        kinds = runs["kind"] if "kind" in runs else pd.Series("final", index=runs.index)
        finals, branches = runs[kinds == "final"], runs[kinds == "branch"]
        ax.scatter(finals["flops"], finals["loss"], color="k", zorder=3, label="rungs (final)")
        if not branches.empty:
            ax.scatter(branches["flops"], branches["loss"], color="0.5", marker="^", zorder=3, label="rungs (cooldown branches)")
        if law_csv and law_csv.exists():
            law = pd.read_csv(law_csv)
            ax.plot(law["flops"], law["loss"], color="C0", label="fitted law")
            ax.fill_between(law["flops"], law["lower"], law["upper"], color="C0", alpha=0.2, label="interval")
        pred_flops = (rep.get("hero") or {}).get("flops")
        if pred_flops:
            h = rep["hero"]
            ax.errorbar([pred_flops], [h["predicted_final_loss"]],
                        yerr=[[h["predicted_final_loss"] - h["lower"]], [h["upper"] - h["predicted_final_loss"]]],
                        fmt="s", color="C1", label="hero predicted")
            if h.get("actual_final_loss") is not None:
                ax.scatter([pred_flops], [h["actual_final_loss"]], marker="*", s=120, color="C3", zorder=4, label="hero actual")
        ax.set_xscale("log")
        ax.set_yscale("log")
        paths.append(_finish(fig, ax, "training FLOPs", "final eval loss", "the law and its band", out_dir / "law.png"))

    comp = tables.get("hero_curve")
    pred = tables.get("hero_predicted_curve")
    if pred is not None and not pred.empty:
        fig, ax = plt.subplots(figsize=(7, 4.5))
        ax.plot(pred["step"], pred["loss"], color="C0", label="predicted")
        ax.fill_between(pred["step"], pred["lower"], pred["upper"], color="C0", alpha=0.2, label="band")
        if comp is not None and not comp.empty:
            ax.plot(comp["step"], comp["actual_raw"], color="0.6", lw=0.6, label="actual (raw)")
            ax.plot(comp["step"], comp["actual"], color="C3", label="actual (smoothed)")
            out = comp[~comp["inside"]]
            ax.scatter(out["step"], out["actual"], color="C3", marker="x", s=14, label="outside the band")
        second = tables.get("hero_curve_law")
        if second is not None and not second.empty:
            ax.plot(second["step"], second["predicted"], color="C2", ls="--", label="whole-curve law (second estimate)")
        lo = float(np.nanmin(pred["lower"])) if len(pred) else 0
        ax.set_ylim(lo * 0.97, float(np.nanquantile(pred["upper"], 0.9)) * 1.15)
        paths.append(_finish(fig, ax, "hero step", "train loss", "hero: predicted vs actual", out_dir / "hero.png"))
    return paths


def _html(rep: dict[str, Any], images: list[Path]) -> str:
    parts = ["<!doctype html><html><head><meta charset='utf-8'><title>ladder report: "
             f"{html.escape(str(rep.get('ladder')))}</title><style>body{{font-family:sans-serif;max-width:960px;margin:2em auto}}"
             "pre{background:#f6f6f6;padding:1em;overflow-x:auto}img{max-width:100%}</style></head><body>",
             f"<h1>ladder report: {html.escape(str(rep.get('ladder')))}</h1>",
             "<pre>" + html.escape("\n".join(report_lines(rep))) + "</pre>"]
    for img in images:
        data = base64.b64encode(img.read_bytes()).decode()
        parts.append(f"<h2>{html.escape(img.stem.replace('_', ' '))}</h2><img alt='{html.escape(img.stem)}' src='data:image/png;base64,{data}'>")
    parts.append("</body></html>")
    return "\n".join(parts)


def write_report(config: dict, dep_dirs: dict[str, str], out_dir: str) -> tuple[dict[str, Any], str]:
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rep, tables = build(config, dep_dirs)
    prediction = layout.read_json(Path(dep_dirs.get("predict", "/nonexistent")) / layout.PREDICTION, {}) or {}
    if rep.get("hero") and prediction.get("hero"):
        rep["hero"]["flops"] = prediction["hero"].get("flops")
    images = _plots(rep, tables, out, dep_dirs.get("fit"))
    if "hero_curve" in tables and not tables["hero_curve"].empty:
        layout.write_csv_atomic(out / "curve.csv", tables["hero_curve"])
    layout.write_json_atomic(out / layout.REPORT, rep)
    html_path = out / layout.REPORT_HTML
    tmp = out / f".{layout.REPORT_HTML}.tmp"
    tmp.write_text(_html(rep, images))
    tmp.replace(html_path)
    return rep, str(html_path)
