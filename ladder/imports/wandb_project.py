"""Rung results straight from a W&B project (`ladder import-results SPEC --from-wandb ENTITY/PROJECT`).

Online through `wandb.Api()` (a W&B login); offline, the same runs come from an exported CSV,
read by ladder.imports.results as before. Two parts, kept apart so the mapping is testable without a
network: `fetch` (the API calls, one clear line on any failure, nothing written) and
`rows_from_runs`, a pure function from W&B run objects and their history rows to our rows
(name, loss, and step/tokens/params/flops), which ladder.imports.results then checks like a file's.
Its tests (tests/ladder/test_import_results.py) run it on real wandb.apis.public.Run objects, built
offline from the attributes the server sends; history rows are the plain dicts scan_history
yields, which cannot be had without a server.

Which spec run a W&B run records: the name our own logger puts in its config (`run.name`, or a
training step's `rung.name`), else the run's display name. The newest run of each name wins (W&B
lists runs newest first): a crashed attempt and its rerun are two runs of one rung.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

import pandas as pd

from fits.errors import InputError
from ladder.imports.results import check_results
from ladder.imports.wandb_run import EVAL_KEYS, FLOPS_KEYS, TOKEN_KEYS
from ladder.wandb.api_session import DEFAULT_TIMEOUT_S, TEARDOWN_S, scratch_dirs
from ladder.wandb.env import teardown_bounded

PROJECT_RE = re.compile(r"^([A-Za-z0-9_.-]+)/([A-Za-z0-9_.-]+)$")
STEP_KEY = "_step"
# The eval loss of a curve: import-wandb's keys; of a final, ours (result.json's) first.
CURVE_KEYS = EVAL_KEYS
FINAL_KEYS = ("final_eval_loss", *EVAL_KEYS)
PARAMS_KEYS = ("params_active",)


def parse_project(path: str) -> tuple[str, str]:
    p = path.strip().removeprefix("https://wandb.ai/").removeprefix("wandb.ai/").split("?")[0].strip("/")
    m = PROJECT_RE.match(p)
    if not m:
        raise InputError(f"--from-wandb {path!r}: expected ENTITY/PROJECT, e.g. marin-community/marin_moe")
    return m.group(1), m.group(2)


def spec_name(run: Any) -> str | None:
    """The spec run a W&B run records (see the module's docstring)."""
    config = getattr(run, "config", None) or {}
    for key in ("run", "rung"):
        named = config.get(key)
        if isinstance(named, dict) and isinstance(named.get("name"), str):
            return named["name"]
    return getattr(run, "name", None)


def loss_key(summary: dict, metric: str | None, curves: bool) -> str | None:
    """The key read as the loss: --metric, else the first of the usual keys the run's summary holds."""
    if metric:
        return metric if metric in summary else None
    return next((k for k in (CURVE_KEYS if curves else FINAL_KEYS) if k in summary), None)


def rows_from_runs(runs: Sequence[tuple[Any, list[dict]]], names: Iterable[str], *, metric: str | None = None,
                   curves: bool = False, source: str = "W&B") -> tuple[pd.DataFrame, list[str]]:
    """Our rows from W&B runs: (frame, skipped, one line per run left out and why).

    runs: (run, history) pairs, newest run first; a run has .name, .config and .summary_metrics
    (wandb.apis.public.Run's), history is the rows `run.scan_history()` yields (ignored for finals).
    Finals: a row per run from its summary. Curves: a row per history row that holds the loss.
    """
    wanted = set(names)
    seen: set[str] = set()
    rows: list[dict] = []
    skipped: list[str] = []
    for run, history in runs:
        name = spec_name(run)
        label = getattr(run, "id", None) or getattr(run, "name", "?")
        if name not in wanted:
            skipped.append(f"{label}: {name!r} is not a run of the spec")
            continue
        if name in seen:
            skipped.append(f"{label}: an older run of {name}")
            continue
        summary = dict(getattr(run, "summary_metrics", None) or {})
        key = loss_key(summary, metric, curves)
        if key is None:
            have = ", ".join(sorted(k for k in summary if "loss" in k)[:8]) or "none"
            skipped.append(f"{label} ({name}): no {metric or 'eval loss'} in its summary (loss keys: {have}); "
                           "name the key with --metric KEY")
            continue
        seen.add(name)
        if curves:
            rows += _curve_rows(name, key, history)
        else:
            row = {"name": name, "loss": summary[key]}
            for col, keys in (("tokens", TOKEN_KEYS), ("flops", FLOPS_KEYS), ("params", PARAMS_KEYS)):
                v = next((summary[k] for k in keys if isinstance(summary.get(k), int | float)), None)
                if v is not None:
                    row[col] = v
            rows.append(row)
    if not rows:
        detail = "; ".join(skipped[:3]) or "the project has no runs"
        raise InputError(f"{source}: no run of {len(wanted)} spec runs ({', '.join(sorted(wanted))}) found "
                           f"({detail}); check the project, or name the loss with --metric KEY")
    frame = pd.DataFrame(rows)
    return frame[[c for c in ("name", "step", "loss", "tokens", "params", "flops") if c in frame.columns]], skipped


def _curve_rows(name: str, key: str, history: list[dict]) -> list[dict]:
    out = []
    for h in history:
        if not isinstance(h.get(key), int | float) or not isinstance(h.get(STEP_KEY), int | float):
            continue
        row = {"name": name, "step": int(h[STEP_KEY]), "loss": h[key]}
        for col, keys in (("tokens", TOKEN_KEYS), ("flops", FLOPS_KEYS)):
            v = next((h[k] for k in keys if isinstance(h.get(k), int | float)), None)
            if v is not None:
                row[col] = v
        out.append(row)
    return out


def read_project(project_path: str, spec, **kwargs) -> tuple[pd.DataFrame, list[str]]:
    """The spec's runs from a W&B project, checked as a RESULTS.csv is: (frame, skipped runs)."""
    raw, skipped = fetch(project_path, [r.name for r in spec.all_runs()], **kwargs)
    return check_results(raw, f"--from-wandb {project_path}", spec), skipped


def fetch(project_path: str, names: Iterable[str], *, metric: str | None = None, curves: bool = False,
          timeout_s: float = DEFAULT_TIMEOUT_S) -> tuple[pd.DataFrame, list[str]]:
    """The project's runs through wandb.Api, mapped by `rows_from_runs`. Every failure (no login,
    no wandb, an unreachable server, a missing project) is one InputError line; W&B's own files
    go to a temporary folder that is removed, so nothing is left in the root or the home."""
    entity, project = parse_project(project_path)
    source = f"--from-wandb {entity}/{project}"
    from ladder.wandb.env import has_api_key

    if not has_api_key():
        raise InputError(f"{source}: no W&B API key; run `wandb login` or set WANDB_API_KEY, or export the "
                           "project's runs to CSV and pass RESULTS.csv instead")
    try:
        import wandb
    except ImportError as exc:
        raise InputError(f"{source}: wandb is not installed; pip install 'scaling-ladder[train]'") from exc
    wanted = set(names)
    with scratch_dirs():
        try:
            api = wandb.Api(timeout=timeout_s)
            pairs = []
            for run in api.runs(f"{entity}/{project}", order="-created_at", per_page=100):
                history: list[dict] = []
                if curves and spec_name(run) in wanted:
                    key = loss_key(run.summary_metrics, metric, curves)
                    if key is not None:
                        extra = [k for k in (*TOKEN_KEYS, *FLOPS_KEYS) if k in run.summary_metrics][:2]
                        history = _merged_history(run, [key, *extra])
                pairs.append((run, history))
        except Exception as exc:  # network, auth, a missing project: W&B raises many kinds; one line each
            first = (str(exc).strip().splitlines() or [type(exc).__name__])[0][:200]
            raise InputError(f"{source}: W&B API failed ({type(exc).__name__}: {first}); check the project, "
                               "your login and WANDB_BASE_URL, or import an exported CSV") from None
        finally:
            teardown_bounded(wandb, TEARDOWN_S)
    return rows_from_runs(pairs, wanted, metric=metric, curves=curves, source=source)


def _merged_history(run, keys: list[str]) -> list[dict]:
    # scan_history(keys=...) keeps only rows holding every key asked for: one scan per key, joined on the step
    by_step: dict[float, dict] = {}
    for key in keys:
        for row in run.scan_history(keys=[STEP_KEY, key], page_size=1000):
            if isinstance(row.get(STEP_KEY), int | float):
                by_step.setdefault(row[STEP_KEY], {STEP_KEY: row[STEP_KEY]})[key] = row.get(key)
    return [by_step[s] for s in sorted(by_step)]
