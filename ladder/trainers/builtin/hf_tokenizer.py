"""Hugging Face ``tokenizers`` tokenizers: a user's ``tokenizer.json`` (path or fsspec URL) and the
byte-level BPE a ladder trains on its own training split (``data.tokenizer = "bpe:<vocab>"``).

Bits per byte needs each token's UTF-8 byte count. For a byte-level BPE it is the token's length (one
character of its alphabet per byte), looked up by id; for any other tokenizer it comes from the encoding's
character offsets:
a token covers the bytes up to its span's end not already covered by an earlier token (byte-level BPE can
split one multi-byte character over two tokens that report the same span; text a pre-tokenizer dropped
counts for the next token, the tail for the last), so the counts of a document sum to its UTF-8 length
whatever the tokenizer.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterable

import numpy as np

# The names a tokenizer.json commonly gives its end-of-text token; the first one present separates documents.
EOT_NAMES = ("<|endoftext|>", "<|end_of_text|>", "</s>", "<eos>", "<|eos|>", "[SEP]", "<|im_end|>")
BPE_EOT = "<|endoftext|>"


class TokenizerFileError(ValueError):
    """A tokenizer file that cannot be read or used; the message names the file and the fix."""


def read_bytes(location: str) -> bytes:
    """A tokenizer.json's bytes from a path or an fsspec URL."""
    import fsspec

    try:
        with fsspec.open(location, "rb") as f:
            return f.read()
    except FileNotFoundError as exc:
        raise TokenizerFileError(f"data.tokenizer: {location} does not exist; give a tokenizer.json path or URL, "
                                 "'bpe:<vocab>' or 'bytes'") from exc
    except (OSError, ValueError, ImportError) as exc:
        raise TokenizerFileError(f"data.tokenizer: {location} is unreadable ({type(exc).__name__}: {exc}); "
                                 "check the path or URL and its credentials") from exc


class HFTokenizer:
    """A ``tokenizers.Tokenizer`` behind the ladder's tokenizer interface."""

    def __init__(self, raw: bytes, name: str):
        from tokenizers import Tokenizer

        try:
            self.tok = Tokenizer.from_str(raw.decode("utf-8"))
        except Exception as exc:  # the library raises its own Exception subclass for a malformed file
            raise TokenizerFileError(f"data.tokenizer: {name} is not a tokenizers tokenizer.json "
                                     f"({type(exc).__name__}: {str(exc).splitlines()[0][:120]})") from exc
        self.name = name
        self.digest = hashlib.sha256(raw).hexdigest()
        self.vocab_size = int(self.tok.get_vocab_size(with_added_tokens=True))
        vocab = self.tok.get_vocab(with_added_tokens=True)
        found = [vocab[n] for n in EOT_NAMES if n in vocab]
        if not found:
            raise TokenizerFileError(f"data.tokenizer: {name} has no end-of-text token (one of {', '.join(EOT_NAMES)}); "
                                     "add one as a special token so documents can be separated")
        self.eot = int(found[0])
        self.byte_table = _byte_level_table(raw, vocab, self.vocab_size)

    @classmethod
    def load(cls, location: str) -> HFTokenizer:
        return cls(read_bytes(location), location)

    def encode(self, text: str | bytes) -> np.ndarray:
        return self.encode_batch([text if isinstance(text, str) else text.decode("utf-8", errors="replace")])[0][0]

    def encode_batch(self, texts: list[str]) -> list[tuple[np.ndarray, np.ndarray]]:
        """(token ids, each token's UTF-8 byte count) per text, encoded in the library's parallel batch."""
        out = []
        for text, enc in zip(texts, self.tok.encode_batch(texts, add_special_tokens=False), strict=True):
            ids = np.asarray(enc.ids, dtype=np.int64)
            counts = self.byte_table[ids] if self.byte_table is not None else _byte_counts(text, enc.offsets)
            out.append((ids, counts))
        return out

    def decode(self, ids) -> str:
        return self.tok.decode([int(i) for i in np.asarray(ids).ravel()], skip_special_tokens=False)

    def n_bytes(self, ids: np.ndarray) -> int:
        return len(self.decode(ids).encode("utf-8"))


def _byte_level_table(raw: bytes, vocab: dict[str, int], size: int) -> np.ndarray | None:
    """Each token's byte count by id, for a byte-level BPE without a normalizer (each character of a token
    stands for one byte, so the count is a lookup); None for any other tokenizer (counted from offsets)."""
    import json

    spec = json.loads(raw)
    if (spec.get("normalizer") is not None or (spec.get("decoder") or {}).get("type") != "ByteLevel"
            or (spec.get("model") or {}).get("type") != "BPE"):
        return None
    table = np.zeros(size, np.uint16)
    special = {t["content"] for t in spec.get("added_tokens") or [] if t.get("special")}
    for token, i in vocab.items():
        if i < size and token not in special:
            table[i] = len(token)
    return table


def _byte_counts(text: str, offsets: list[tuple[int, int]]) -> np.ndarray:
    if not offsets:
        return np.zeros(0, np.uint16)
    if text.isascii():
        char_to_byte = None
    else:
        lens = np.fromiter((len(c.encode("utf-8", errors="replace")) for c in text), np.int64, len(text))
        char_to_byte = np.concatenate([[0], np.cumsum(lens)])
    span = np.asarray(offsets, dtype=np.int64)
    ends = span[:, 1] if char_to_byte is None else char_to_byte[span[:, 1]]
    covered = np.maximum.accumulate(ends)
    before = np.concatenate([[0], covered[:-1]])
    counts = covered - before
    # text no token covers (whitespace a pre-tokenizer dropped) counts for the token after it, the tail for the last
    counts[-1] += (len(text.encode("utf-8", errors="replace")) if char_to_byte is None else char_to_byte[-1]) - covered[-1]
    return np.minimum(np.maximum(counts, 0), np.iinfo(np.uint16).max).astype(np.uint16)


def train_bpe(texts: Iterable[str], vocab: int) -> str:
    """A byte-level BPE of at most ``vocab`` tokens (one of them the end-of-text token) trained on
    ``texts`` with the tokenizers library, as tokenizer.json text."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=int(vocab), special_tokens=[BPE_EOT], show_progress=False,
                                  initial_alphabet=pre_tokenizers.ByteLevel.alphabet())
    tok.train_from_iterator(texts, trainer=trainer)
    return tok.to_str()
