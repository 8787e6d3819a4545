"""A run's model vocabulary against ``data.tokenizer``: the default (ModelSpec.vocab unset) follows the
tokenizer's size, and a vocabulary given smaller than the tokenizer's, even 256, is refused (its embedding
could not hold every token)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from .model import ModelSpec, SpecError, TokenizerVocab
from .runs import LadderSpec


def tokenizer_problem(name, base_dir: Path | None) -> str | None:
    """What is wrong with a ``data.tokenizer`` value, before anything reads it; None when it looks sound."""
    from ladder.trainers.builtin.tokenizer import DECLARED, bpe_vocab, declared_vocab

    if not isinstance(name, str) or not name:
        return (f"data.tokenizer: {name!r} must be 'bytes', 'bpe:<vocab>', a tokenizer.json path or URL, or "
                "'declared:<vocab>:<name>'")
    if name == "bytes":
        return None
    if name.startswith(DECLARED):
        vocab = declared_vocab(name)
        if vocab is None or not 2 <= vocab <= 1 << 24:
            return (f"data.tokenizer: {name!r}: give declared:<vocab>:<name> with vocab in [2, 16777216] and a name, "
                    "e.g. declared:128256:meta-llama/Meta-Llama-3-8B")
        return None
    if name.startswith("bpe:"):
        vocab = bpe_vocab(name)
        if vocab is None or not 257 <= vocab <= 1 << 20:
            return f"data.tokenizer: {name!r}: give bpe:<vocab> with vocab in [257, 1048576], e.g. bpe:4096"
        return None
    if "://" in name:
        return None  # read (and its errors reported) when its size is taken
    path = Path(name).expanduser()
    if not path.is_absolute() and base_dir is not None and not path.exists():
        path = base_dir / path
    if not path.is_file():
        return f"data.tokenizer: {name} does not exist; give a tokenizer.json path or URL, 'bpe:<vocab>' or 'bytes'"
    return None


def follow_tokenizer(spec: LadderSpec) -> LadderSpec:
    """The spec with every run's default vocabulary set to the tokenizer's size (reads a tokenizer.json)."""
    if spec.data.tokenizer == "bytes":
        return spec
    from ladder.trainers.builtin.tokenizer import tokenizer_size

    try:
        size = tokenizer_size(spec.data.tokenizer)
    except ValueError as exc:  # an unreadable or malformed tokenizer file: its message names it
        raise SpecError([str(exc)]) from exc
    problems: list[str] = []

    def fix(run, where: str):
        vocab = run.model.vocab
        if isinstance(vocab, TokenizerVocab):
            return dataclasses.replace(run, model=dataclasses.replace(run.model, vocab=size))
        if isinstance(vocab, int) and vocab < size:
            problems.append(f"{where}.model.vocab: {vocab} is smaller than data.tokenizer's {size} tokens; raise it "
                            f"to at least {size} or leave it unset (the default follows the tokenizer's size)")
        return run

    rungs = tuple(fix(r, f"rungs[{i}]") for i, r in enumerate(spec.rungs))
    hero = fix(spec.hero, "hero") if spec.hero is not None else None
    targets = tuple(fix(t, f"targets[{i}]") for i, t in enumerate(spec.targets))
    isoflop = spec.isoflop
    if isoflop is not None:  # the models an IsoFLOP stage places its runs from
        family = tuple(fix(_Holder(m), f"isoflop.family[{i}]").model for i, m in enumerate(isoflop.family))
        isoflop = dataclasses.replace(isoflop, family=family)
    if problems:
        raise SpecError(problems)
    return dataclasses.replace(spec, rungs=rungs, hero=hero, targets=targets, isoflop=isoflop)


@dataclasses.dataclass(frozen=True)
class _Holder:
    """A bare model in the shape ``fix`` takes (a run with a ``model``)."""

    model: ModelSpec
