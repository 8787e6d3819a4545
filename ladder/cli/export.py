"""`ladder compare A B` (two ladders' fits and hero predictions side by side) and `ladder export`
(a ladder's outputs as parquet tables). Both read what the steps wrote; neither runs anything.
"""

from __future__ import annotations

import io
import json

import click

from ladder.cli.options import example, json_option, root_option, table_width

TRAINING = ("metrics.jsonl", "eval.jsonl")


def _store_and_dirs(spec):
    from ladder.dag import queries
    from ladder.executor.store import Store

    store = Store(spec.root)
    return store, {name: store.to_path(path) for name, path in queries.step_dirs(spec).items()}


def _json(store, d: str, name: str) -> dict:
    return store.read_json(store.join(d, name)) or {}


def summarise(spec) -> dict:
    """What a comparison shows of one ladder: its law, backtest and hero prediction (None where a
    step has not run yet)."""
    from ladder.outputs import layout

    store, dirs = _store_and_dirs(spec)
    fit = _json(store, dirs["fit"], layout.FIT) if "fit" in dirs else {}
    pred = _json(store, dirs["predict"], layout.PREDICTION) if "predict" in dirs else {}
    summary, backtest, hero = fit.get("summary") or {}, fit.get("backtest") or {}, pred.get("hero") or {}
    actual = None
    if "hero" in dirs:
        actual = (_json(store, dirs["hero"], layout.RESULT) or {}).get("final_eval_loss")
    return {
        "ladder": spec.name, "root": spec.root, "rungs": len(spec.rungs),
        "law": summary.get("law"), "params": summary.get("params") or {}, "level": summary.get("level"),
        "fit_on": summary.get("fit_on"),
        "backtest_error": backtest.get("relative_error"), "backtest_ratio": backtest.get("compute_ratio"),
        "hero_flops": hero.get("flops"), "hero_ratio": hero.get("compute_ratio"),
        "predicted_final_loss": hero.get("predicted_final_loss"), "lower": hero.get("lower"),
        "upper": hero.get("upper"), "actual_final_loss": actual,
    }


def _fmt(v) -> str:
    if v is None:
        return "-"
    if isinstance(v, float):
        return f"{v:.4g}"
    if isinstance(v, list):
        return ", ".join(map(str, v))
    return str(v)


@click.command("compare", epilog=example(
    "ladder compare experiments/tiny.py experiments/smoke.py --root runs",
    "ladder compare experiments/tiny.py experiments/tiny.py --set-b fit.law=chinchilla --json",
))
@click.argument("spec_a", metavar="SPEC_A", type=click.Path(dir_okay=False))
@click.argument("spec_b", metavar="SPEC_B", type=click.Path(dir_okay=False))
@root_option
@click.option("--set-a", "set_a", multiple=True, metavar="KEY=VALUE", help="Override a field of SPEC_A.")
@click.option("--set-b", "set_b", multiple=True, metavar="KEY=VALUE", help="Override a field of SPEC_B.")
@json_option
def compare(spec_a, spec_b, root, set_a, set_b, as_json):
    """Two ladders' fitted laws, backtests and hero predictions side by side (from their outputs)."""
    from rich.console import Console
    from rich.table import Table

    from ladder.cli.common import _spec

    a, b = (summarise(_spec(p, s, root)) for p, s in ((spec_a, set_a), (spec_b, set_b)))
    if as_json:
        click.echo(json.dumps({"a": a, "b": b}, default=str))
        return 0
    table = Table(title=f"compare: {a['ladder']} and {b['ladder']}")
    for col in ("", "A", "B"):
        table.add_column(col, overflow="fold")
    keys = ["ladder", "root", "rungs", "law", "fit_on", "backtest_error", "backtest_ratio", "hero_flops", "hero_ratio",
            "predicted_final_loss", "lower", "upper", "level", "actual_final_loss"]
    for k in keys:
        table.add_row(k, _fmt(a[k]), _fmt(b[k]))
    for k in sorted(set(a["params"]) | set(b["params"])):
        table.add_row(f"param {k}", _fmt(a["params"].get(k)), _fmt(b["params"].get(k)))
    Console(width=table_width()).print(table)
    return 0


def tables(spec) -> dict:
    """A ladder's outputs as DataFrames: one row per step (status, result), per logged train step,
    per eval, per fitted point, per point of the predicted hero curve and per forecast snapshot."""
    import pandas as pd

    from ladder.outputs import layout

    store, dirs = _store_and_dirs(spec)
    steps, frames = [], {"metrics": [], "eval": []}
    for name, d in dirs.items():
        status = _json(store, d, layout.STATUS)
        steps.append({"step": name, "path": store.url(d), "status": status.get("status"),
                      **{k: v for k, v in _json(store, d, layout.RESULT).items() if not isinstance(v, list | dict)}})
        for key, fname in zip(("metrics", "eval"), TRAINING, strict=True):
            raw = store.read_bytes(store.join(d, fname))
            if raw:
                rows = [json.loads(line) for line in raw.decode().splitlines() if line.strip().endswith("}")]
                frames[key].append(pd.DataFrame(rows).assign(run=name))
    out = {"steps": pd.DataFrame(steps)}
    for key, parts in frames.items():
        if parts:
            out[key] = pd.concat(parts, ignore_index=True)
    for table, step, fname in (("fit_points", "fit", layout.RUNS_CSV), ("hero_curve", "predict", layout.HERO_CURVE)):
        raw = store.read_bytes(store.join(dirs[step], fname)) if step in dirs else None
        if raw:
            out[table] = pd.read_csv(io.BytesIO(raw))
    raw = store.read_bytes(store.join(dirs["hero"], layout.FORECASTS)) if "hero" in dirs else None
    if raw:
        out["forecasts"] = pd.DataFrame([json.loads(x) for x in raw.decode().splitlines() if x.strip().endswith("}")])
    return out


@click.command("export", epilog=example(
    "ladder export experiments/tiny.py --root runs --out tiny-export",
    "ladder export experiments/marin_moe_535b.py --out marin --json",
))
@click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False))
@root_option
@click.option("--out", "out_dir", type=click.Path(file_okay=False), required=True,
              help="Folder for the parquet files (created; files in it are replaced whole).")
@json_option
@click.option("--set", "overrides", multiple=True, metavar="KEY=VALUE", help="Override a spec field (repeatable).")
def export(spec_path, root, out_dir, as_json, overrides):
    """Write a ladder's outputs as parquet: steps, metrics, eval, fit_points, hero_curve, forecasts."""
    from pathlib import Path

    from ladder.cli.common import _spec

    spec = _spec(spec_path, overrides, root)
    frames = tables(spec)
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    written = {}
    for name, frame in frames.items():
        path = out / f"{name}.parquet"
        tmp = out / f".{name}.parquet.tmp"
        # mixed-type columns (a status string beside a number) as text, so parquet takes them
        for col in frame.select_dtypes(include="object").columns:
            frame[col] = frame[col].map(lambda v: v if v is None or isinstance(v, str) else json.dumps(v, default=str))
        frame.to_parquet(tmp, index=False)
        tmp.replace(path)
        written[name] = {"path": str(path), "rows": len(frame)}
    if as_json:
        click.echo(json.dumps({"ladder": spec.name, "out": str(out), "tables": written}))
        return 0
    for name, w in written.items():
        click.echo(f"{name:<11} {w['rows']:>7} rows  {w['path']}")
    return 0

