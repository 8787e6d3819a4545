"""Parameter and FLOP counts: the same numbers the fits use, re-exported from ladder.spec.

``ModelSpec.params_total / params_active / params_non_embedding / flops_per_token(seq_len)`` are the
single source of truth; ``count_params`` counts the arrays of a built model for the hand-count test.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from ladder.spec import ModelSpec


def params_total(model: ModelSpec) -> int:
    return model.params_total


def params_active(model: ModelSpec) -> int:
    return model.params_active


def params_non_embedding(model: ModelSpec) -> int:
    return model.params_non_embedding


def flops_per_token(model: ModelSpec, seq_len: int) -> float:
    """6 * (active non-embedding + output projection) + 12 * L * T * d (PaLM convention)."""
    return model.flops_per_token(seq_len)


def count_params(params: Mapping[str, np.ndarray], *, embedding_names: tuple[str, ...] = ("embed", "head")) -> dict:
    """Count the arrays of a flat parameter dict: total and non-embedding."""
    total = sum(int(np.prod(v.shape)) for v in params.values())
    emb = sum(int(np.prod(v.shape)) for k, v in params.items() if k.split(".")[0] in embedding_names)
    return {"params_total": total, "params_non_embedding": total - emb}
