"""`ladder export`: a ladder's outputs as parquet tables, read from what the steps wrote (nothing runs).
"""

from __future__ import annotations

import io
import json

import click

from ladder.cli.common import set_option, variant_option
from ladder.cli.options import example, json_option, root_option

TRAINING = ("metrics.jsonl", "eval.jsonl")


def _store_and_dirs(spec):
    from ladder.dag import queries
    from ladder.executor.store import Store

    store = Store(spec.root)
    return store, {name: store.to_path(path) for name, path in queries.step_dirs(spec).items()}


def _json(store, d: str, name: str) -> dict:
    return store.read_json(store.join(d, name)) or {}


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
@set_option
@variant_option
def export(spec_path, root, out_dir, as_json, overrides, variant):
    """Write a ladder's outputs as parquet: steps, metrics, eval, fit_points, hero_curve, forecasts."""
    from pathlib import Path

    from ladder.cli.common import _spec

    spec = _spec(spec_path, overrides, root, variant)
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

