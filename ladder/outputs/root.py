"""A ladder root on local disk: its ladders, each step's current directory, imported runs.

Layout (see ladder.outputs.layout): ``<root>/<ladder>/.index/<step>.json`` points at the step's current
directory ``<root>/<ladder>/<step>-<hash>/``; without an index, the newest ``<step>-*`` directory
by modification time is taken. Paths are never taken from a request: a request names a ladder and
a view or table, both checked against what exists under the root. Nothing here writes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from ladder.outputs import layout
from ladder.outputs.files import FileCache, natural_key, safe_name

ANALYSIS_STEPS = ("fit", "predict", "gate", "hero", "report")
SKIP_DIRS = {"imported", "wandb", "checkpoints"}
LAW_CURVE_CSV = "law_curve.csv"  # fit: the law over compute with its band (flops, loss, lower, upper)
IMPORTED_META = "meta.json"


class LadderRoot:
    """A ladder root: lists ladders, finds each step's directory, fingerprints what a view reads."""

    def __init__(self, path: str | Path, files: FileCache | None = None):
        self.path = Path(path).expanduser().resolve()
        self.files = files or FileCache()

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
            # a ladder imported but not submitted has no step yet: a comparison saved with it still shows it
            if self.step_dirs(e.name) or any(os.path.isdir(os.path.join(e.path, d)) for d in ("imported", layout.COMPARE_DIR)):
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
               layout.REPORT, IMPORTED_META)

    def signature(self, ladder: str | None = None) -> tuple:
        """A cheap fingerprint (stat of every file a view reads) that changes when any of them does."""
        if ladder is None:
            sig: list = [file_stat(self.path)]
            for name in self.ladders():
                sig.append((name, self.signature(name)))
            return tuple(sig)
        ld = self.ladder_dir(ladder)
        if ld is None:
            return ()
        sig = [file_stat(ld), file_stat(ld / ".index")]
        for step, d in self.step_dirs(ladder).items():
            sig.append((step, str(d), *(file_stat(d / f) for f in self.WATCHED)))
        for name, d in self.imported(ladder).items():
            sig.append((name, file_stat(d / layout.METRICS), file_stat(d / IMPORTED_META)))
        compare = ld / layout.COMPARE_DIR  # `ladder compare`'s saved results (a rename changes the folder's mtime)
        sig.append(("compare", file_stat(compare), *(file_stat(p) for p in sorted(compare.glob("*.json")))))
        return tuple(sig)


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


def file_stat(p: Path) -> tuple | None:
    """(inode, size, mtime in ns) of ``p``, None when it is absent: what a cache keyed on a file compares."""
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
    return (0, 0, natural_key(name))


def _is_training(step: str, d: Path) -> bool:
    if step == "hero":
        return True
    if step in ANALYSIS_STEPS:
        return False
    return step.startswith("rung") or (d / layout.METRICS).exists() or (d / layout.EVAL).exists()


def _kind(step: str, d: Path) -> str:
    return "train" if _is_training(step, d) else "analysis"
