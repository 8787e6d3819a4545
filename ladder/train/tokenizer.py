"""Tokenizers behind one small interface; ``bytes`` (vocab 256, one token per UTF-8 byte) is the default."""

from __future__ import annotations

from typing import Protocol

import numpy as np


class Tokenizer(Protocol):
    name: str
    vocab_size: int

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

    def encode(self, text: str | bytes) -> np.ndarray:
        data = text.encode("utf-8", errors="replace") if isinstance(text, str) else bytes(text)
        return np.frombuffer(data, dtype=np.uint8)

    def decode(self, ids) -> str:
        return bytes(np.asarray(ids, dtype=np.uint8).tolist()).decode("utf-8", errors="replace")

    def n_bytes(self, ids: np.ndarray) -> int:
        return int(np.asarray(ids).size)


def get_tokenizer(name: str) -> ByteTokenizer:
    if name == "bytes":
        return ByteTokenizer()
    raise ValueError(f"data.tokenizer: {name!r} is not supported; use 'bytes'")
