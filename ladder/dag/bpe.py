"""The ``tokenizer`` step of a ladder whose ``data.tokenizer`` is ``bpe:<vocab>``: a byte-level BPE trained
with the tokenizers library on the training split of every domain (held-out documents never seen), written
as ``tokenizer.json``. It is one content-addressed step, so every rung and the hero share one vocabulary."""

from __future__ import annotations

import hashlib
from collections.abc import Iterator

from ladder.dag import kinds

STEP = "tokenizer"
FILE = "tokenizer.json"
FN = "ladder.dag.bpe:bpe_step"
# Text each domain contributes to the merges, at most (the first documents in the source's order): a
# BPE's merges settle long before a large corpus is read, and training time grows with the text.
MAX_BYTES_PER_DOMAIN = 64 << 20
CODE = ("ladder/dag/bpe.py", "ladder/trainers/builtin/hf_tokenizer.py", "ladder/trainers/builtin/sources.py")


def bpe_step_for(spec):
    from ladder.dag.inputs import step_inputs
    from ladder.executor import Step
    from ladder.trainers.builtin.tokenizer import bpe_vocab

    data = spec.data
    config = {"vocab": bpe_vocab(data.tokenizer), "heldout_frac": float(data.heldout_frac),
              "sources": {d.name: d.source for d in data.domains}, "max_bytes_per_domain": MAX_BYTES_PER_DOMAIN,
              "inputs": step_inputs(("tokenizers",), data)}
    return Step(name=STEP, kind=kinds.BPE_TOKENIZER, fn=FN, config=config, code=CODE,
                description=f"train a byte-level BPE of {config['vocab']} tokens on the training split")


def training_texts(sources: dict[str, str], heldout_frac: float, max_bytes: int) -> Iterator[str]:
    from ladder.trainers.builtin.data import documents, is_heldout

    for source in sources.values():
        seen = 0
        for name, text in documents(source):
            if not text or is_heldout(name, heldout_frac):
                continue
            yield text
            seen += len(text)
            if seen >= max_bytes:
                break


def bpe_step(config: dict, ctx) -> dict:
    import fsspec

    from ladder.trainers.builtin.hf_tokenizer import HFTokenizer, train_bpe
    from ladder.trainers.builtin.shards import put

    text = train_bpe(training_texts(config["sources"], float(config["heldout_frac"]),
                                    int(config["max_bytes_per_domain"])), int(config["vocab"]))
    raw = text.encode("utf-8")
    tok = HFTokenizer(raw, FILE)
    fs, path = fsspec.core.url_to_fs(ctx.path(FILE))
    put(fs, path, raw)
    return {"vocab_size": tok.vocab_size, "eot": tok.eot, "sha256": hashlib.sha256(raw).hexdigest()}
