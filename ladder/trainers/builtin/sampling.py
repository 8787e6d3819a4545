"""Sampling without replacement: which window of which domain fills each row of a batch.

Row ``i`` of step ``s`` is the global draw ``g = s * batch + i``. Draws come in blocks of ``BLOCK``:
each block holds each domain's share of the mixture weights (largest remainders), in a seeded order,
so how many draws a domain had before ``g`` is a closed form, and a batch is a pure function of
(seed, step): a resumed run reads the same windows. A domain's ``k``-th draw is window
``perm_e(k mod n)`` of its ``n`` windows in epoch ``e = k // n``, ``perm_e`` a seeded permutation
(a Feistel network over the next power of four, cycle-walked into ``[0, n)``): every window once
per epoch, in constant memory whatever the corpus size.
"""

from __future__ import annotations

import functools

import numpy as np

BLOCK = 4096
_ROUNDS = 4


def block_counts(weights: np.ndarray, block: int = BLOCK) -> np.ndarray:
    """Each domain's draws per block: ``weights * block`` rounded by largest remainders (sums to block)."""
    w = np.asarray(weights, dtype=np.float64)
    exact = w / w.sum() * block
    counts = np.floor(exact).astype(np.int64)
    short = block - int(counts.sum())
    if short:
        counts[np.argsort(-(exact - counts), kind="stable")[:short]] += 1
    return counts


def _mix(x: np.ndarray, key: np.uint64, mask: np.uint64) -> np.ndarray:
    h = (x ^ key) * np.uint64(0x9E3779B97F4A7C15)  # wraps mod 2**64 (the caller silences the overflow)
    h ^= h >> np.uint64(29)
    h *= np.uint64(0xBF58476D1CE4E5B9)
    h ^= h >> np.uint64(32)
    return h & mask


@functools.lru_cache(maxsize=256)
def _round_keys(key: tuple[int, ...]) -> np.ndarray:
    return np.random.default_rng(list(key)).integers(0, 2**63, size=_ROUNDS, dtype=np.uint64)


def permute(r: np.ndarray, n: int, key: tuple[int, ...]) -> np.ndarray:
    """A seeded bijection of ``[0, n)`` applied to ``r``."""
    r = np.asarray(r, dtype=np.uint64)
    if n <= 1:
        return np.zeros(r.shape, np.int64)
    bits = max(2, int(n - 1).bit_length())
    bits += bits % 2
    half = np.uint64(bits // 2)
    mask = np.uint64((1 << (bits // 2)) - 1)
    keys = _round_keys(tuple(int(k) for k in key))
    out = r.copy()
    todo = np.ones(r.shape, bool)
    with np.errstate(over="ignore"):
        while todo.any():
            x = out[todo]
            left, right = x >> half, x & mask
            for k in keys:
                left, right = right, left ^ _mix(right, k, mask)
            out[todo] = (left << half) | right
            todo = out >= np.uint64(n)
    return out.astype(np.int64)


class Sampler:
    """Draw ``g`` -> (domain, window) for domains of ``n_windows`` windows mixed by ``weights``."""

    def __init__(self, seed: int, weights: np.ndarray, n_windows: list[int], block: int = BLOCK):
        self.seed, self.block = int(seed), int(block)
        self.n_windows = [int(n) for n in n_windows]
        self.counts = block_counts(weights, self.block)
        self._cache: dict[int, tuple[np.ndarray, np.ndarray]] = {}

    def _block(self, b: int) -> tuple[np.ndarray, np.ndarray]:
        """(domain of each draw in block b, how many draws of that domain precede it in the block)."""
        hit = self._cache.get(b)
        if hit is not None:
            return hit
        order = np.repeat(np.arange(len(self.counts)), self.counts)
        order = np.random.default_rng([self.seed, 0x5A3, b]).permutation(order)
        rank = np.empty(order.size, np.int64)
        for d in range(len(self.counts)):
            where = order == d
            rank[where] = np.arange(int(where.sum()))
        if len(self._cache) > 8:
            self._cache.clear()
        self._cache[b] = (order, rank)
        return order, rank

    def draws(self, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """(domain, that domain's draw number k) of each global draw ``g``."""
        g = np.asarray(g, dtype=np.int64)
        dom, k = np.empty_like(g), np.empty_like(g)
        for b in np.unique(g // self.block):
            sel = g // self.block == b
            order, rank = self._block(int(b))
            j = g[sel] % self.block
            dom[sel] = order[j]
            k[sel] = int(b) * self.counts[order[j]] + rank[j]
        return dom, k

    def windows(self, d: int, k: np.ndarray) -> np.ndarray:
        """The windows of domain ``d`` its draws ``k`` read: a fresh permutation each epoch."""
        n = self.n_windows[d]
        k = np.asarray(k, dtype=np.int64)
        out = np.empty_like(k)
        epoch = k // n
        for e in np.unique(epoch):
            sel = epoch == e
            out[sel] = permute(k[sel] % n, n, (self.seed, 0xE9, d, int(e)))
        return out

    def drawn(self, n_draws: int) -> list[int]:
        """How many of the first ``n_draws`` draws fell to each domain."""
        full, part = divmod(int(n_draws), self.block)
        out = []
        for d in range(len(self.n_windows)):
            drawn = full * int(self.counts[d])
            if part:
                order, _ = self._block(full)
                drawn += int((order[:part] == d).sum())
            out.append(drawn)
        return out

    def epochs(self, n_draws: int) -> list[float]:
        """How many passes over each domain's windows the first ``n_draws`` draws make."""
        return [c / n if n else 0.0 for c, n in zip(self.drawn(n_draws), self.n_windows, strict=True)]


class SwitchedSampler:
    """A mixture switched at global draw ``g0`` (a data-mix change mid-run): draws before it are
    ``before``'s, draws from it on ``after``'s counted from the switch, and each domain's draw numbers
    carry on from where ``before`` left them, so its windows continue the same per-epoch
    permutation (none read twice within an epoch across the switch). Still a pure function of
    (seed, step): a resumed run reads the same windows."""

    def __init__(self, before: Sampler, after: Sampler, g0: int):
        self.before, self.after, self.g0 = before, after, int(g0)
        self.n_windows = before.n_windows
        self.drawn_before = np.array(before.drawn(self.g0), dtype=np.int64)  # each domain's draws before g0

    def draws(self, g: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        g = np.asarray(g, dtype=np.int64)
        dom, k = np.empty_like(g), np.empty_like(g)
        early = g < self.g0
        if early.any():
            dom[early], k[early] = self.before.draws(g[early])
        if (~early).any():
            d, k_after = self.after.draws(g[~early] - self.g0)
            dom[~early], k[~early] = d, self.drawn_before[d] + k_after
        return dom, k

    def windows(self, d: int, k: np.ndarray) -> np.ndarray:
        return self.before.windows(d, k)

    def epochs(self, n_draws: int) -> list[float]:
        n_draws = int(n_draws)
        if n_draws <= self.g0:
            return self.before.epochs(n_draws)
        drawn = self.drawn_before + np.array(self.after.drawn(n_draws - self.g0), dtype=np.int64)
        return [int(c) / n if n else 0.0 for c, n in zip(drawn, self.n_windows, strict=True)]

