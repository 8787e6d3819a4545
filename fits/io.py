"""Reading and validating the CSV/JSON inputs of the fits, and writing outputs atomically.

Every check raises InputError with one line that names the file, the column or field, and the
fix, so a command line can print it as is. Outputs are written to a temporary file in the same
directory and renamed into place, so a failure never leaves a half-written file.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

from fits.errors import InputError
from fits.result import FitResult


def read_table(path: str | os.PathLike, what: str = "CSV") -> pd.DataFrame:
    p = Path(path)
    if not p.exists():
        raise InputError(f"{p}: no such file; give the path of an existing {what}")
    if p.is_dir():
        raise InputError(f"{p}: is a directory; give the path of a {what} file")
    try:
        # As text, so an error can quote a cell as the user wrote it (an empty cell, "nan", "1e9x");
        # the numeric columns are converted where they are checked (positive_column).
        df = pd.read_csv(p, dtype=str, keep_default_na=False)
    except (pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError, OSError) as exc:
        first = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"{p}: cannot be read as {what} ({first}); write it as comma-separated "
                         "text with a header row") from exc
    df.columns = [str(c).strip() for c in df.columns]
    return df


def require_columns(df: pd.DataFrame, columns, path, hint: str = "") -> None:
    for col in columns:
        if col not in df.columns:
            have = ", ".join(map(str, df.columns)) or "none"
            raise InputError(f"{path}: missing column '{col}' (columns present: {have}); "
                             f"add a '{col}' column{hint}")


def positive_column(df: pd.DataFrame, col: str, path, *, allow_zero: bool = False, row_offset: int = 2) -> np.ndarray:
    """The column as float64, every value finite and positive (or >= 0), else InputError naming the
    row: the file's line number for a CSV (row_offset 2: the header is line 1), the index for a table."""
    v = pd.to_numeric(df[col], errors="coerce").to_numpy(dtype=np.float64)
    bad = ~np.isfinite(v) | ((v < 0) if allow_zero else (v <= 0))
    if bad.any():
        i = int(np.flatnonzero(bad)[0])
        kind = "non-negative" if allow_zero else "positive"
        raise InputError(f"{path}: column '{col}' row {i + row_offset} is {as_written(df[col].iloc[i])}; "
                         f"every value must be a finite {kind} number")
    return v


def as_written(value) -> str:
    """A cell as its user wrote it: the CSV's own text, or a table's value without numpy's repr."""
    if isinstance(value, str):
        return "empty" if not value.strip() else repr(value.strip())
    if value is None or (isinstance(value, float | np.floating) and np.isnan(value)):
        return "NaN"
    if isinstance(value, np.generic):
        value = value.item()
    return repr(value)


def read_runs(path, min_points: int = 1) -> pd.DataFrame:
    """RUNS.csv: params, tokens, loss (optional flops, else 6 * params * tokens; optional
    active_params, which replaces params as N for mixture-of-experts runs; optional experts)."""
    df = read_table(path, "RUNS.csv")
    require_columns(df, ("params", "tokens", "loss"), path)
    out = pd.DataFrame({c: positive_column(df, c, path) for c in ("params", "tokens", "loss")})
    if "active_params" in df.columns:
        out["active_params"] = positive_column(df, "active_params", path)
    if "experts" in df.columns:
        out["experts"] = positive_column(df, "experts", path)
    if "flops" in df.columns:
        out["flops"] = positive_column(df, "flops", path)
    else:
        out["flops"] = 6.0 * out["params"].to_numpy() * out["tokens"].to_numpy()
    if len(out) < min_points:
        raise InputError(f"{path}: {len(out)} run(s) but this law needs at least {min_points}; "
                         "add more runs to the CSV")
    return out


def read_points(path) -> pd.DataFrame:
    """POINTS.csv for predictions: params and tokens (positive)."""
    df = read_table(path, "POINTS.csv")
    require_columns(df, ("params", "tokens"), path)
    if len(df) == 0:
        raise InputError(f"{path}: no rows; add at least one row of params,tokens")
    out = df.copy()
    for c in ("params", "tokens", "flops"):
        if c in df.columns:
            out[c] = positive_column(df, c, path)
    return out


def read_curve(path, *, need_loss: bool = True, min_points: int = 1) -> pd.DataFrame:
    """CURVE.csv (step, lr, loss) or SCHEDULE.csv (step, lr): steps strictly increasing."""
    what = "CURVE.csv" if need_loss else "SCHEDULE.csv"
    df = read_table(path, what)
    cols = ("step", "lr", "loss") if need_loss else ("step", "lr")
    require_columns(df, cols, path)
    out = pd.DataFrame({"step": positive_column(df, "step", path, allow_zero=True),
                        "lr": positive_column(df, "lr", path)})
    if need_loss:
        out["loss"] = positive_column(df, "loss", path)
    if len(out) < min_points:
        raise InputError(f"{path}: {len(out)} row(s) but at least {min_points} are needed; "
                         "log the loss at more steps")
    steps = out["step"].to_numpy()
    if np.any(steps != np.round(steps)):
        raise InputError(f"{path}: column 'step' must hold whole step numbers")
    if np.any(np.diff(steps) <= 0):
        i = int(np.flatnonzero(np.diff(steps) <= 0)[0])
        raise InputError(f"{path}: column 'step' must increase strictly (row {i + 3} repeats or "
                         "goes back); sort the rows and drop duplicates")
    return out


def read_fit(path) -> FitResult:
    p = Path(path)
    if not p.is_file():
        raise InputError(f"{p}: no such file; give a FIT.json written by `ladder fit` or `ladder curve-fit`")
    try:
        return FitResult.from_json(p.read_text())
    except (ValueError, TypeError, KeyError) as exc:
        raise InputError(f"{p}: not a FIT.json ({str(exc).splitlines()[0] if str(exc) else type(exc).__name__}); "
                         "write it with `ladder fit --out` or `ladder curve-fit --out`") from exc


def write_text_atomic(path, text: str) -> None:
    p = Path(path)
    p.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(dir=p.parent, prefix=f".{p.name}.", suffix=".tmp")
    try:
        with os.fdopen(fd, "w") as fh:
            fh.write(text)
        os.replace(tmp, p)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def write_csv_atomic(path, df: pd.DataFrame) -> None:
    write_text_atomic(path, df.to_csv(index=False))
