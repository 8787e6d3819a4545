"""Training and eval data read from token shards (ladder.train.shards) through np.memmap.

A process maps its shards instead of loading the corpus: its own memory holds the batch being built,
never the corpus (the mapped pages are the OS's page cache). Training windows are drawn without
replacement (ladder.train.sampling); the evals read the held-out split's windows spread evenly (or its
first ones, ``data.eval_sample = "head"``), as the in-memory Mixture does.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from ladder.spec import DataSpec
from ladder.train.data import DataError, Mixture
from ladder.train.sampling import Sampler
from ladder.train.shards import Split, open_split


@dataclass
class ShardDomain:
    name: str
    weight: float
    train: Split
    heldout: Split


class ShardMixture:
    """Seeded batches and fixed eval windows from each domain's token shards (``shard_dirs``: domain
    name -> its tokenize step's folder)."""

    def __init__(self, data: DataSpec, seq_len: int, seed: int, shard_dirs: Mapping[str, str]):
        self.spec = data
        self.seq_len = int(seq_len)
        self.seed = int(seed)
        self.domains: list[ShardDomain] = []
        self.vocab_size = 0
        for dom in data.domains:
            if dom.name not in shard_dirs:
                raise DataError(f"data.domains[{dom.name}]: no token shards for it; run the ladder (ladder submit) "
                                "so its tokenize step writes them")
            label = f"tokenize {dom.name}"
            train, manifest = open_split(shard_dirs[dom.name], "train", self.seq_len, label)
            held, _ = open_split(shard_dirs[dom.name], "heldout", self.seq_len, label)
            self.vocab_size = max(self.vocab_size, int(manifest["tokenizer"]["vocab_size"]))
            for split, part in (("train", train), ("held-out", held)):
                if part.n_windows < 1:
                    raise DataError(f"data.domains[{dom.name}]: its {split} split has {part.n_tokens} tokens, fewer "
                                    f"than one sequence of {self.seq_len + 1} in a shard; add text or lower seq_len")
            self.domains.append(ShardDomain(dom.name, float(dom.weight), train, held))
        w = np.array([d.weight for d in self.domains], dtype=np.float64)
        self.weights = w / w.sum()
        self.sampler = Sampler(self.seed, self.weights, [d.train.n_windows for d in self.domains])

    def batch(self, step: int, batch_size: int, rows: slice | None = None) -> np.ndarray:
        """(batch_size, seq_len + 1) int32 tokens for optimizer step ``step`` (0-based); with ``rows``, only
        those rows of it (a process of a gang loads its own slice of every batch)."""
        g = int(step) * batch_size + np.arange(batch_size, dtype=np.int64)
        if rows is not None:
            g = g[rows]
        dom, k = self.sampler.draws(g)
        out = np.empty((len(g), self.seq_len + 1), dtype=np.int32)
        for d in np.unique(dom):
            picked = np.flatnonzero(dom == d)
            out[picked] = self.domains[d].train.windows(self.sampler.windows(int(d), k[picked]))
        return out

    def batches(self, start: int, count: int, batch_size: int, rows: slice | None = None) -> np.ndarray:
        return np.stack([self.batch(start + i, batch_size, rows) for i in range(count)])

    def epochs_seen(self, steps: int, batch_size: int) -> dict[str, float]:
        """Passes over each domain's training windows that ``steps`` steps of ``batch_size`` make."""
        return {d.name: e for d, e in zip(self.domains, self.sampler.epochs(int(steps) * batch_size), strict=True)}

    def _eval_index(self, domain: int, eval_tokens: int) -> np.ndarray:
        held = self.domains[domain].heldout
        n = max(1, min(math.ceil(eval_tokens / self.seq_len), held.n_windows))
        if self.spec.eval_sample == "head":
            return np.arange(n)
        return np.linspace(0, held.n_windows - 1, n).astype(np.int64)

    def eval_windows(self, domain: int, eval_tokens: int) -> np.ndarray:
        """(n, seq_len + 1) windows of a domain's held-out split, n = eval_tokens / seq_len (at most all)."""
        return self.domains[domain].heldout.windows(self._eval_index(domain, eval_tokens))

    def eval_bytes(self, domain: int, eval_tokens: int) -> int:
        """UTF-8 bytes the eval windows' predicted tokens stand for (bits per byte's denominator)."""
        return self.domains[domain].heldout.target_bytes(self._eval_index(domain, eval_tokens))


def open_mixture(data: DataSpec, seq_len: int, seed: int, shard_dirs=None):
    """The run's data: token shards (ladder.train.stream) when its tokenize steps wrote them, else the
    ``bytes`` tokenizer's in-memory Mixture."""
    if shard_dirs:
        return ShardMixture(data, seq_len, seed, shard_dirs)
    if data.tokenizer != "bytes":
        raise DataError(f"data.tokenizer: {data.tokenizer} trains from token shards; run the ladder (ladder submit) "
                        "so its tokenize steps write them")
    return Mixture(data, seq_len, seed)
