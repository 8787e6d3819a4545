"""Where a followed hero's eval points come from: an exported CSV or a JSONL file (a path or an
http(s) URL, re-read whole each poll as it grows), or W&B runs (several ids stitched by step).

Records are parsed by the import-wandb code (ladder.imports.wandb_run), so a file that imports
follows. Every source gives the same frame: step, tokens, loss (the followed eval metric), sorted, and
the task metrics its eval rows carry (``task_acc/<task>``, ``task_bpb/<task>`` ..., under their own names).
"""

from __future__ import annotations

import json
from dataclasses import dataclass

import pandas as pd

from ladder.imports.wandb_run import (
    DEFAULT_TIMEOUT_S,
    EVAL_KEYS,
    METRIC_COLUMN,
    InputError,
    Unreachable,
    _number,
    choose_metric,
    fetch_api,
    is_task_metric,
    normalize,
    parse_run_path,
    read_export_csv,
)


class SourceUnavailable(RuntimeError):
    """A poll could not read the source this time (network, W&B error): retried with backoff."""


@dataclass(frozen=True)
class Source:
    kind: str  # csv | jsonl | wandb
    where: str  # a path, a URL, or comma-separated ENTITY/PROJECT/RUN ids
    metric: str | None = None
    timeout_s: float = DEFAULT_TIMEOUT_S  # W&B: how long each API request may take before the poll fails

    @property
    def runs(self) -> list[str]:
        """ENTITY/PROJECT/RUN paths; a bare RUN after the first takes the first one's ENTITY/PROJECT."""
        out: list[str] = []
        for r in (r.strip() for r in self.where.split(",")):
            if not r:
                continue
            if "/" not in r and out:
                r = out[0].rsplit("/", 1)[0] + "/" + r
            out.append(r)
        return out

    def describe(self) -> str:
        return {"csv": "--from-csv", "jsonl": "--from-jsonl", "wandb": "--hero"}[self.kind] + f" {self.where}"


def check(source: Source) -> None:
    """Bad input found before the first poll: one line (InputError)."""
    if source.kind == "wandb":
        for run in source.runs:
            parse_run_path(run)
        if not source.runs:
            raise InputError("--hero: give ENTITY/PROJECT/RUN[,RUN...]")


def read_points(source: Source) -> pd.DataFrame:
    """The hero's eval points so far: step, tokens, loss. InputError on bad input; SourceUnavailable
    when the source cannot be reached now."""
    return read(source)[0]


def read(source: Source) -> tuple[pd.DataFrame, list[dict]]:
    """read_points' frame and, for a file, its raw records (the training metrics are read from them)."""
    if source.kind in ("csv", "jsonl"):
        records = read_export_csv(source.where) if source.kind == "csv" else _read_jsonl(source.where)
        return _points(records, source.metric, source.describe()), records
    return _wandb_points(source), []


def _wandb_points(source: Source) -> pd.DataFrame:
    frames = []
    for run in source.runs:
        try:
            records = fetch_api(run, [(source.metric, "loss")] if source.metric else [], source.timeout_s)
        except Unreachable as exc:
            raise SourceUnavailable(str(exc)) from None
        frames.append(_points(records, source.metric, f"run {run}"))
    return stitch(frames)


def stitch(frames: list[pd.DataFrame]) -> pd.DataFrame:
    """Runs of one hero in order (a run resumed under a new id): from each run's first step on, its rows win."""
    out: pd.DataFrame | None = None
    for f in frames:
        if f.empty:
            continue
        out = f if out is None else pd.concat([out[out["step"] < int(f["step"].min())], f], ignore_index=True)
    if out is None:
        return pd.DataFrame(columns=["step", "tokens", "loss"])
    return out.sort_values("step").reset_index(drop=True)


def _points(records: list[dict], metric: str | None, source: str) -> pd.DataFrame:
    if not records:
        return pd.DataFrame(columns=["step", "tokens", "loss"])
    long_format = any(isinstance(r.get(METRIC_COLUMN), str) for r in records)
    records, as_loss = choose_metric(records, metric, source)
    rows = normalize(records, as_loss, source)
    key = "loss" if metric or long_format else "eval_loss"
    if not any(key in r for r in rows):
        raise InputError(f"{source}: no eval metric ({', '.join(EVAL_KEYS)}); name the eval loss with --metric KEY")
    frame = pd.DataFrame([{"step": int(r["step"]), "tokens": r.get("tokens"), "loss": r[key],
                           **{k: v for k, v in r.items() if is_task_metric(k)}} for r in rows if key in r])
    return frame.sort_values("step").reset_index(drop=True)


def _read_jsonl(where: str) -> list[dict]:
    """A JSONL file's rows (a path or a URL through fsspec); a truncated last line is a writer mid-append."""
    import fsspec

    try:
        with fsspec.open(where, "r", encoding="utf-8") as fh:
            text = fh.read()
    except FileNotFoundError:
        if "://" in where and not where.startswith("file://"):  # fsspec's http says this for a refused connection too
            raise SourceUnavailable(f"--from-jsonl {where}: not reachable now") from None
        raise InputError(f"--from-jsonl {where}: no such file; give the metrics file the run appends to") from None
    except OSError as exc:
        raise SourceUnavailable(f"--from-jsonl {where}: {type(exc).__name__}: {str(exc)[:200]}") from None
    lines = text.splitlines()
    out = []
    for i, line in enumerate(lines):
        line = line.strip()
        if not line:
            continue
        try:
            row = json.loads(line)
        except json.JSONDecodeError:
            if i == len(lines) - 1 and not text.endswith("\n"):
                continue  # the writer is mid-line: read it next poll
            raise InputError(f"--from-jsonl {where}: line {i + 1} is not JSON; give one JSON object a line") from None
        if isinstance(row, dict):
            out.append({k: (v if isinstance(v, str) and k == "metric" else _number(v)) for k, v in row.items()
                        if _number(v) is not None or (k == "metric" and isinstance(v, str))})
    return out
