"""Documents of file sources through fsspec: local paths and s3:// / gs:// URLs, single files or folders,
plain or compressed (``.gz``, ``.zst``: fsspec infers the codec from the name).

A ``.jsonl`` file's documents are each line's ``text`` field, a ``.parquet`` or ``.arrow`` file's its
``text`` column, any other file is text split into ~8 KB documents at line ends. A Hugging Face
``datasets`` folder (``Dataset.save_to_disk``: Arrow stream files beside ``state.json`` and
``dataset_info.json``; a ``DatasetDict`` adds ``dataset_dict.json`` and a folder per split) reads as
its Arrow files, through pyarrow: neither the ``datasets`` library nor the network is needed. Names are relative to the source, so a
document's held-out membership (a CRC of its name) is the same wherever the corpus lives.
"""

from __future__ import annotations

import hashlib
import io
import json
from collections.abc import Iterator

_COMPRESSED = (".gz", ".zst", ".bz2", ".xz")
# What Dataset.save_to_disk / DatasetDict.save_to_disk write beside the Arrow files.
DATASETS_METADATA = frozenset({"state.json", "dataset_info.json", "dataset_dict.json"})


class SourceError(ValueError):
    """A source that cannot be read; the message names it and the fix."""


def is_url(source: str) -> bool:
    return "://" in source


def _fs(source: str):
    import fsspec

    try:
        fs, path = fsspec.core.url_to_fs(source)
    except (ImportError, ValueError) as exc:
        raise SourceError(f"{source}: no filesystem for this URL ({exc}); install its fsspec package (s3fs, gcsfs)") from exc
    return fs, path


def can_read(source: str) -> bool:
    """Whether this process has the fsspec filesystem for the source's scheme (local paths always)."""
    if not is_url(source):
        return True
    try:
        _fs(source)
    except SourceError:
        return False
    return True


def list_files(source: str) -> tuple[object, list[tuple[str, str]]]:
    """(filesystem, [(path, name relative to the source)]) of a file or folder, sorted; hidden files (a name
    starting with '.') left out, as the source's digest leaves them out."""
    fs, root = _fs(source)
    try:
        if fs.isdir(root):
            found = sorted(fs.find(root), key=lambda p: p.split("/"))  # by path parts, as sorted(Path) orders
            base = root.rstrip("/") + "/"
            files = [(p, p[len(base):] if p.startswith(base) else p) for p in found]
            files = [(p, rel) for p, rel in files if not rel.rsplit("/", 1)[-1].startswith(".")]
            if any(rel.endswith(".arrow") for _, rel in files):  # a datasets folder: its JSON is metadata
                files = [(p, rel) for p, rel in files if rel.rsplit("/", 1)[-1] not in DATASETS_METADATA]
            return fs, files
        if fs.isfile(root):
            return fs, [(root, root.rsplit("/", 1)[-1])]
    except (OSError, PermissionError) as exc:
        raise SourceError(f"{source}: unreadable ({type(exc).__name__}: {exc}); check the URL and its credentials") from exc
    raise SourceError(f"{source}: no such file or folder; give a text/JSONL/parquet file, a folder or builtin:*")


def _kind(name: str) -> tuple[str, str | None]:
    lower = name.lower()
    codec = None
    for ext, c in ((".gz", "gzip"), (".zst", "zstd"), (".bz2", "bz2"), (".xz", "xz")):
        if lower.endswith(ext):
            lower, codec = lower[: -len(ext)], c
    suffix = lower.rsplit(".", 1)[-1] if "." in lower.rsplit("/", 1)[-1] else ""
    return suffix, codec


def _open_text(fs, path: str, codec: str | None):
    import fsspec

    raw = fs.open(path, "rb")
    stream = fsspec.compression.compr[codec](raw, mode="rb") if codec else raw
    return io.TextIOWrapper(stream, encoding="utf-8", errors="replace")


def split_text(name: str, text: str, size: int = 8192) -> Iterator[tuple[str, str]]:
    start, i = 0, 0
    while start < len(text):
        end = min(len(text), start + size)
        nl = text.rfind("\n", start + size // 2, end) if end < len(text) else -1
        end = nl + 1 if nl > 0 else end
        yield f"{name}#{i}", text[start:end]
        start, i = end, i + 1


def file_documents(fs, path: str, name: str, label: str) -> Iterator[tuple[str, str]]:
    """(name, text) documents of one file; ``label`` names it in errors."""
    suffix, codec = _kind(name)
    base = name.rsplit("/", 1)[-1]
    if suffix in ("parquet", "arrow"):
        table = _read_table(fs, path, suffix, label)
        if "text" not in table.column_names:
            raise SourceError(f"{label}: {suffix} file has no 'text' column (columns: {table.column_names}); "
                              "name the text column 'text'")
        for i, text in enumerate(table.column("text").to_pylist()):
            if isinstance(text, str):
                yield f"{base}:{i}", text
        return
    with _open_text(fs, path, codec) as f:
        if suffix == "jsonl":
            for i, line in enumerate(f):
                line = line.strip()
                if not line:
                    continue
                try:
                    obj = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise SourceError(f"{label}:{i + 1}: not valid JSON ({exc.msg})") from exc
                text = obj.get("text") if isinstance(obj, dict) else obj
                if not isinstance(text, str):
                    raise SourceError(f"{label}:{i + 1}: expected a 'text' string field; give each line a \"text\" key")
                yield f"{base}:{i}", text
            return
        yield from split_text(base, f.read())


def _read_table(fs, path: str, suffix: str, label: str):
    import pyarrow as pa
    import pyarrow.parquet as pq

    with fs.open(path, "rb") as f:
        if suffix == "parquet":
            return pq.read_table(f)
        data = f.read()
    # datasets writes the Arrow IPC stream format; an Arrow IPC file (Feather v2) is read too
    for opener in (pa.ipc.open_stream, pa.ipc.open_file):
        try:
            return opener(pa.BufferReader(data)).read_all()
        except pa.ArrowInvalid:
            continue
    raise SourceError(f"{label}: not an Arrow stream or file; give the folder Dataset.save_to_disk wrote")


def documents(source: str) -> Iterator[tuple[str, str]]:
    """(name, text) documents of a file or folder source (path or URL)."""
    fs, files = list_files(source)
    single = len(files) == 1 and not fs.isdir(_fs(source)[1])
    for path, rel in files:
        label = source if single else f"{source.rstrip('/')}/{rel}"
        for name, text in file_documents(fs, path, rel, label):
            yield (name if single else f"{rel}/{name}"), text


def check(source: str) -> None:
    """Raise SourceError unless the source lists and its first file yields a first document."""
    fs, files = list_files(source)
    if not files:
        raise SourceError(f"{source}: holds no files; give a text/JSONL/parquet file or a folder of them")
    path, rel = files[0]
    try:
        next(iter(file_documents(fs, path, rel, f"{source.rstrip('/')}/{rel}" if len(files) > 1 else source)), None)
    except (OSError, EOFError) as exc:
        raise SourceError(f"{source}: unreadable ({type(exc).__name__}: {exc})") from exc


def remote_digest(source: str) -> str:
    """A URL source's digest: its files' names, sizes and checksums (ETags) as the store reports them,
    so planning never reads a remote corpus; ``missing`` when nothing is there."""
    try:
        fs, files = list_files(source)
    except SourceError:
        return "missing"
    h = hashlib.sha256()
    for path, rel in files:
        info = fs.info(path)
        tag = info.get("ETag") or info.get("etag") or info.get("md5Hash") or info.get("crc32c") or info.get("mtime")
        h.update(f"{rel}\0{info.get('size')}\0{tag}\n".encode())
    return h.hexdigest()
