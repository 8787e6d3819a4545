"""`ladder import-results SPEC DIR`: OLMo's own exported evaluations (allenai/OLMo-ladder), a CSV per
run named `<run>.csv`, read with their column names: `_step`, `throughput/total_tokens` or
`batch_size_in_tokens`, C4's loss (the curve's loss) and the task metrics (fits.olmo_tasks), which
become the curve's task_bpb/<task> and task_acc/<task> columns.

Only files named after a run of the spec are read (the others are listed as skipped), and every one
must carry every metric the spec forecasts: a missing column is one line naming the file and the
column, and nothing is written.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from fits.errors import InputError
from fits.olmo_tasks import OLMO_TASKS, olmo_metrics
from ladder.spec import LadderSpec

STEP, TOKENS, BATCH = "_step", "throughput/total_tokens", "batch_size_in_tokens"


def read_olmo_dir(directory: str, spec: LadderSpec) -> tuple[pd.DataFrame, list[str]]:
    """Curve rows (name, step, tokens, loss, task columns) for every run of the spec with a file in
    `directory`, and the files skipped (not a run of the spec)."""
    root = Path(directory)
    files = {p.stem: p for p in sorted(root.glob("*.csv"))}
    names = [r.name for r in spec.all_runs()]
    found = [n for n in names if n in files]
    if not found:
        raise InputError(f"{directory}: no file named after a run of {spec.name} (<run>.csv for "
                         f"{', '.join(names[:4])}{', ...' if len(names) > 4 else ''}); point at OLMo's exported CSVs")
    tasks = tuple(spec.fit.forecast_tasks) or tuple(OLMO_TASKS)
    unknown = [t for t in tasks if t not in OLMO_TASKS]
    if unknown:
        raise InputError(f"fit.forecast_tasks: {unknown[0]!r} is not one of OLMo's exported tasks "
                         f"({', '.join(OLMO_TASKS)}); list only those to import from {directory}")
    frames = [_run_rows(files[n], n, tasks) for n in found]
    others = [p.name for s, p in files.items() if s not in found]
    skipped = [f"{len(others)} file(s) not named after a run of {spec.name}: {', '.join(others)}"] if others else []
    return pd.concat(frames, ignore_index=True), skipped


def _run_rows(path: Path, name: str, tasks) -> pd.DataFrame:
    try:
        raw = pd.read_csv(path)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise InputError(f"{path}: cannot read a CSV ({type(exc).__name__}); give OLMo's exported evaluations") from None
    if TOKENS not in raw.columns and not {STEP, BATCH} <= set(raw.columns):
        raise InputError(f"{path}: no column {TOKENS!r}, nor {STEP!r} and {BATCH!r} to count tokens; "
                         "export the run's token counts with its evaluations")
    metrics = olmo_metrics(raw, str(path), tasks)
    if TOKENS in raw.columns:
        tokens = raw[TOKENS].astype(float)
    else:
        tokens = raw[STEP].astype(float) * raw[BATCH].astype(float)
    if STEP in raw.columns:
        step = raw[STEP].astype(int)
    elif BATCH in raw.columns:  # an anneal's single row: its step from its tokens
        step = np.round(tokens / raw[BATCH].astype(float)).astype(int)
    else:
        raise InputError(f"{path}: no column {STEP!r} nor {BATCH!r}; export the run's steps with its evaluations")
    out = pd.DataFrame({"name": name, "step": step, "tokens": tokens})
    out = pd.concat([out, metrics.drop(columns="loss")], axis=1)
    out.insert(1, "loss", metrics["loss"])
    out = out[np.isfinite(out["loss"].to_numpy(float))]
    return out.drop_duplicates("step", keep="last").sort_values("step", kind="stable").reset_index(drop=True)
