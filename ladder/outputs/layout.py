"""Where things live in a ladder's root, and robust readers for them.

    <root>/<ladder>/.index/<step>.json     the step's current output dir (written by the executor)
    <root>/<ladder>/<step>-<hash>/
        .status          RUNNING | SUCCESS | FAILED | DEP_FAILED | BLOCKED (+ lease)
        step.json        provenance
        progress.json    latest progress (step, total_steps, loss, tokens_per_s, eta_s)
        result.json      the step's summary
      training steps (rungs, hero):
        metrics.jsonl    one row per logged train step
        eval.jsonl       one row per eval (eval_loss, eval_loss/<domain>, bpb ...)
        events.jsonl     spikes and divergence
        checkpoints/     orbax (a foreign trainer's own format)
        run.json         a foreign trainer's input: the resolved run (ladder.trainers.contract)
        final_eval.json  a foreign trainer's final eval, when its sample differs from the other evals'
        trainer.log      a command trainer's standard output and error
      fit:      fit.json (laws, intervals, backtest; "progress": the curve laws on imported eval curves),
                runs.csv (the points fitted), curves.csv, progress_points.csv, hero_progress.csv,
                baseline_marin.csv (Marin's per-5% table, when the baseline applies)
      predict:  prediction.json (+ baselines.marin), hero_curve.csv (step, tokens, flops, loss, lower, upper;
                rungs only), baseline_marin.csv (step, tokens, frac, loss), targets.csv (extra named targets)
      gate:     gate.json (passed, reasons, overridden)
      hero:     + forecasts.jsonl (one snapshot per refit: at_step, predicted_final, lower, upper)
                + forecasts/<at_step>.csv (the refreshed predicted curve, eval loss)
      isoflop:  isoflop.json (each budget's vertex, the frontier's laws), isoflop.csv (one row a sweep run)
      imported: result.json (+ eval.jsonl for a curve; "partial" when it stopped short)
      report:   report.json, report.html, *.png, curve.csv
    <root>/<ladder>/compare/<other>.json   `ladder compare <other> <ladder>`'s last result (this ladder as B):
                                           the dashboard's Compare page

Everything is JSON, JSONL or CSV so a user opens it with pandas. Readers here tolerate a
half-written last line (a run still writing), which is skipped, never guessed at.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

STATUS = ".status"
STEP_JSON = "step.json"
PROGRESS = "progress.json"
RESULT = "result.json"
METRICS = "metrics.jsonl"
EVAL = "eval.jsonl"
EVENTS = "events.jsonl"
CHECKPOINTS = "checkpoints"
RUN_CONFIG = "run.json"  # the trainer contract's input (docs/trainers.md)
FINAL_EVAL = "final_eval.json"
TRAINER_LOG = "trainer.log"
FIT = "fit.json"
RUNS_CSV = "runs.csv"  # the fit's points
CURVES_CSV = "curves.csv"
PREDICTION = "prediction.json"
HERO_CURVE = "hero_curve.csv"
TARGETS_CSV = "targets.csv"
GATE = "gate.json"
FORECASTS = "forecasts.jsonl"
FORECAST_DIR = "forecasts"
REPORT = "report.json"
COMPARE_DIR = "compare"  # under a ladder's folder: its comparisons against other ladders (it is B), one file each
REPORT_HTML = "report.html"
ISOFLOP_JSON = "isoflop.json"
ISOFLOP_CSV = "isoflop.csv"


class CorruptLineWarning(UserWarning):
    """A JSONL line that is not the file's last could not be parsed: the file is damaged."""


def iter_jsonl(path: str | Path) -> Iterator[dict[str, Any]]:
    """Rows of a JSONL file.

    A truncated last line (a writer mid-append) is skipped quietly; a garbled line anywhere else
    means the file was damaged, and is reported with a CorruptLineWarning naming file and line.
    """
    import warnings

    path = Path(path)
    if not path.exists():
        return
    pending: tuple[int, str] | None = None  # an unparsable line, reported once a later line shows it is not the tail
    with path.open("r", encoding="utf-8", errors="replace") as fh:
        for lineno, line in enumerate(fh, 1):
            line = line.strip()
            if not line:
                continue
            if pending is not None:
                warnings.warn(f"{path}:{pending[0]}: corrupt line skipped ({pending[1][:60]!r})", CorruptLineWarning,
                              stacklevel=2)
                pending = None
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                pending = (lineno, line)
                continue
            if isinstance(row, dict):
                yield row


def read_jsonl(path: str | Path):
    """A pandas DataFrame of a JSONL file (empty when the file is missing)."""
    import pandas as pd

    return pd.DataFrame(list(iter_jsonl(path)))


def read_json(path: str | Path, default: Any = None) -> Any:
    """A JSON file's content, or ``default`` when it is missing or half-written."""
    path = Path(path)
    try:
        return json.loads(path.read_text())
    except (FileNotFoundError, json.JSONDecodeError, UnicodeDecodeError):
        return default


def write_json_atomic(path: str | Path, obj: Any) -> None:
    """Write JSON through a temporary file and a rename, so readers never see half a file."""
    import os
    import tempfile

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    try:
        with os.fdopen(fd, "w") as fh:
            json.dump(obj, fh, indent=2, default=_json_default)
            fh.flush()
            os.fsync(fh.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_csv_atomic(path: str | Path, frame) -> None:
    import os
    import tempfile

    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", dir=path.parent)
    os.close(fd)
    try:
        frame.to_csv(tmp, index=False)
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def _json_default(obj: Any) -> Any:
    import numpy as np

    if isinstance(obj, np.generic):
        return obj.item()
    if isinstance(obj, np.ndarray):
        return obj.tolist()
    if isinstance(obj, Path):
        return str(obj)
    raise TypeError(f"not JSON serialisable: {type(obj).__name__}")
