"""Read a ladder root into the tables the dashboard shows (and serves as CSV).

Everything here is read-only and tolerant: any file may be missing, half-written or garbled (a run
is writing it right now), and a ladder mid-run has only some of its steps. Nothing raises on bad
content; a missing piece is an empty table.

Layout (see ladder.layout): ``<root>/<ladder>/.index/<step>.json`` points at the step's current
directory ``<root>/<ladder>/<step>-<hash>/``; without an index, the newest ``<step>-*`` directory
by modification time is taken. Paths are never taken from a request: a request names a ladder and
a view or table, both checked against what exists under the root.

JSONL files are read incrementally (only the bytes appended since the last read are parsed) with
the same rule as :func:`ladder.layout.iter_jsonl`: a line that does not parse is skipped, and a
last line without its newline is parsed but not consumed, so a half-written row shows up once its
writer finishes it.
"""

from __future__ import annotations

import csv
import io
import json
import math
import os
import re
import threading
import time
from array import array
from pathlib import Path
from typing import Any

from ladder import layout

ANALYSIS_STEPS = ("fit", "predict", "gate", "hero", "report")
STATUSES = ("RUNNING", "SUCCESS", "FAILED", "DEP_FAILED", "BLOCKED", "PENDING")
NAME_RE = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.+=-]{0,127}$")
MAX_POINTS = 2000  # per chart series; CSV downloads are never thinned
STALE_HEARTBEAT_S = 180.0
LAW_CURVE_CSV = "law_curve.csv"  # fit: the law over compute with its band (flops, loss, lower, upper)
MOE_KEYS = ("expert_load_max_over_mean", "drop_rate", "routing_entropy", "grad_norm")
SKIP_DIRS = {"imported", "wandb", "checkpoints"}


def safe_name(name: str) -> bool:
    """A ladder, step, table or imported-run name: no separators, no dot-dot, nothing hidden."""
    return bool(NAME_RE.match(name or "")) and ".." not in name


def _finite(x: Any) -> Any:
    if isinstance(x, float) and not math.isfinite(x):
        return None
    return x


def _num(x: Any) -> float | None:
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


def _natural_key(name: str):
    return [int(t) if t.isdigit() else t for t in re.split(r"(\d+)", name)]


# ------------------------------------------------------------------------------------------
# Cached file readers (shared by all request threads).


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
        value = self._whole_file(path, _read_csv)
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


def _read_csv(path: Path) -> list[dict]:
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
                n = _num(v) if v != "" else None
                row[k] = n if (n is not None or v == "" or v.lower() in ("nan", "inf", "-inf")) else v
            rows.append(row)
    except csv.Error:
        pass
    return rows


# ------------------------------------------------------------------------------------------
# The ladder root.


class Root:
    """A ladder root: lists ladders and builds each dashboard view from their files."""

    def __init__(self, path: str | Path, max_points: int = MAX_POINTS):
        self.path = Path(path).expanduser().resolve()
        self.max_points = max_points
        self.files = FileCache()

    # -- discovery ---------------------------------------------------------------------------

    def ladders(self) -> list[str]:
        try:
            entries = sorted(os.scandir(self.path), key=lambda e: e.name)
        except OSError:
            return []
        out = []
        for e in entries:
            if not e.is_dir(follow_symlinks=False) or not safe_name(e.name) or e.name in SKIP_DIRS:
                continue
            if self.step_dirs(e.name) or os.path.isdir(os.path.join(e.path, "imported")):
                out.append(e.name)
        return out

    def ladder_dir(self, ladder: str) -> Path | None:
        if not safe_name(ladder):
            return None
        d = self.path / ladder
        if d.is_symlink() or not d.is_dir():
            return None
        return d

    def _inside(self, path: Path, ladder_dir: Path) -> bool:
        try:
            return path.resolve().is_relative_to(ladder_dir.resolve())
        except OSError:
            return False

    def step_dirs(self, ladder: str) -> dict[str, Path]:
        """{step name: its current directory}, from .index, else the newest <step>-* directory."""
        ld = self.ladder_dir(ladder)
        if ld is None:
            return {}
        out: dict[str, Path] = {}
        index = ld / ".index"
        if index.is_dir():
            for f in sorted(index.glob("*.json")):
                step = f.stem
                if not safe_name(step):
                    continue
                target = _pointer(self.files.json(f), ld)
                if target is not None and target.is_dir() and self._inside(target, ld):
                    out[step] = target
        newest: dict[str, tuple[float, Path]] = {}
        try:
            entries = list(os.scandir(ld))
        except OSError:
            entries = []
        for e in entries:
            if e.name.startswith(".") or e.name in SKIP_DIRS or "-" not in e.name:
                continue
            if not e.is_dir(follow_symlinks=False):
                continue
            step = e.name.rsplit("-", 1)[0]
            if not safe_name(step) or step in out:
                continue
            try:
                mtime = max(e.stat().st_mtime, _mtime(Path(e.path) / layout.STATUS))
            except OSError:
                continue
            if step not in newest or mtime > newest[step][0]:
                newest[step] = (mtime, Path(e.path))
        for step, (_, p) in newest.items():
            out[step] = p
        return dict(sorted(out.items(), key=lambda kv: _step_order(kv[0])))

    def training_steps(self, ladder: str) -> dict[str, Path]:
        return {s: d for s, d in self.step_dirs(ladder).items() if _is_training(s, d)}

    def imported(self, ladder: str) -> dict[str, Path]:
        ld = self.ladder_dir(ladder)
        if ld is None:
            return {}
        base = ld / "imported"
        out = {}
        if base.is_dir():
            for d in sorted(base.iterdir()):
                if d.is_dir() and not d.is_symlink() and safe_name(d.name):
                    out[d.name] = d
        return out

    # -- change detection ----------------------------------------------------------------------

    WATCHED = (layout.STATUS, layout.PROGRESS, layout.RESULT, layout.STEP_JSON, layout.METRICS, layout.EVAL,
               layout.EVENTS, layout.FIT, layout.RUNS_CSV, LAW_CURVE_CSV, layout.CURVES_CSV, layout.PREDICTION,
               layout.HERO_CURVE, layout.TARGETS_CSV, layout.GATE, layout.FORECASTS, layout.FORECAST_DIR,
               layout.REPORT, "meta.json")

    def signature(self, ladder: str | None = None) -> tuple:
        """A cheap fingerprint (stat of every file a view reads) that changes when any of them does."""
        if ladder is None:
            sig: list = [_stat(self.path)]
            for name in self.ladders():
                sig.append((name, self.signature(name)))
            return tuple(sig)
        ld = self.ladder_dir(ladder)
        if ld is None:
            return ()
        sig = [_stat(ld), _stat(ld / ".index")]
        for step, d in self.step_dirs(ladder).items():
            sig.append((step, str(d), *(_stat(d / f) for f in self.WATCHED)))
        for name, d in self.imported(ladder).items():
            sig.append((name, _stat(d / layout.METRICS), _stat(d / "meta.json")))
        return tuple(sig)

    # -- views -------------------------------------------------------------------------------

    def summary(self) -> dict:
        ladders = []
        for name in self.ladders():
            steps = self.overview(name)["steps"]
            counts: dict[str, int] = {}
            for s in steps:
                counts[s["status"]] = counts.get(s["status"], 0) + 1
            ladders.append({"name": name, "steps": len(steps), "counts": counts})
        return {"root": str(self.path), "ladders": ladders, "time": time.time()}

    def overview(self, ladder: str) -> dict:
        dirs = self.step_dirs(ladder)
        steps = []
        now = time.time()
        for name, d in dirs.items():
            status = self.files.json(d / layout.STATUS, {}) or {}
            if not isinstance(status, dict):
                status = {}
            progress = self.files.json(d / layout.PROGRESS, {}) or {}
            result = self.files.json(d / layout.RESULT, {}) or {}
            state = str(status.get("status") or ("SUCCESS" if result else "RUNNING" if progress else "PENDING"))
            hb = _epoch(status.get("heartbeat"))
            steps.append({
                "name": name,
                "kind": _kind(name, d),
                "status": state,
                "start": status.get("start"),
                "end": status.get("end"),
                "heartbeat": status.get("heartbeat"),
                "stale": bool(state == "RUNNING" and hb is not None and now - hb > STALE_HEARTBEAT_S),
                "progress": _scalars(progress) if isinstance(progress, dict) else {},
                "result": _scalars(result) if isinstance(result, dict) else {},
                "dir": d.name,
                "error": _scalar_str(status.get("error") or status.get("reason")),
            })
        names = [s["name"] for s in steps]
        rungs = [n for n in names if n not in ANALYSIS_STEPS]
        if rungs:  # the analysis chain is always part of a ladder; show what has not started yet
            for a in ANALYSIS_STEPS:
                if a not in names:
                    steps.append({"name": a, "kind": "train" if a == "hero" else "analysis", "status": "PENDING",
                                  "progress": {}, "result": {}, "dir": None, "stale": False})
        edges = self._edges(dirs, [s["name"] for s in steps])
        return {"ladder": ladder, "time": now, "steps": steps, "edges": edges}

    def _edges(self, dirs: dict[str, Path], names: list[str]) -> list[list[str]]:
        present = set(names)
        edges: list[list[str]] = []
        declared = False
        for name, d in dirs.items():
            info = self.files.json(d / layout.STEP_JSON, {}) or {}
            deps = info.get("deps") if isinstance(info, dict) else None
            if deps is None and isinstance(info, dict):
                deps = info.get("dependencies")
            dep_names: list[str] = []
            if isinstance(deps, dict):
                dep_names = list(deps.keys())
            elif isinstance(deps, list):
                for x in deps:
                    if isinstance(x, str):
                        dep_names.append(Path(x).name.rsplit("-", 1)[0] if "/" in x else x)
                    elif isinstance(x, dict) and isinstance(x.get("name"), str):
                        dep_names.append(x["name"])
            if dep_names:
                declared = True
            for dep in dep_names:
                if dep in present and dep != name:
                    edges.append([dep, name])
        if declared:
            # steps not started yet declare nothing: add the canonical edges into them
            have_into = {b for _, b in edges}
            edges += [e for e in _canonical_edges(names) if e[1] not in have_into]
            return edges
        return _canonical_edges(names)

    def rungs(self, ladder: str) -> dict:
        runs = []
        domains: set[str] = set()
        for name, d in self.training_steps(ladder).items():
            metrics = self.files.jsonl(d / layout.METRICS)
            evals = self.files.jsonl(d / layout.EVAL)
            status = self.files.json(d / layout.STATUS, {}) or {}
            result = self.files.json(d / layout.RESULT, {}) or {}
            ev_series = {}
            for key in _keys(evals):
                if key == "eval_loss" or key.startswith("eval_loss/"):
                    ev_series[key] = key
                    if key.startswith("eval_loss/"):
                        domains.add(key.split("/", 1)[1])
            runs.append({
                "name": name,
                "hero": name == "hero",
                "status": (status.get("status") if isinstance(status, dict) else None) or "",
                "result": _scalars(result) if isinstance(result, dict) else {},
                "train": self._columns(metrics, ("step", "tokens", "flops", "loss")),
                "eval": self._columns(evals, ("step", "tokens", "flops", *sorted(ev_series))),
            })
        imported = []
        for name, d in self.imported(ladder).items():
            rows = self.files.jsonl(d / layout.METRICS)
            cols = [k for k in _keys(rows) if k in ("step", "tokens", "flops") or "loss" in k]
            imported.append({"name": name, "meta": _scalars(self.files.json(d / "meta.json", {}) or {}),
                             "train": self._columns(rows, tuple(cols))})
        return {"ladder": ladder, "runs": runs, "domains": sorted(domains), "imported": imported}

    def fit(self, ladder: str) -> dict:
        dirs = self.step_dirs(ladder)
        out: dict[str, Any] = {"ladder": ladder, "runs": [], "law": None, "curve": [], "hero": None,
                               "targets": [], "backtest": [], "params": []}
        fd = dirs.get("fit")
        fitj: dict = {}
        if fd is not None:
            fitj = self.files.json(fd / layout.FIT, {}) or {}
            out["runs"] = self.files.csv(fd / layout.RUNS_CSV)
            if not isinstance(fitj, dict):
                fitj = {}
            law = _find_law(fitj)
            if law is not None:
                out["law"] = {"law": law.get("law"), "params": law.get("params"), "ci": law.get("ci"),
                              "n_points": law.get("n_points"), "objective": law.get("objective")}
                out["params"] = _param_rows(law)
            out["backtest"] = _backtest_rows(fitj)
        pd_ = dirs.get("predict")
        pred = {}
        if pd_ is not None:
            pred = self.files.json(pd_ / layout.PREDICTION, {}) or {}
            if not isinstance(pred, dict):
                pred = {}
            hero_name = hero_prediction(pred).get("name") or "hero"
            out["targets"] = [r for r in self.files.csv(pd_ / layout.TARGETS_CSV)
                              if isinstance(r, dict) and r.get("name") != hero_name]
            curve = self.files.csv(pd_ / layout.HERO_CURVE)
            h = hero_prediction(pred)
            hero_flops = _num(h.get("flops"))
            if hero_flops is None and curve:
                hero_flops = _num(curve[-1].get("flops"))
            pl = _num(h.get("predicted_final_loss"))
            if pl is not None and hero_flops is not None:
                out["hero"] = {"flops": hero_flops, "loss": pl, "lower": _num(h.get("lower")),
                               "upper": _num(h.get("upper")), "level": _num(h.get("level")),
                               "name": h.get("name") or "hero"}
            hero_dir = dirs.get("hero")
            if out["hero"] is not None and hero_dir is not None:
                res = self.files.json(hero_dir / layout.RESULT, {}) or {}
                if isinstance(res, dict) and res.get("status", "SUCCESS") == "SUCCESS":
                    out["hero"]["actual"] = next((_num(res.get(k)) for k in
                                                  ("final_eval_loss", "final_loss", "final_train_loss", "loss")
                                                  if _num(res.get(k)) is not None), None)
        # the backtest's target point: place it at its rung's compute
        by_name = {r.get("name"): r for r in out["runs"] if isinstance(r, dict)}
        for b in out["backtest"]:
            target = by_name.get(b.get("predict") or b.get("name"))
            if target is not None and "flops" not in b:
                b["flops"] = _num(target.get("flops"))
        out["curve"] = self._law_curve(fd, out, fitj)
        out["prediction"] = _scalars(pred)
        return out

    def _law_curve(self, fd: Path | None, view: dict, fitj: dict) -> list[dict]:
        """The fitted law over the compute range, with its band: from curves.csv, else evaluated."""
        if fd is not None:
            for fname in (LAW_CURVE_CSV, layout.CURVES_CSV):
                rows = self.files.csv(fd / fname)
                if rows and "flops" in rows[0] and "loss" in rows[0]:
                    return rows
        law = _find_law(fitj)
        if not law:
            return []
        params = law.get("params") or {}
        E, A, alpha = (_num(params.get(k)) for k in ("E", "A", "alpha"))
        if None in (E, A, alpha) or law.get("law") not in (None, "compute"):
            return []
        xs = [_num(r.get("flops")) for r in view["runs"]]
        xs += [_num(t.get("flops")) for t in view["targets"]]
        if view["hero"]:
            xs.append(view["hero"]["flops"])
        xs = [x for x in xs if x and x > 0]
        if not xs:
            return []
        lo, hi = math.log10(min(xs)) - 0.3, math.log10(max(xs)) + 0.3
        grid = [10 ** (lo + (hi - lo) * i / 80) for i in range(81)]
        samples = law.get("samples") or {}
        sample_sets = []
        if all(isinstance(samples.get(k), list) for k in ("E", "A", "alpha")):
            sample_sets = [(_num(e), _num(a), _num(al)) for e, a, al in
                           zip(samples["E"], samples["A"], samples["alpha"], strict=False)]
            sample_sets = [s for s in sample_sets if None not in s]
        level = _num(fitj.get("level")) or 0.9
        rows = []
        for c in grid:
            row = {"flops": c, "loss": E + A * c ** -alpha}
            if len(sample_sets) >= 5:
                vals = sorted(e + a * c ** -al for e, a, al in sample_sets)
                row["lower"] = _quantile(vals, (1 - level) / 2)
                row["upper"] = _quantile(vals, 1 - (1 - level) / 2)
            rows.append(row)
        return rows

    def hero(self, ladder: str) -> dict:
        dirs = self.step_dirs(ladder)
        out: dict[str, Any] = {"ladder": ladder, "predicted": {}, "actual": {}, "eval": {}, "forecasts": [],
                               "snapshots": [], "exits": [], "prediction": {}, "status": "", "imported": []}
        pd_ = dirs.get("predict")
        predicted = []
        if pd_ is not None:
            predicted = self.files.csv(pd_ / layout.HERO_CURVE)
            pred = self.files.json(pd_ / layout.PREDICTION, {}) or {}
            out["prediction"] = _scalars(hero_prediction(pred))
        out["predicted"] = self._columns(predicted, ("step", "tokens", "flops", "loss", "lower", "upper"))
        hd = dirs.get("hero")
        if hd is not None:
            status = self.files.json(hd / layout.STATUS, {}) or {}
            out["status"] = status.get("status", "") if isinstance(status, dict) else ""
            metrics = self.files.jsonl(hd / layout.METRICS)
            evals = self.files.jsonl(hd / layout.EVAL)
            out["actual"] = self._columns(metrics, ("step", "tokens", "flops", "loss"))
            out["eval"] = self._columns(evals, ("step", "tokens", "flops", "eval_loss"))
            # hero_curve.csv predicts the train loss (the predict step scales the law's final loss by the
            # rungs' train/eval gap), so the train loss is what is judged against its band
            out["exits"] = band_exits(predicted, metrics, "loss")
            forecasts = self.files.jsonl(hd / layout.FORECASTS)
            out["forecasts"] = [_scalars(f) for f in forecasts]
            snaps = []
            fdir = hd / layout.FORECAST_DIR
            if fdir.is_dir():
                files = sorted((p for p in fdir.glob("*.csv") if p.stem.isdigit()), key=lambda p: int(p.stem))
                if len(files) > 12:  # keep the chart readable: 12 evenly spaced, always the latest
                    idx = sorted({round(i * (len(files) - 1) / 11) for i in range(12)})
                    files = [files[i] for i in idx]
                for p in files:
                    rows = self.files.csv(p)
                    snaps.append({"at_step": int(p.stem),
                                  **self._columns(rows, ("step", "tokens", "loss", "lower", "upper"))})
            out["snapshots"] = snaps
        for name, d in self.imported(ladder).items():
            rows = self.files.jsonl(d / layout.METRICS)
            out["imported"].append({"name": name, **self._columns(rows, ("step", "tokens", "loss"))})
        return out

    def moe(self, ladder: str) -> dict:
        runs = []
        for name, d in self.training_steps(ladder).items():
            metrics = self.files.jsonl(d / layout.METRICS)
            keys = _keys(metrics)
            bias = sorted((k for k in keys if k.startswith("router_bias_norm_l")), key=_natural_key)
            health = [k for k in MOE_KEYS if k in keys]
            events = [_scalars(e) for e in self.files.jsonl(d / layout.EVENTS)]
            runs.append({"name": name, "bias_keys": bias, "health_keys": health,
                         "series": self._columns(metrics, ("step", "tokens", *bias, *health, "loss")),
                         "events": events})
        return {"ladder": ladder, "runs": runs}

    # -- tables (CSV downloads) ----------------------------------------------------------------

    def tables(self, ladder: str) -> list[dict]:
        """The downloadable tables of a ladder: name, title, rows (cheap to list, read on demand)."""
        names = [("steps", "steps: status, progress and result of every step")]
        dirs = self.step_dirs(ladder)
        for step, d in dirs.items():
            if _is_training(step, d):
                for kind, fname in (("metrics", layout.METRICS), ("eval", layout.EVAL), ("events", layout.EVENTS)):
                    if (d / fname).exists():
                        names.append((f"{kind}.{step}", f"{step}: {fname}"))
        if "fit" in dirs:
            names += [("runs", "fit: the runs fitted (runs.csv)"), ("fit_params", "fit: law parameters and intervals"),
                      ("backtest", "fit: backtest"), ("law_curve", "fit: the law over compute, with its band")]
        if "predict" in dirs:
            names += [("hero_curve", "predict: the hero's predicted curve and band"),
                      ("targets", "predict: extra targets")]
        if "hero" in dirs:
            names += [("forecasts", "hero: forecast snapshots"), ("band_exits", "hero: points outside the band")]
            fdir = dirs["hero"] / layout.FORECAST_DIR
            if fdir.is_dir():
                for p in sorted((p for p in fdir.glob("*.csv") if p.stem.isdigit()), key=lambda p: int(p.stem)):
                    names.append((f"forecast.{p.stem}", f"hero: forecast made at step {p.stem}"))
        for name in self.imported(ladder):
            names.append((f"imported.{name}", f"imported run {name}"))
        return [{"name": n, "title": t} for n, t in names]

    def table(self, ladder: str, name: str) -> list[dict] | None:
        """Rows of one named table, or None when there is no such table."""
        if not safe_name(name) or self.ladder_dir(ladder) is None:
            return None
        dirs = self.step_dirs(ladder)
        kind, _, arg = name.partition(".")
        if name == "steps":
            rows = []
            for s in self.overview(ladder)["steps"]:
                row = {"step": s["name"], "status": s["status"], "kind": s["kind"], "start": s.get("start"),
                       "end": s.get("end"), "dir": s.get("dir")}
                row.update({f"progress.{k}": v for k, v in s["progress"].items()})
                row.update({f"result.{k}": v for k, v in s["result"].items()})
                rows.append(row)
            return rows
        if kind in ("metrics", "eval", "events") and arg:
            d = dirs.get(arg)
            if d is None:
                return None
            fname = {"metrics": layout.METRICS, "eval": layout.EVAL, "events": layout.EVENTS}[kind]
            return [_scalars(r) for r in self.files.jsonl(d / fname)]
        if name == "runs" and "fit" in dirs:
            return self.files.csv(dirs["fit"] / layout.RUNS_CSV)
        if name in ("fit_params", "backtest", "law_curve"):
            view = self.fit(ladder)
            return {"fit_params": view["params"], "backtest": view["backtest"], "law_curve": view["curve"]}[name]
        if name in ("hero_curve", "targets") and "predict" in dirs:
            fname = layout.HERO_CURVE if name == "hero_curve" else layout.TARGETS_CSV
            return self.files.csv(dirs["predict"] / fname)
        if name == "forecasts" and "hero" in dirs:
            return [_scalars(r) for r in self.files.jsonl(dirs["hero"] / layout.FORECASTS)]
        if name == "band_exits" and "hero" in dirs:
            return self.hero(ladder)["exits"]
        if kind == "forecast" and arg.isdigit() and "hero" in dirs:
            p = dirs["hero"] / layout.FORECAST_DIR / f"{arg}.csv"
            return self.files.csv(p) if p.is_file() else None
        if kind == "imported" and arg:
            d = self.imported(ladder).get(arg)
            return None if d is None else [_scalars(r) for r in self.files.jsonl(d / layout.METRICS)]
        return None

    # -- helpers -----------------------------------------------------------------------------

    def _columns(self, rows, keys) -> dict[str, list]:
        """Column arrays of ``rows`` (a JsonlTable or a list of dicts) for ``keys``, thinned to at
        most max_points rows, always keeping the last; non-numbers and NaN are None."""
        n = len(rows)
        idx = list(range(n))
        if n > self.max_points:
            stride = math.ceil(n / self.max_points)
            idx = idx[::stride] + ([n - 1] if (n - 1) % stride else [])
        out: dict[str, list] = {}
        if isinstance(rows, JsonlTable):
            for k in keys:
                col = rows.cols.get(k)
                if col is None:
                    continue
                vals = [col[i] for i in idx]
                vals = [None if v != v or v in (math.inf, -math.inf) else v for v in vals]
                if any(v is not None for v in vals):
                    out[k] = vals
        else:
            sel = [rows[i] for i in idx]
            for k in keys:
                col = [_finite(v) if isinstance(v := r.get(k), int | float) and not isinstance(v, bool) else None
                       for r in sel]
                if any(v is not None for v in col):
                    out[k] = col
        out["n"] = n
        return out


# ------------------------------------------------------------------------------------------
# Pure helpers.


def band_exits(predicted: list[dict], actual: list[dict], metric: str) -> list[dict]:
    """Actual points outside the predicted band (lower/upper interpolated at the point's step,
    else its tokens). Only points within the predicted curve's range are judged."""
    import numpy as np

    if not predicted or not actual:
        return []
    xkey = next((k for k in ("step", "tokens") if _num(predicted[0].get(k)) is not None
                 and _num(actual[len(actual) - 1].get(k)) is not None), None)
    if xkey is None:
        return []

    def col(rows, key):
        return np.array([v if isinstance(v := r.get(key), int | float) and not isinstance(v, bool) else np.nan
                         for r in rows], dtype=float)

    px, lo, hi, mid = (col(predicted, k) for k in (xkey, "lower", "upper", "loss"))
    ok = np.isfinite(px) & np.isfinite(lo) & np.isfinite(hi)
    if ok.sum() < 2:
        return []
    order = np.argsort(px[ok])
    px, lo, hi, mid = px[ok][order], lo[ok][order], hi[ok][order], mid[ok][order]
    if isinstance(actual, JsonlTable):
        ax, ay = actual.column(xkey), actual.column(metric)
        if ax is None or ay is None:
            return []
    else:
        ax, ay = col(actual, xkey), col(actual, metric)
    judged = np.isfinite(ax) & np.isfinite(ay) & (ax >= px[0]) & (ax <= px[-1])
    idx = np.flatnonzero(judged)
    a_lo, a_hi = np.interp(ax[idx], px, lo), np.interp(ax[idx], px, hi)
    a_mid = np.interp(ax[idx], px, mid) if np.isfinite(mid).all() else np.full(len(idx), np.nan)
    out_of = (ay[idx] < a_lo) | (ay[idx] > a_hi)
    out = []
    for j in np.flatnonzero(out_of):
        i = int(idx[j])
        y = float(ay[i])
        row = {"step": actual.value("step", i), "tokens": actual.value("tokens", i)} \
            if isinstance(actual, JsonlTable) else actual[i]
        out.append({"metric": metric, "step": _num(row.get("step")), "tokens": _num(row.get("tokens")),
                    "actual": y, "predicted": _finite(float(a_mid[j])), "lower": float(a_lo[j]),
                    "upper": float(a_hi[j]), "side": "below" if y < a_lo[j] else "above"})
    return out


def hero_prediction(pred: Any) -> dict:
    """The hero's entry of prediction.json: its 'hero' object, else the top level (flat form)."""
    if not isinstance(pred, dict):
        return {}
    h = pred.get("hero")
    if isinstance(h, dict):
        return {**{k: v for k, v in pred.items() if k in ("law", "level")}, **h}
    return pred


def _pointer(ptr: Any, ladder_dir: Path) -> Path | None:
    if isinstance(ptr, dict):
        for k in ("path", "dir", "output_dir", "out_dir", "output"):
            if isinstance(ptr.get(k), str):
                ptr = ptr[k]
                break
        else:
            if isinstance(ptr.get("hash"), str) and isinstance(ptr.get("step") or ptr.get("name"), str):
                ptr = f"{ptr.get('step') or ptr.get('name')}-{ptr['hash']}"
    if not isinstance(ptr, str) or not ptr:
        return None
    if "://" in ptr:
        ptr = ptr.split("://", 1)[1] if ptr.startswith("file://") else ptr.rsplit("/", 1)[-1]
    p = Path(ptr)
    if not p.is_absolute():
        p = ladder_dir / p
        if not p.exists():
            p = ladder_dir / Path(ptr).name
    elif not p.exists():
        p = ladder_dir / p.name  # a root moved (copied from a cluster): the same dir name here
    return p


def _stat(p: Path) -> tuple | None:
    try:
        st = os.stat(p)
    except OSError:
        return None
    return (st.st_ino, st.st_size, st.st_mtime_ns)


def _mtime(p: Path) -> float:
    try:
        return p.stat().st_mtime
    except OSError:
        return 0.0


def _step_order(name: str):
    if name in ANALYSIS_STEPS:
        return (1, ANALYSIS_STEPS.index(name), [])
    return (0, 0, _natural_key(name))


def _is_training(step: str, d: Path) -> bool:
    if step == "hero":
        return True
    if step in ANALYSIS_STEPS:
        return False
    return step.startswith("rung") or (d / layout.METRICS).exists() or (d / layout.EVAL).exists()


def _kind(step: str, d: Path) -> str:
    return "train" if _is_training(step, d) else "analysis"


def _canonical_edges(names: list[str]) -> list[list[str]]:
    present = set(names)
    rungs = [n for n in names if n not in ANALYSIS_STEPS]
    edges = [[r, "fit"] for r in rungs if "fit" in present]
    chain = [("fit", "predict"), ("predict", "gate"), ("gate", "hero"), ("hero", "report"),
             ("fit", "report"), ("predict", "report")]
    edges += [[a, b] for a, b in chain if a in present and b in present]
    return edges


def _epoch(x: Any) -> float | None:
    v = _num(x)
    if v is not None:
        return v
    if isinstance(x, str):
        from datetime import datetime

        try:
            return datetime.fromisoformat(x.replace("Z", "+00:00")).timestamp()
        except ValueError:
            return None
    return None


def _scalars(d: Any) -> dict:
    """The scalar (JSON-safe) entries of a dict: numbers, strings, bools, None."""
    if not isinstance(d, dict):
        return {}
    out = {}
    for k, v in d.items():
        if isinstance(v, bool) or v is None or isinstance(v, str):
            out[str(k)] = v
        elif isinstance(v, int | float):
            out[str(k)] = _finite(v)
    return out


def _scalar_str(x: Any) -> str | None:
    if x is None:
        return None
    return x if isinstance(x, str) else json.dumps(x, default=str)[:500]


def _keys(rows) -> list[str]:
    if isinstance(rows, JsonlTable):
        return rows.keys()
    seen: dict[str, None] = {}
    for r in rows[:50] + rows[-50:]:
        for k in r:
            seen.setdefault(k, None)
    return list(seen)


def _find_law(obj: Any, depth: int = 0) -> dict | None:
    """The final-loss law inside fit.json: a dict with 'law' and 'params' (FitResult.to_dict()).
    Prefers a compute law at the top or under 'final'/'law'/'laws'."""
    if depth > 4 or not isinstance(obj, dict):
        return None
    if isinstance(obj.get("law"), str) and isinstance(obj.get("params"), dict):
        return obj
    found = []
    for key in ("final", "law", "laws", "compute", "fit", "loss_law"):
        if key in obj:
            f = _find_law(obj[key], depth + 1)
            if f:
                found.append(f)
    if not found:
        for v in obj.values():
            f = _find_law(v, depth + 1) if isinstance(v, dict) else None
            if f:
                found.append(f)
    for f in found:
        if f.get("law") == "compute":
            return f
    return found[0] if found else None


def _param_rows(law: dict) -> list[dict]:
    rows = []
    ci = law.get("ci") or {}
    for k, v in (law.get("params") or {}).items():
        lo, hi = (ci.get(k) or [None, None])[:2] if isinstance(ci.get(k), list) else (None, None)
        rows.append({"law": law.get("law"), "param": k, "value": _num(v), "lower": _num(lo), "upper": _num(hi)})
    return rows


def _backtest_rows(fitj: dict) -> list[dict]:
    bt = fitj.get("backtest")
    if bt is None:
        for v in fitj.values():
            if isinstance(v, dict) and "backtest" in v:
                bt = v["backtest"]
                break
    if isinstance(bt, dict):
        bt = {k: (", ".join(map(str, v)) if isinstance(v, list) and all(isinstance(x, str | int | float) for x in v) else v)
              for k, v in bt.items()}
        for key in ("rows", "points", "runs", "held_out"):
            if isinstance(bt.get(key), list) and all(isinstance(x, dict) for x in bt[key]):
                summary = {k: v for k, v in _scalars(bt).items()}
                return [{**_scalars(r), **{f"summary.{k}": v for k, v in summary.items()}} for r in bt[key]]
        return [_scalars(bt)] if _scalars(bt) else []
    if isinstance(bt, list):
        return [_scalars(r) for r in bt if isinstance(r, dict)]
    return []


def _quantile(sorted_vals: list[float], q: float) -> float:
    if not sorted_vals:
        return float("nan")
    pos = q * (len(sorted_vals) - 1)
    i = int(math.floor(pos))
    j = min(i + 1, len(sorted_vals) - 1)
    return sorted_vals[i] + (pos - i) * (sorted_vals[j] - sorted_vals[i])


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
