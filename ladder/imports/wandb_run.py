"""Import a W&B run's history (from the W&B API, or an exported CSV) as an actual curve.

Writes ``<root>/<ladder>/imported/<NAME>/metrics.jsonl`` (rows: step, tokens, loss, eval_loss and
the imported keys under their own names) and ``meta.json`` (where it came from), atomically; the
dashboard and the report overlay it. Our own metrics files stay the source of truth; an imported
run is only ever shown beside them.

Two CSV shapes are read: a history export (one column per key: ``_step``, ``train/loss`` ...) and
the W&B UI's chart export (``Step``, ``<run> - <key>``, ``<run> - <key>__MIN``/``__MAX``; the
MIN/MAX columns are dropped and the run prefix stripped).
"""

from __future__ import annotations

import csv
import json
import math
import os
import re
import time
from pathlib import Path
from typing import Any

from fits.errors import InputError
from ladder.outputs import layout
from ladder.outputs.files import safe_name
from ladder.wandb.api_session import DEFAULT_TIMEOUT_S

STEP_KEYS = ("_step", "Step", "step", "global_step", "trainer/global_step", "train/step")
TOKEN_KEYS = ("throughput/total_tokens", "tokens", "train/tokens", "total_tokens", "throughput/tokens")
FLOPS_KEYS = ("throughput/total_flops", "flops", "total_flops")
LOSS_KEYS = ("train/loss", "loss", "train_loss", "train/lm_loss")
EVAL_KEYS = ("eval/loss", "eval_loss", "eval/lm_loss")
METRIC_COLUMN = "metric"  # a long-format export: one row per (step, metric), the value in `loss`
# Task metrics, carried under their own names whatever else is imported: ours (eval.jsonl's task_acc/<task>,
# task_acc_se/<task>, task_bpb/<task>) and OLMo's W&B names (eval/downstream/<task>_..._len_norm,
# eval/downstream_bpb/<task>_..._bpb), so a followed hero's task forecast refreshes as its evals arrive.
TASK_PREFIXES = ("task_acc/", "task_acc_se/", "task_bpb/", "eval/downstream/", "eval/downstream_bpb/")


def is_task_metric(key: str) -> bool:
    return isinstance(key, str) and key.startswith(TASK_PREFIXES)
RUN_PATH_RE = re.compile(r"^([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)/(?:runs/)?([A-Za-z0-9_.-]+)$")


def parse_run_path(run_path: str) -> tuple[str, str, str]:
    path = run_path.strip()
    for prefix in ("https://wandb.ai/", "http://wandb.ai/", "wandb.ai/"):
        if path.startswith(prefix):
            path = path[len(prefix):]
    path = path.split("?")[0].strip("/")
    m = RUN_PATH_RE.match(path)
    if not m:
        raise InputError(f"run {run_path!r}: expected ENTITY/PROJECT/RUN_ID, e.g. marin-community/marin_moe/abc123")
    return m.group(1), m.group(2), m.group(3)


def parse_keys(keys) -> list[tuple[str, str]]:
    """--keys values (repeatable, comma-separated, KEY=NAME renames) as (source, name) pairs."""
    out: list[tuple[str, str]] = []
    for item in keys or ():
        for part in str(item).split(","):
            part = part.strip()
            if not part:
                continue
            src, _, dst = part.partition("=")
            src, dst = src.strip(), (dst.strip() or src.strip())
            if not src or not re.match(r"^[A-Za-z0-9_./:@ -]+$", dst):
                raise InputError(f"--keys {part!r}: give KEY or KEY=NAME (NAME of letters, digits, _ . / -)")
            out.append((src, dst))
    return out


def read_export_csv(path: str | Path) -> list[dict[str, Any]]:
    """Records of an exported history CSV (either shape), values parsed as numbers."""
    p = Path(path)
    if not p.is_file():
        raise InputError(f"--from-csv {path}: no such file; export the run's history as CSV first")
    try:
        with p.open(newline="", encoding="utf-8-sig") as fh:
            reader = csv.reader(fh)
            header = next(reader, None)
            if not header:
                raise InputError(f"--from-csv {path}: empty file; export the run's history with a header row")
            rows = [r for r in reader]
    except (UnicodeDecodeError, csv.Error) as exc:
        raise InputError(f"--from-csv {path}: not a CSV ({exc}); export the history as comma-separated text") from None
    names = []
    for h in header:
        h = h.strip()
        if h.endswith("__MIN") or h.endswith("__MAX"):
            names.append(None)
            continue
        if " - " in h:  # UI chart export: "<run name> - <key>"
            h = h.split(" - ", 1)[1].strip()
        names.append(h)
    records = []
    for r in rows:
        if len(r) != len(header):
            continue  # a truncated last line
        rec = {}
        for name, v in zip(names, r, strict=True):
            if name is None:
                continue
            x = _number(v)
            if x is not None:
                rec[name] = x
            elif name == METRIC_COLUMN and v.strip():
                rec[name] = v.strip()
        if rec:
            records.append(rec)
    return records


def choose_metric(records: list[dict[str, Any]], metric: str | None, source: str) -> tuple[list[dict[str, Any]], list]:
    """The records of one metric, and the --keys that make it the imported ``loss``.

    A long-format export (a ``metric`` column naming what each row's ``loss`` measures, as Marin's
    hero_eval.csv) keeps the rows of ``metric``, which must be given when the file holds several.
    A history export (one column per key) takes the column ``metric`` as the loss.
    """
    names = sorted({r[METRIC_COLUMN] for r in records if isinstance(r.get(METRIC_COLUMN), str)})
    if names:
        if metric is None and len(names) > 1:
            raise InputError(f"{source}: holds {len(names)} metrics in its '{METRIC_COLUMN}' column ({', '.join(names)}); "
                                  f"pick one with --metric NAME, e.g. --metric {names[0]}")
        chosen = metric or names[0]
        if chosen not in names:
            raise InputError(f"{source}: no rows of metric {chosen!r} (it holds {', '.join(names)}); fix --metric")
        return [{k: v for k, v in r.items() if k != METRIC_COLUMN} for r in records if r.get(METRIC_COLUMN) == chosen], []
    if metric is None:
        return records, []
    if not any(metric in r for r in records):
        have = ", ".join(sorted({k for r in records[:50] for k in r})[:12])
        raise InputError(f"{source}: no column {metric!r} (columns: {have}); fix --metric")
    return [r for r in records if metric in r], [(metric, "loss")]


class Unreachable(InputError):
    """W&B's API did not answer (refused, timed out, no network): bad input to an import, worth a
    retry to a poll (ladder.analysis.follow_source)."""


def fetch_api(run_path: str, keys: list[tuple[str, str]], timeout_s: float = DEFAULT_TIMEOUT_S) -> list[dict[str, Any]]:
    """The run's history through wandb.Api (network; needs a W&B login). Each request may take
    ``timeout_s`` (wandb-core retries a refused connection until then); W&B's files go to a scratch
    folder. Raises Unreachable when no answer came, InputError when the server said no."""
    entity, project, run_id = parse_run_path(run_path)
    try:
        import wandb
    except ImportError as exc:  # pragma: no cover - wandb is a dependency
        raise InputError("wandb is not installed; pip install wandb, or use --from-csv FILE") from exc
    from ladder.wandb.api_session import TEARDOWN_S, scratch_dirs, unreachable
    from ladder.wandb.env import has_api_key, teardown_bounded

    if not has_api_key():
        raise InputError("no W&B API key: run `wandb login` or set WANDB_API_KEY, "
                              "or export the run's history to CSV and pass --from-csv FILE")
    with scratch_dirs():
        try:
            records = _history(wandb.Api(timeout=timeout_s).run(f"{entity}/{project}/{run_id}"), keys)
        except Exception as exc:  # network, auth, missing run: W&B raises many kinds; one line each
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            if unreachable(exc):
                server = os.environ.get("WANDB_BASE_URL", "https://api.wandb.ai")
                raise Unreachable(f"run {run_path}: W&B at {server} did not answer within {timeout_s:g}s ({first}); "
                                  "check the network and WANDB_BASE_URL, or use --from-csv FILE") from None
            raise InputError(f"run {run_path}: W&B API failed ({first}); check the path and your login, "
                                  "or use --from-csv FILE") from None
        finally:
            teardown_bounded(wandb, TEARDOWN_S)
    return [{k: _number(v) for k, v in r.items() if _number(v) is not None} for r in records]


def _history(run, keys: list[tuple[str, str]]) -> list[dict[str, Any]]:
    if not keys:
        return list(run.scan_history(page_size=1000))
    # scan_history(keys=...) keeps only rows holding every key: fetch each key with the step; the task metrics
    # the run's summary names come too
    tasks = {k for k in (getattr(run, "summary_metrics", None) or {}) if is_task_metric(k)}
    merged: dict[float, dict] = {}
    for src in sorted({src for src, _ in keys} | set(TOKEN_KEYS) | tasks):
        for row in run.scan_history(keys=["_step", src], page_size=1000):
            step = _number(row.get("_step"))
            if step is not None:
                merged.setdefault(step, {"_step": step})[src] = row.get(src)
    return [merged[s] for s in sorted(merged)]


def normalize(records: list[dict[str, Any]], keys: list[tuple[str, str]], source: str) -> list[dict[str, Any]]:
    """Rows with step (and tokens, flops, loss, eval_loss where known), sorted by step."""
    if not records:
        raise InputError(f"{source}: no history rows with numbers; check the run and the exported columns")
    present: dict[str, None] = {}
    for r in records:
        for k in r:
            present.setdefault(k, None)
    step_key = next((k for k in STEP_KEYS if k in present), None)
    if step_key is None:
        raise InputError(f"{source}: no step column (one of {', '.join(STEP_KEYS)}); export the history with its step")
    mapping: list[tuple[str, str]] = []
    if keys:
        missing = [src for src, _ in keys if src not in present]
        if missing:
            have = ", ".join(list(present)[:12])
            raise InputError(f"{source}: no key {missing[0]!r} in the history (keys present: {have}); fix --keys")
        mapping = list(keys)
    else:
        mapping = [(k, k) for k in present if k != step_key and ("loss" in k or k in TOKEN_KEYS or k in FLOPS_KEYS)]
    sources = {src for src, _ in mapping}
    mapping += [(k, k) for k in present if is_task_metric(k) and k not in sources]
    names = {dst for _, dst in mapping}
    for group, canon in ((TOKEN_KEYS, "tokens"), (FLOPS_KEYS, "flops"), (LOSS_KEYS, "loss"), (EVAL_KEYS, "eval_loss")):
        if canon in names:
            continue
        src = next((k for k in group if k in present and (not keys or k in {s for s, _ in keys} or canon in ("tokens", "flops"))), None)
        if src is not None:
            mapping.append((src, canon))
    by_step: dict[float, dict[str, Any]] = {}
    for r in records:
        step = r.get(step_key)
        if step is None:
            continue
        vals = {dst: r[src] for src, dst in mapping if r.get(src) is not None}
        if not vals:
            continue
        row = by_step.setdefault(step, {"step": int(step) if float(step).is_integer() else step})
        row.update(vals)
    rows = [by_step[s] for s in sorted(by_step)]
    if not any(any(k != "step" for k in r) for r in rows):
        raise InputError(f"{source}: none of the imported keys has a value; pick keys with --keys")
    return rows


def import_run(run_path: str, name: str, root: str | Path, ladder: str | None = None, keys=(),
               from_csv: str | Path | None = None, metric: str | None = None) -> tuple[Path, int]:
    """Import and write; returns (the run's folder, rows written). Raises InputError on bad input."""
    parse_run_path(run_path)
    if not safe_name(name):
        raise InputError(f"--as {name!r}: use letters, digits, '_', '.', '-' (no '/' or '..'), e.g. --as marin_hero")
    root_p = Path(root).expanduser()
    if "://" in str(root):
        raise InputError(f"--root {root}: import writes to a local folder; give a local path")
    if not root_p.is_dir():
        raise InputError(f"--root {root}: no such folder; give the ladder root (the --root you submitted with)")
    if ladder is None:
        ladders = [d.name for d in sorted(root_p.iterdir()) if d.is_dir() and safe_name(d.name) and not d.name.startswith(".")]
        if len(ladders) != 1:
            found = ", ".join(ladders) or "none"
            raise InputError(f"--ladder: {len(ladders)} ladders under {root} ({found}); name one with --ladder NAME")
        ladder = ladders[0]
    if not safe_name(ladder):
        raise InputError(f"--ladder {ladder!r}: use letters, digits, '_', '.', '-'")
    key_pairs = parse_keys(keys)
    if from_csv is not None:
        records = read_export_csv(from_csv)
        source = f"--from-csv {from_csv}"
    else:
        records = fetch_api(run_path, key_pairs + ([(metric, "loss")] if metric else []))
        source = f"run {run_path}"
    records, as_loss = choose_metric(records, metric, source)
    if as_loss:
        key_pairs = [(s, d) for s, d in key_pairs if d != "loss"] + as_loss
        if not any(d == "tokens" for _, d in key_pairs):
            key_pairs += [(k, "tokens") for k in TOKEN_KEYS if any(k in r for r in records)][:1]
    rows = normalize(records, key_pairs, source)
    out = root_p / ladder / "imported" / name
    out.mkdir(parents=True, exist_ok=True)
    tmp = out / f".{layout.METRICS}.tmp"
    with tmp.open("w") as fh:
        for r in rows:
            fh.write(json.dumps(r) + "\n")
        fh.flush()
        os.fsync(fh.fileno())
    os.replace(tmp, out / layout.METRICS)
    layout.write_json_atomic(out / "meta.json", {
        "name": name, "run_path": run_path, "source": "csv" if from_csv is not None else "wandb_api",
        "from_csv": str(from_csv) if from_csv is not None else None, "keys": [f"{s}={d}" for s, d in key_pairs],
        "metric": metric,
        "rows": len(rows), "columns": sorted({k for r in rows for k in r}), "imported_at": time.time()})
    return out, len(rows)


def _number(v: Any) -> float | None:
    if isinstance(v, bool) or v is None:
        return None
    if isinstance(v, int | float):
        x = float(v)
    else:
        s = str(v).strip()
        if not s:
            return None
        try:
            x = float(s)
        except ValueError:
            return None
    return x if math.isfinite(x) else None
