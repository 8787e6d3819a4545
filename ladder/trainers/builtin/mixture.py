"""A run's batches and eval windows from each domain's splits: one sampler and one window layout for every
tokenizer, whether the splits are token shards mapped from disk (ladder.trainers.builtin.stream) or the ``bytes``
tokenizer's streams held in memory (ladder.trainers.builtin.data).

Training windows are drawn without replacement (ladder.trainers.builtin.sampling): a seeded permutation of each
domain's windows per epoch, a batch a pure function of (seed, step). Repetition is then the same
function of tokens/corpus at every rung; drawing window starts with replacement left a third of the
corpus unseen at one pass, and a larger rung saw a larger share of it. The evals read the held-out
split's windows spread evenly over it (or its first ones, ``data.eval_sample = "head"``).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ladder.spec import DataSpec
from ladder.trainers.builtin.sampling import Sampler, SwitchedSampler
from ladder.trainers.builtin.shards import Split


@dataclass
class SplitDomain:
    name: str
    weight: float
    train: Split
    heldout: Split


class WindowMixture:
    """Seeded batches from a weighted mixture of domains, and fixed eval windows of their held-out splits."""

    def __init__(self, data: DataSpec, seq_len: int, seed: int, domains: list[SplitDomain], vocab_size: int):
        self.spec = data
        self.seq_len = int(seq_len)
        self.seed = int(seed)
        self.domains = domains
        self.vocab_size = int(vocab_size)
        w = np.array([d.weight for d in self.domains], dtype=np.float64)
        self.weights = w / w.sum()
        self.sampler = Sampler(self.seed, self.weights, [d.train.n_windows for d in self.domains])

    def switch(self, step: int, batch_size: int, weights) -> None:
        """From optimizer step ``step`` on, draw with ``weights`` (domain name -> weight; a domain not named
        gets 0): a data-mix change mid-run, each domain's windows continuing where they were."""
        w = np.array([float(weights.get(d.name, 0.0)) for d in self.domains], dtype=np.float64)
        after = Sampler(self.seed, w / w.sum(), [d.train.n_windows for d in self.domains])
        self.sampler = SwitchedSampler(self.sampler, after, int(step) * int(batch_size))

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
        """(n, seq_len + 1) windows of a domain's held-out split, n = eval_tokens / seq_len (at most all).

        "spread" spaces them evenly over the whole split; "head" takes its first n, which is a handful of
        documents (32 KB of code was 8 of the 71 held-out files), and biased the laws fitted to them
        (see experiments/tiny.py)."""
        return self.domains[domain].heldout.windows(self._eval_index(domain, eval_tokens))

    def eval_bytes(self, domain: int, eval_tokens: int) -> int:
        """UTF-8 bytes the eval windows' predicted tokens stand for (bits per byte's denominator)."""
        return self.domains[domain].heldout.target_bytes(self._eval_index(domain, eval_tokens))
