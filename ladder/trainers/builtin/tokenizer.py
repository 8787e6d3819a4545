"""Tokenizers behind one small interface; ``bytes`` (vocab 256, one token per UTF-8 byte) is the default.

``data.tokenizer`` is one of:
- ``bytes``: raw UTF-8 bytes, nothing to train or download;
- ``bpe:<vocab>``: a byte-level BPE the ladder trains on its training split (ladder.dag.bpe), one per ladder;
- a ``tokenizer.json`` path or fsspec URL (the Hugging Face ``tokenizers`` format), its content hashed;
- ``declared:<vocab>:<name>``: a tokenizer this machine does not hold, named with its vocabulary, for a
  ladder that is only planned, imported and forecast here (e.g. Marin's 128,256-token Llama 3 tokenizer);
  nothing is downloaded, and training refuses it in one line.
Every tokenizer but ``bytes`` trains from token shards (ladder.dag.tokenize).
"""

from __future__ import annotations

from typing import Protocol

import numpy as np


class Tokenizer(Protocol):
    name: str
    vocab_size: int
    eot: int

    def encode(self, text: str | bytes) -> np.ndarray: ...

    def decode(self, ids) -> str: ...

    def n_bytes(self, ids: np.ndarray) -> int:
        """UTF-8 bytes the tokens stand for (the denominator of bits per byte)."""
        ...


class ByteTokenizer:
    """Raw UTF-8 bytes; token 0 (NUL, absent from text) separates documents."""

    name = "bytes"
    vocab_size = 256
    eot = 0
    digest = "bytes"

    def encode(self, text: str | bytes) -> np.ndarray:
        data = text.encode("utf-8", errors="replace") if isinstance(text, str) else bytes(text)
        return np.frombuffer(data, dtype=np.uint8)

    def encode_batch(self, texts: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        out = []
        for text in texts:
            ids = self.encode(text)
            out.append((ids, np.ones(ids.size, np.uint16)))
        return out

    def decode(self, ids) -> str:
        return bytes(np.asarray(ids, dtype=np.uint8).tolist()).decode("utf-8", errors="replace")

    def n_bytes(self, ids: np.ndarray) -> int:
        return int(np.asarray(ids).size)


def bpe_vocab(name: str) -> int | None:
    """The vocabulary of a ``bpe:<vocab>`` tokenizer name; None for any other name or a malformed one."""
    if not isinstance(name, str) or not name.startswith("bpe:"):
        return None
    text = name[4:]
    return int(text) if text.isdigit() else None


DECLARED = "declared:"


def declared_vocab(name: str) -> int | None:
    """The vocabulary of a ``declared:<vocab>:<name>`` tokenizer; None for any other name or a malformed one."""
    if not isinstance(name, str) or not name.startswith(DECLARED):
        return None
    vocab, _, label = name[len(DECLARED):].partition(":")
    return int(vocab) if vocab.isdigit() and label.strip() else None


def declared_refusal(name: str, what: str) -> str:
    """The one line that refuses to train ``what`` on a declared tokenizer."""
    return (f"data.tokenizer: {name} is only declared (a name and its vocabulary, no tokenizer.json here), so "
            f"{what} cannot train; import the results (ladder import-results) or give its tokenizer.json "
            "(--set data.tokenizer=PATH/tokenizer.json)")


def is_file(name: str) -> bool:
    return isinstance(name, str) and name != "bytes" and not name.startswith(("bpe:", DECLARED))


def get_tokenizer(name: str, trained: str | None = None):
    """The tokenizer ``data.tokenizer`` names; ``trained``: the tokenizer.json a ``bpe:`` step wrote."""
    if name == "bytes":
        return ByteTokenizer()
    from ladder.trainers.builtin.hf_tokenizer import HFTokenizer

    if name.startswith(DECLARED):
        raise ValueError(declared_refusal(name, "a run"))
    if name.startswith("bpe:"):
        if trained is None:
            raise ValueError(f"data.tokenizer: {name} is trained by the ladder's tokenizer step; run the ladder")
        return HFTokenizer.load(trained)
    return HFTokenizer.load(name)


def tokenizer_size(name: str) -> int:
    """The vocabulary a model needs for this tokenizer (reads a tokenizer.json)."""
    if name == "bytes":
        return ByteTokenizer.vocab_size
    vocab = bpe_vocab(name) or declared_vocab(name)
    if vocab is not None:
        return vocab
    return get_tokenizer(name).vocab_size
