"""Cached, tolerant readers of a ladder's files, shared by the dashboard and the report.

Any file may be missing, half-written or garbled (a run is writing it right now): nothing here
raises on bad content; a missing piece is an empty table. JSONL files are read incrementally (only
the bytes appended since the last read are parsed) with the rule of :func:`ladder.outputs.layout.iter_jsonl`:
a line that does not parse is skipped, and a last line without its newline is parsed but not
consumed, so a half-written row shows up once its writer finishes it.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import threading
from array import array
from pathlib import Path
from typing import Any

from ladder.outputs import layout

NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+=-]{0,127}$")


def safe_name(name: str) -> bool:
    """A ladder, step, table or imported-run name: no separators, no dot-dot, nothing hidden."""
    return bool(NAME_RE.match(name or "")) and ".." not in name


def finite(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def json_safe(x: Any) -> Any:
    """``x`` with every NaN or infinity, however deep in dicts and lists, as None (strict JSON allows neither)."""
    if isinstance(x, dict):
        return {k: json_safe(v) for k, v in x.items()}
    if isinstance(x, list | tuple):
        return [json_safe(v) for v in x]
    return finite(x)


def num(x: Any) -> float | None:
    """x as a finite float, else None (bools, strings that are not numbers, NaN, inf)."""
    if isinstance(x, bool) or x is None:
        return None
    if isinstance(x, int | float):
        v = float(x)
        return v if math.isfinite(v) else None
    if isinstance(x, str):
        try:
            v = float(x)
        except ValueError:
            return None
        return v if math.isfinite(v) else None
    return None


def scalars(d: Any) -> dict:
    """The scalar (JSON-safe) entries of a dict: numbers, strings, bools, None."""
    if not isinstance(d, dict):
        return {}
    out = {}
    for k, v in d.items():
        if isinstance(v, bool) or v is None or isinstance(v, str):
            out[str(k)] = v
        elif isinstance(v, int | float):
            out[str(k)] = finite(v)
    return out


def natural_key(name: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


def to_csv(rows: list[dict]) -> str:
    """Rows as CSV text; columns in first-seen order; None is an empty cell."""
    cols: dict[str, None] = {}
    for r in rows:
        for k in r:
            cols.setdefault(k, None)
    buf = io.StringIO()
    w = csv.writer(buf, lineterminator="\n")
    w.writerow(list(cols))
    for r in rows:
        w.writerow(["" if r.get(c) is None else (json.dumps(r[c]) if isinstance(r[c], dict | list) else r[c])
                    for c in cols])
    return buf.getvalue()



class JsonlTable:
    """The rows of a JSONL file, stored by column: numbers in ``array('d')`` (NaN where a row lacks the
    key), anything else sparse by row. About 8 bytes per number instead of a dict per row, so a
    long run's metrics (a million rows) stay small in a long-lived server. Iterating yields dicts."""

    __slots__ = ("n", "cols", "other", "lock", "ident", "offset")

    def __init__(self):
        self.n = 0
        self.cols: dict[str, array] = {}
        self.other: dict[int, dict] = {}
        self.lock = threading.Lock()
        self.ident = None
        self.offset = 0

    def append(self, row: dict) -> None:
        n = self.n
        for k, v in row.items():
            if isinstance(v, int | float) and not isinstance(v, bool):
                col = self.cols.get(k)
                if col is None:
                    col = self.cols[k] = array("d", bytes(8 * n)) if n else array("d")
                    if n:
                        col[:] = array("d", [math.nan]) * n
                col.append(float(v))
            else:
                self.other.setdefault(n, {})[k] = v
        self.n = n + 1
        for col in self.cols.values():
            if len(col) < self.n:
                col.append(math.nan)

    def snapshot(self, pending: dict | None = None) -> JsonlTable:
        """A consistent view (columns sliced to n rows), plus a not-yet-terminated last row."""
        t = JsonlTable()
        t.n, t.cols, t.other = self.n, dict(self.cols), self.other
        if pending is not None:
            t.cols = {k: v[: self.n] for k, v in self.cols.items()}
            t.other = dict(self.other)
            t.append(pending)
        return t

    def __len__(self) -> int:
        return self.n

    def keys(self) -> list[str]:
        ks = dict.fromkeys(self.cols)
        for extra in self.other.values():
            ks.update(dict.fromkeys(extra))
        return list(ks)

    def column(self, key: str):
        """The column as a float numpy array (a copy: the live array may grow meanwhile), or None."""
        import numpy as np

        col = self.cols.get(key)
        return None if col is None else np.frombuffer(col[: self.n], dtype=float)

    def value(self, key: str, i: int):
        col = self.cols.get(key)
        if col is not None:
            v = col[i]
            if v == v:
                return int(v) if v.is_integer() and abs(v) < 2**53 else v
        return self.other.get(i, {}).get(key)

    def row(self, i: int) -> dict:
        out = {}
        for k, col in self.cols.items():
            v = col[i]
            if v == v:
                out[k] = int(v) if v.is_integer() and abs(v) < 2**53 else v
        out.update(self.other.get(i, {}))
        return out

    def __iter__(self):
        return (self.row(i) for i in range(self.n))

    def __getitem__(self, i: int) -> dict:
        if i < 0:
            i += self.n
        if not 0 <= i < self.n:
            raise IndexError(i)
        return self.row(i)


class FileCache:
    """Parsed JSON/JSONL/CSV files keyed by path, refreshed when the file changes."""

    def __init__(self):
        self._lock = threading.Lock()
        self._tails: dict[str, JsonlTable] = {}
        self._whole: dict[str, tuple[tuple, Any]] = {}

    def jsonl(self, path: Path) -> JsonlTable:
        """All complete rows of a JSONL file (columnar); appended rows are parsed incrementally."""
        key = str(path)
        try:
            st = os.stat(path)
        except OSError:
            return JsonlTable()
        with self._lock:
            table = self._tails.get(key)
            if table is None:
                table = self._tails[key] = JsonlTable()
        with table.lock:
            ident = (st.st_ino, st.st_dev)
            if table.ident != ident or st.st_size < table.offset:  # replaced or truncated: start over
                table.ident, table.offset, table.n, table.cols, table.other = ident, 0, 0, {}, {}
            pending = None
            if st.st_size > table.offset:
                try:
                    with open(path, "rb") as fh:
                        fh.seek(table.offset)
                        chunk = fh.read(st.st_size - table.offset)
                except OSError:
                    return table.snapshot()
                end = chunk.rfind(b"\n")
                complete, rest = (chunk[: end + 1], chunk[end + 1 :]) if end >= 0 else (b"", chunk)
                for line in complete.splitlines():
                    row = _parse_line(line)
                    if row is not None:
                        table.append(row)
                table.offset += len(complete)
                pending = _parse_line(rest)  # a last line without newline: shown, not consumed
            return table.snapshot(pending)

    def _whole_file(self, path: Path, parse):
        key = str(path)
        try:
            st = os.stat(path)
        except OSError:
            return None
        sig = (st.st_ino, st.st_mtime_ns, st.st_size)
        with self._lock:
            hit = self._whole.get(key)
            if hit is not None and hit[0] == sig:
                return hit[1]
        value = parse(path)
        with self._lock:
            self._whole[key] = (sig, value)
        return value

    def json(self, path: Path, default: Any = None) -> Any:
        value = self._whole_file(path, lambda p: layout.read_json(p, None))
        return default if value is None else value

    def csv(self, path: Path) -> list[dict]:
        value = self._whole_file(path, read_csv)
        return value or []


def _parse_line(line: bytes) -> dict | None:
    line = line.strip()
    if not line:
        return None
    try:
        row = json.loads(line.decode("utf-8", errors="replace"))
    except (json.JSONDecodeError, ValueError):
        return None
    return row if isinstance(row, dict) else None


def read_csv(path: Path) -> list[dict]:
    """Rows of a CSV as dicts, numbers parsed; a truncated last row (fewer fields) is dropped."""
    try:
        text = Path(path).read_text(encoding="utf-8", errors="replace")
    except OSError:
        return []
    reader = csv.reader(io.StringIO(text))
    try:
        header = next(reader)
    except (StopIteration, csv.Error):
        return []
    rows = []
    try:
        for rec in reader:
            if len(rec) != len(header):
                continue
            row = {}
            for k, v in zip(header, rec, strict=True):
                n = num(v) if v != "" else None
                row[k] = n if (n is not None or v == "" or v.lower() in ("nan", "inf", "-inf")) else v
            rows.append(row)
    except csv.Error:
        pass
    return rows


# ------------------------------------------------------------------------------------------
# The ladder root.
