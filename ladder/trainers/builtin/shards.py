"""Token shards: the files a tokenize step writes and a training process memory-maps.

A tokenize step's folder (local or an fsspec URL) holds, per shard ``NNNNN`` and split (``train``,
``heldout``), three ``.npy`` files:

- ``NNNNN.<split>.tokens.npy``: the split's documents' tokens, each followed by the end-of-text token
  (uint16 where the vocabulary fits, else uint32);
- ``NNNNN.<split>.bytes.npy``: each token's UTF-8 byte count (uint16), the denominator of bits per byte;
- ``NNNNN.<split>.docs.npy``: each document's first token (int64), the document boundaries;

then ``NNNNN.json``, the shard's record (counts, each file's size and sha256), written last, so a shard
with a record is whole; and ``manifest.json`` once every shard is. A training process checks each file
against the manifest (size, then sha256) before it maps it: a truncated or corrupt shard fails the run
with one line naming the file; a file's hash is kept per node by its path, size and mtime, so each
process does not read the corpus again to check it. A remote shard is downloaded once per node into a content-addressed cache
(``$LADDER_SHARD_CACHE``, default ``<tmp>/scaling-ladder-shards``) and mapped from there.
"""

from __future__ import annotations

import hashlib
import io
import json
import os
import tempfile
import threading
import uuid
from pathlib import Path

import numpy as np

from ladder.trainers.builtin.sha256 import sha256_file

FORMAT_VERSION = 1
SPLITS = ("train", "heldout")
KINDS = ("tokens", "bytes", "docs")
MANIFEST = "manifest.json"


class ShardError(ValueError):
    """A shard that is missing, truncated or corrupt; the message names the file and the fix."""


def token_dtype(vocab_size: int) -> np.dtype:
    return np.dtype(np.uint16) if vocab_size <= np.iinfo(np.uint16).max + 1 else np.dtype(np.uint32)


def file_name(index: int, split: str, kind: str) -> str:
    return f"{index:05d}.{split}.{kind}.npy"


def record_name(index: int) -> str:
    return f"{index:05d}.json"


def npy_bytes(arr: np.ndarray) -> bytes:
    buf = io.BytesIO()
    np.save(buf, arr, allow_pickle=False)
    return buf.getvalue()


def put(fs, path: str, data: bytes) -> None:
    """Write a whole file: on a local disk through a temp file and a rename (never half a file under the
    name), on an object store as one object (which is atomic)."""
    from ladder.executor.store import is_local_fs

    if not is_local_fs(fs):
        fs.pipe(path, data)
        return
    target = Path(path)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}")
    tmp.write_bytes(data)
    os.replace(tmp, target)


def read_json(fs, path: str) -> dict | None:
    try:
        with fs.open(path, "rb") as f:
            return json.loads(f.read())
    except FileNotFoundError:
        return None


def _cache_root() -> Path:
    return Path(os.environ.get("LADDER_SHARD_CACHE") or Path(tempfile.gettempdir()) / "scaling-ladder-shards")


_verified: dict[tuple[str, int, int], str] = {}  # (path, size, mtime_ns) -> sha256, once per process
_lock = threading.Lock()


def _check_local(path: str, meta: dict, label: str) -> None:
    try:
        st = os.stat(path)
    except FileNotFoundError as exc:
        raise ShardError(f"{label}: missing; rerun its tokenize step (ladder rerun SPEC <tokenize step>)") from exc
    if st.st_size != meta["size"]:
        raise ShardError(f"{label}: truncated or wrong size ({st.st_size} bytes, its manifest says {meta['size']}); "
                         "rerun its tokenize step")
    key = (path, st.st_size, st.st_mtime_ns)
    with _lock:
        digest = _verified.get(key)
    # a file this node already hashed (same path, size and mtime) is not read again by every process
    marker = _cache_root() / "verified" / hashlib.sha256(f"{path}\0{st.st_size}\0{st.st_mtime_ns}".encode()).hexdigest()
    if digest is None and marker.exists():
        digest = marker.read_text().strip()
    if digest is None:
        digest = sha256_file(path)
        if digest == meta["sha256"]:
            marker.parent.mkdir(parents=True, exist_ok=True)
            tmp = marker.with_name(f".{marker.name}.{uuid.uuid4().hex[:8]}")
            tmp.write_text(digest)
            os.replace(tmp, marker)
    with _lock:
        _verified[key] = digest
    if digest != meta["sha256"]:
        raise ShardError(f"{label}: corrupt (its sha256 does not match its manifest); rerun its tokenize step")


def local_copy(fs, url: str, meta: dict, label: str) -> str:
    """A local path holding the file at ``url`` (checked against ``meta``): the file itself on a local
    disk, else the node's cached copy, downloaded once (content-addressed, so every process shares it)."""
    from ladder.executor.store import is_local_fs

    if is_local_fs(fs):
        path = fs._strip_protocol(url)
        _check_local(path, meta, label)
        return path
    target = _cache_root() / f"{meta['sha256']}.npy"
    if not target.exists():
        target.parent.mkdir(parents=True, exist_ok=True)
        tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex[:8]}")
        try:
            fs.get(url, str(tmp))
        except FileNotFoundError as exc:
            raise ShardError(f"{label}: missing; rerun its tokenize step") from exc
        try:
            _check_local(str(tmp), meta, label)
        except ShardError:
            tmp.unlink(missing_ok=True)
            raise
        os.replace(tmp, target)
    _check_local(str(target), meta, label)
    return str(target)


class Split:
    """One split of a tokenized source, its shards memory-mapped (or the ``bytes`` tokenizer's stream in
    memory); windows of ``seq + 1`` tokens step by ``seq`` inside each shard (a window never spans two
    shards). ``nbytes`` None: every token is one byte (the ``bytes`` tokenizer)."""

    def __init__(self, tokens: list[np.ndarray], nbytes: list[np.ndarray] | None, seq: int):
        self.tokens, self.nbytes, self.seq = tokens, nbytes, int(seq)
        counts = np.array([max(0, (t.size - 1) // self.seq) for t in tokens], dtype=np.int64)
        self.first = np.concatenate([[0], np.cumsum(counts)])
        self.n_windows = int(self.first[-1])
        self.n_tokens = int(sum(t.size for t in tokens))

    def _locate(self, idx: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        shard = np.searchsorted(self.first, idx, side="right") - 1
        return shard, (idx - self.first[shard]) * self.seq

    def windows(self, idx: np.ndarray, out: np.ndarray | None = None) -> np.ndarray:
        """(len(idx), seq + 1) int32 token windows."""
        idx = np.asarray(idx, dtype=np.int64)
        out = np.empty((idx.size, self.seq + 1), np.int32) if out is None else out
        shard, start = self._locate(idx)
        span = np.arange(self.seq + 1)
        for s in np.unique(shard):
            rows = shard == s
            out[rows] = self.tokens[s][start[rows, None] + span]
        return out

    def target_bytes(self, idx: np.ndarray) -> int:
        """UTF-8 bytes the predicted tokens (each window's last ``seq``) stand for."""
        idx = np.asarray(idx, dtype=np.int64)
        if self.nbytes is None:
            return int(idx.size) * self.seq
        shard, start = self._locate(idx)
        span = np.arange(1, self.seq + 1)
        return sum(int(self.nbytes[s][start[shard == s, None] + span].sum(dtype=np.int64)) for s in np.unique(shard))


def open_split(shard_dir: str, split: str, seq: int, label: str) -> tuple[Split, dict]:
    """A tokenized source's split, checked against its manifest, and the manifest."""
    import fsspec

    fs, root = fsspec.core.url_to_fs(shard_dir)
    manifest = read_json(fs, f"{root.rstrip('/')}/{MANIFEST}")
    if manifest is None:
        raise ShardError(f"{label}: {shard_dir} has no {MANIFEST}; its tokenize step has not finished (ladder submit)")
    if manifest.get("format") != FORMAT_VERSION:
        raise ShardError(f"{label}: {shard_dir} is format {manifest.get('format')}, this ladder reads "
                         f"{FORMAT_VERSION}; rerun its tokenize step")
    tokens, nbytes = [], []
    for shard in manifest["shards"]:
        files = shard["splits"][split]["files"]
        maps = {}
        for kind in ("tokens", "bytes"):
            name = file_name(shard["index"], split, kind)
            path = local_copy(fs, f"{root.rstrip('/')}/{name}", files[kind], f"{label} shard {name}")
            # a plain array over the mapped file: slicing a np.memmap wraps every slice in a memmap object
            maps[kind] = np.load(path, mmap_mode="r").view(np.ndarray)
        if maps["tokens"].size:
            tokens.append(maps["tokens"])
            nbytes.append(maps["bytes"])
    return Split(tokens, nbytes, seq), manifest
