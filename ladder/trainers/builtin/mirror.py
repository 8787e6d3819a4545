"""A trainer's output directory on a local path or any fsspec URL (s3://, gs://, ...).

Orbax and the JSONL writers need a local folder (appends, renames, fsync), so for a URL the
trainer works in a local scratch folder that mirrors it:

- :func:`open_output` fills the scratch from the URL: every file, and the newest checkpoint whose
  upload finished (its ``COMPLETE_MARKER`` exists); :meth:`OutputDir.fetch_checkpoint` brings the
  next older one when that one turns out unreadable. So a run resumes on any node from what the URL
  holds, downloads one checkpoint when it is sound, and never restores one cut off mid-upload.
- :meth:`OutputDir.sync` uploads the files that changed since the last upload and removes from
  the URL the ones deleted locally (e.g. a stale result.json). While training it runs at most every
  ``LADDER_MIRROR_EVERY_S`` seconds (10), and always at checkpoints and at the end.
- :meth:`OutputDir.checkpoint` runs after each checkpoint: files first (so the URL's metrics never
  lag its newest checkpoint; rows past the restored step are truncated on resume), then each new
  checkpoint's files, then its marker; checkpoints gone locally (pruned by ``max_to_keep``, or
  moved aside as corrupt) lose their marker first, then their files, and older ones never
  downloaded go once there are ``keep`` newer ones, as a local run would have pruned them.

A local path (or ``file://``) is used in place, and every method is a no-op.
"""

from __future__ import annotations

import os
import shutil
import tempfile
import time
from pathlib import Path

import fsspec

from ladder.executor.store import is_local_fs, strip_file_scheme

COMPLETE_MARKER = "LADDER_UPLOAD_COMPLETE"
CHECKPOINTS = "checkpoints"
CORRUPT = "checkpoints.corrupt"  # where the Checkpointer moves an unreadable checkpoint
MIRROR_EVERY_S = float(os.environ.get("LADDER_MIRROR_EVERY_S", "10"))
# The executor's own files in a step dir (status, leases, provenance, progress): never pulled, so
# never pushed back over the executor's newer copies.
EXECUTOR_FILES = frozenset({"step.json", "progress.json", "error.txt", "inputs.json"})


def is_remote(url: str | os.PathLike) -> bool:
    """True for an fsspec URL whose filesystem is not the local disk."""
    text = str(url)
    return "://" in text and not is_local_fs(fsspec.core.url_to_fs(text)[0])


def _temporary(name: str) -> bool:
    # the atomic writers' temp files (``.name.xxxx``, ``name.tmp``): gone or renamed a moment later
    return name.endswith(".tmp") or name.startswith(".")


def _rel_files(root: Path, skip_top: tuple[str, ...] = ()) -> dict[str, Path]:
    out = {}
    for dirpath, dirnames, filenames in os.walk(root):
        rel_dir = os.path.relpath(dirpath, root)
        if rel_dir == ".":
            dirnames[:] = [d for d in dirnames if d not in skip_top]
        for name in filenames:
            if _temporary(name):
                continue
            rel = name if rel_dir == "." else f"{rel_dir}/{name}".replace(os.sep, "/")
            out[rel] = Path(dirpath) / name
    return out


def _stamp(path: Path) -> tuple[int, int] | None:
    try:
        st = path.stat()
    except FileNotFoundError:  # removed between the walk and now: it is gone, not changed
        return None
    return st.st_size, st.st_mtime_ns


def download_tree(url: str, local: str | os.PathLike, skip_top: tuple[str, ...] = ()) -> Path:
    """Copy every file under ``url`` into ``local`` (top-level folders in ``skip_top`` left out)."""
    fs, root = fsspec.core.url_to_fs(str(url))
    root = root.rstrip("/")
    local = Path(local)
    local.mkdir(parents=True, exist_ok=True)
    fs.invalidate_cache()
    remote = fs.find(root, detail=False) if fs.exists(root) else []
    pairs = []
    for path in remote:
        rel = path[len(root) + 1 :]
        if not rel or rel.split("/", 1)[0] in skip_top:
            continue
        pairs.append((path, local / rel))
    _fetch(fs, pairs)
    return local


def _fetch(fs, pairs: list[tuple[str, Path]]) -> None:
    """Download (remote path, local path) pairs in one batched call, creating folders first."""
    for _, dst in pairs:
        dst.parent.mkdir(parents=True, exist_ok=True)
    if pairs:
        fs.get([p for p, _ in pairs], [str(d) for _, d in pairs])


def upload_tree(local: str | os.PathLike, url: str) -> None:
    """Copy every file under ``local`` to ``url`` (one PUT each; nothing is deleted there)."""
    fs, root = fsspec.core.url_to_fs(str(url))
    files = _rel_files(Path(local))
    if files:
        fs.put([str(p) for p in files.values()], [f"{root.rstrip('/')}/{rel}" for rel in files])


class OutputDir:
    """The folder a trainer writes: ``local`` always; ``url`` set when it mirrors an fsspec URL."""

    def __init__(self, target: str | os.PathLike, *, every_s: float | None = None):
        self.url: str | None = str(target) if is_remote(target) else None
        self.every_s = MIRROR_EVERY_S if every_s is None else float(every_s)
        self._last = 0.0
        self._sent: dict[str, tuple[int, int]] = {}
        self._ckpt_sent: dict[str, int] = {}  # step -> local dir mtime, for checkpoints both here and there
        self._waiting: list[str] = []  # complete checkpoints at the URL not downloaded (oldest first)
        self._ckpt_files: dict[str, list[str]] = {}  # their files, relative to the URL
        if self.url is None:
            self.local = Path(strip_file_scheme(str(target)))
            self.local.mkdir(parents=True, exist_ok=True)
            self._scratch = None
            return
        self.fs, root = fsspec.core.url_to_fs(self.url)
        self.root = root.rstrip("/")
        self._scratch = Path(tempfile.mkdtemp(prefix="ladder-train-", dir=os.environ.get("LADDER_SCRATCH")))
        self.local = self._scratch / "out"
        self._pull()

    @property
    def remote(self) -> bool:
        return self.url is not None

    def __enter__(self) -> OutputDir:
        return self

    def __exit__(self, exc_type, exc, tb) -> None:
        self.close()

    def _remote(self, rel: str) -> str:
        return f"{self.root}/{rel}"

    # ---- download
    def _pull(self) -> None:
        self.fs.invalidate_cache()
        found = self.fs.find(self.root, detail=False) if self.fs.exists(self.root) else []
        rels = {p[len(self.root) + 1 :] for p in found if p.startswith(self.root + "/")}
        complete = {r.split("/")[1] for r in rels
                    if r.startswith(CHECKPOINTS + "/") and r.endswith("/" + COMPLETE_MARKER) and r.count("/") == 2}
        self._ckpt_files = {step: sorted(r for r in rels if r.startswith(f"{CHECKPOINTS}/{step}/")
                                         and not r.endswith("/" + COMPLETE_MARKER)) for step in complete}
        self._waiting = sorted(complete, key=int)
        rels = sorted(r for r in rels if "/" in r or (r not in EXECUTOR_FILES and not _temporary(r)))
        # checkpoints come one at a time (fetch_checkpoint); ones set aside as corrupt never come back
        self._get([r for r in rels if r.split("/", 1)[0] not in (CHECKPOINTS, CORRUPT)])
        for rel, path in _rel_files(self.local, (CHECKPOINTS,)).items():
            self._sent[rel] = _stamp(path)
        if self.fetch_checkpoint() or rels:
            print(f"[ladder.train] restored the run's files from {self.url}", flush=True)

    def _get(self, rels: list[str]) -> None:
        self.local.mkdir(parents=True, exist_ok=True)
        _fetch(self.fs, [(self._remote(r), self.local / r) for r in rels])

    def fetch_checkpoint(self) -> bool:
        """Download the newest complete checkpoint not yet here; False when there is none left."""
        if not self._waiting:
            return False
        step = self._waiting.pop()
        # the marker stays behind: orbax must see only its own files
        self._get(self._ckpt_files.pop(step))
        self._ckpt_sent[step] = (self.local / CHECKPOINTS / step).stat().st_mtime_ns
        return True

    # ---- upload
    def sync(self, force: bool = False) -> None:
        """Upload changed files and delete removed ones (throttled unless ``force``)."""
        if self.url is None:
            return
        now = time.monotonic()
        if not force and now - self._last < self.every_s:
            return
        self._last = now
        files = _rel_files(self.local, (CHECKPOINTS,))
        changed = []
        for rel, path in files.items():
            stamp = _stamp(path)
            if stamp is not None and self._sent.get(rel) != stamp:
                changed.append((rel, path, stamp))
        if changed:
            self.fs.put([str(p) for _, p, _ in changed], [self._remote(r) for r, _, _ in changed])
            for rel, _, stamp in changed:
                self._sent[rel] = stamp
        for rel in [r for r in self._sent if r not in files]:
            if self.fs.exists(self._remote(rel)):
                self.fs.rm_file(self._remote(rel))
            del self._sent[rel]

    def checkpoint(self, keep: int = 3) -> None:
        """Mirror the local checkpoints folder: files first, then new checkpoints, then removals.

        ``keep``: the checkpoint manager's ``max_to_keep``; older checkpoints never downloaded are
        removed from the URL once that many newer ones exist."""
        if self.url is None:
            return
        self.sync(force=True)
        base = self.local / CHECKPOINTS
        local = {d.name: d.stat().st_mtime_ns for d in base.iterdir() if d.is_dir() and d.name.isdigit()} \
            if base.is_dir() else {}
        for step, sent in list(self._ckpt_sent.items()):
            if local.get(step) != sent:  # pruned, moved aside as corrupt, or rewritten at the same step
                self._drop_checkpoint(step)
        for step in sorted(set(local) - set(self._ckpt_sent), key=int):
            files = _rel_files(base / step)
            prefix = self._remote(f"{CHECKPOINTS}/{step}")
            self.fs.put([str(p) for p in files.values()], [f"{prefix}/{rel}" for rel in files])
            self.fs.pipe_file(f"{prefix}/{COMPLETE_MARKER}", b"")
            self._ckpt_sent[step] = local[step]
        while self._waiting and len(self._waiting) + len(local) > keep:
            self._drop_checkpoint(self._waiting.pop(0))

    def _drop_checkpoint(self, step: str) -> None:
        prefix = self._remote(f"{CHECKPOINTS}/{step}")
        marker = f"{prefix}/{COMPLETE_MARKER}"
        if self.fs.exists(marker):
            self.fs.rm_file(marker)
        self.fs.invalidate_cache(prefix)
        if self.fs.exists(prefix):
            self.fs.rm(prefix, recursive=True)
        self._ckpt_sent.pop(step, None)

    def close(self) -> None:
        """Drop the scratch folder (call :meth:`checkpoint` first to keep what it holds)."""
        if self._scratch is not None:
            shutil.rmtree(self._scratch)
            self._scratch = None


def open_output(out_dir: str | os.PathLike | OutputDir) -> OutputDir:
    return out_dir if isinstance(out_dir, OutputDir) else OutputDir(out_dir)
