"""Runs trained elsewhere (`ladder import-results`): their recorded finals or whole eval curves,
stored under <root>/<ladder>/imported_results.csv and turned into steps that stand in for training.

A file holds either finals (name, loss; optional tokens, params, flops) or curves (name or rung,
step, loss, several rows per run; optional tokens, flops). A later import replaces the runs it
names and keeps the others, so rungs and the hero can come from separate files. A curve whose
last step falls short of its spec's steps is recorded partial: the result says how far it got.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd

from fits.errors import InputError
from ladder.outputs import layout
from ladder.spec import LadderSpec, RungSpec, rung_from_dict

IMPORTED = "imported_results.csv"
# Task metrics a curve may carry beside its loss (OLMo's exports, a ladder's own task evals): kept per
# eval point in the run's eval.jsonl, where the task forecast (ladder/analysis/tasks.py) reads them.
TASK_PREFIXES = ("task_bpb/", "task_acc/")


def task_metric_columns(columns) -> list[str]:
    return [c for c in columns if str(c).startswith(TASK_PREFIXES)]
# W&B steps are zero-based: a run's last eval sits one step (or one eval interval's rounding) short of its steps.
COMPLETE_FRAC = 0.995


def read_results(path: str, spec: LadderSpec) -> pd.DataFrame:
    """The file as normalised rows (name, loss, and step/tokens/params/flops where given), or InputError."""
    try:
        frame = pd.read_csv(path)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read a CSV ({type(exc).__name__}); give a CSV with columns name, loss") from exc
    return check_results(frame, str(path), spec)


def check_results(frame: pd.DataFrame, path: str, spec: LadderSpec) -> pd.DataFrame:
    """Rows read from a file or a W&B project (`path` names which), checked and normalised, or InputError."""
    if "name" not in frame.columns and "rung" in frame.columns:
        frame = frame.rename(columns={"rung": "name"})
    for col in ("name", "loss"):
        if col not in frame.columns:
            raise InputError(f"{path}: missing column '{col}'; give columns name (or rung), loss, and for curves step "
                               "(optional tokens, params, flops)")
    names = {r.name for r in spec.all_runs()}
    numeric = [c for c in ("loss", "step", "tokens", "params", "flops") if c in frame.columns]
    # a curve may start at step 0, before any token or FLOP
    zero_ok = {"step", "tokens", "flops"} if "step" in frame.columns else set()
    for i, row in frame.iterrows():
        if row["name"] not in names:
            raise InputError(f"{path}: row {i + 1}: name {row['name']!r} is not a run of {spec.name} ({', '.join(sorted(names))})")
        if pd.isna(row["loss"]):
            raise InputError(f"{path}: row {i + 1}: loss is empty")
        for col in numeric:
            v = row[col]
            if pd.isna(v):
                continue
            ok = isinstance(v, int | float | np.integer | np.floating) and math.isfinite(v)
            ok = ok and (v >= 0 if col in zero_ok else v > 0)
            if not ok:
                kind = "a non-negative number" if col in zero_ok else "a positive number"
                raise InputError(f"{path}: row {i + 1}: {col} must be {kind}, got {v!r}")
    if "step" in frame.columns:
        if frame["step"].isna().any():
            i = int(np.flatnonzero(frame["step"].isna())[0])
            raise InputError(f"{path}: row {i + 1}: step is empty; a curve needs a step on every row")
        dup = frame.duplicated(["name", "step"], keep=False)
        if dup.any():
            i = int(np.flatnonzero(dup)[0])
            raise InputError(f"{path}: row {i + 1}: {frame['name'].iloc[i]} has step {frame['step'].iloc[i]} twice; "
                               "keep one row per (name, step)")
    else:
        dup = frame.duplicated(["name"], keep=False)
        if dup.any():
            i = int(np.flatnonzero(dup)[0])
            raise InputError(f"{path}: row {i + 1}: {frame['name'].iloc[i]} has several final losses; give a step "
                               "column to import a curve")
    keep = ["name", "loss"] + [c for c in ("step", "tokens", "params", "flops") if c in frame.columns]
    return frame[keep + (task_metric_columns(frame.columns) if "step" in frame.columns else [])]


def write(spec: LadderSpec, frame: pd.DataFrame) -> Path:
    """Merge into the ladder's imported results: rows for the runs in `frame` replace that run's old rows."""
    path = Path(spec.root) / spec.name / IMPORTED
    if not path.exists():
        layout.write_csv_atomic(path, frame)
        return path
    old = pd.read_csv(path)
    kept = old[~old["name"].isin(set(frame["name"]))]
    merged = pd.concat([kept, frame], ignore_index=True) if not kept.empty else frame
    layout.write_csv_atomic(path, merged)
    return path


def records(spec: LadderSpec) -> dict[str, dict]:
    """Imported runs by name: the final's row (loss, tokens...) or {"curve": [rows sorted by step]}."""
    path = Path(spec.root) / spec.name / IMPORTED
    if "://" in spec.root or not path.exists():
        return {}
    frame = pd.read_csv(path)
    out = {}
    for name, grp in frame.groupby("name", sort=False):
        rows = [{k: (None if isinstance(v, float) and v != v else v) for k, v in r.items() if k != "name"}
                for r in grp.to_dict("records")]
        if "step" in grp.columns and grp["step"].notna().all():
            out[name] = {"curve": sorted(rows, key=lambda r: r["step"])}
        else:
            out[name] = {k: v for k, v in rows[-1].items() if k != "step"}
    return out


def result_for(rung: RungSpec, record: dict) -> tuple[dict, pd.DataFrame | None]:
    """(result.json, eval rows or None) for an imported run, in the shape of a training result."""
    fpt = rung.flops / rung.tokens
    if "curve" not in record:
        row = record
        tokens = float(row.get("tokens") or rung.tokens)
        params = float(row.get("params") or rung.model.params_active)
        return ({"name": rung.name, "status": "SUCCESS", "imported": True, "final_eval_loss": float(row["loss"]),
                 "final_train_loss": row.get("train_loss"), "params_active": params,
                 "params_total": rung.model.params_total, "params_non_embedding": rung.model.params_non_embedding,
                 "tokens": tokens, "flops": float(row.get("flops") or tokens * fpt), "steps": rung.steps,
                 "branches": []}, None)
    curve = pd.DataFrame(record["curve"])
    steps = curve["step"].astype(int)
    tokens = curve["tokens"] if "tokens" in curve and curve["tokens"].notna().all() else steps * rung.batch_tokens
    flops = curve["flops"] if "flops" in curve and curve["flops"].notna().all() else tokens * fpt
    evals = pd.DataFrame({"step": steps, "tokens": tokens.astype(float), "flops": flops.astype(float),
                          "eval_loss": curve["loss"].astype(float), "frac": steps / rung.steps})
    for col in task_metric_columns(curve.columns):
        evals[col] = pd.to_numeric(curve[col], errors="coerce").astype(float)
    last = evals.iloc[-1]
    done = float(last["step"] + 1) / rung.steps
    partial = done < COMPLETE_FRAC
    result = {"name": rung.name, "status": "SUCCESS", "imported": True, "curve": True, "partial": partial,
              "completed_frac": min(done, 1.0), "last_step": int(last["step"]), "final_eval_loss": float(last["eval_loss"]),
              "final_train_loss": None, "params_active": float(rung.model.params_active),
              "params_total": rung.model.params_total, "params_non_embedding": rung.model.params_non_embedding,
              "tokens": float(last["tokens"]) if partial else float(rung.tokens),
              "flops": float(last["flops"]) if partial else float(rung.flops), "steps": rung.steps,
              "spec_tokens": float(rung.tokens), "spec_flops": float(rung.flops),
              "eval_points": int(len(evals)), "branches": []}
    if partial:
        result["note"] = (f"partial: its last point is step {int(last['step']):,} of {rung.steps:,} ({done:.0%}); "
                          "final-loss laws leave it out, curve laws use what it has")
    return result, evals


def import_step(config: dict, ctx) -> dict:
    """The step that stands in for training an imported run: result.json (+ eval.jsonl for a curve)."""
    rung = rung_from_dict(config["rung"])
    result, evals = result_for(rung, config["imported"])
    out = Path(ctx.out_dir)
    if evals is not None:
        tmp = out / f".{layout.EVAL}.tmp"
        text = evals.to_json(orient="records", lines=True)
        tmp.write_text(text if text.endswith("\n") else text + "\n")
        tmp.replace(out / layout.EVAL)
    layout.write_json_atomic(out / layout.RESULT, result)
    return result
