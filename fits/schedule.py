"""Learning-rate schedules as the whole-curve laws need them: per-step lr, its running sum, and
its decreases gathered into a modest number of "drop events".

A curve or schedule file gives lr at some steps (every step, or every logged step). Between given
steps lr is interpolated linearly; before the first given step it ramps linearly from 0 (a linear
warmup, the common case; warmup="constant" holds the first value instead).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Schedule:
    """eta[s] for s = 0..T, cum[s] = sum_{tau <= s} eta[tau], and drop events after the peak.

    events: positions k (step indices), sizes delta_k = sum of eta decreases in the block, and
    eta_k = eta at k. A block holds at most `block` consecutive steps, and a single-step drop
    stays at its own step (the position is the drop-weighted mean of the block).
    """

    eta: np.ndarray
    cum: np.ndarray
    peak: int
    ev_k: np.ndarray
    ev_delta: np.ndarray
    ev_eta: np.ndarray

    @property
    def last_step(self) -> int:
        return self.eta.size - 1


def expand(step, lr, *, warmup: str = "linear", until: int | None = None) -> np.ndarray:
    """Per-step lr for steps 0..max(step, until) from (step, lr) rows."""
    step = np.asarray(step, dtype=np.float64)
    lr = np.asarray(lr, dtype=np.float64)
    T = int(max(step.max(), until or 0))
    s = np.arange(T + 1, dtype=np.float64)
    if step[0] > 0:
        first = 0.0 if warmup == "linear" else lr[0]
        step = np.concatenate([[0.0], step])
        lr = np.concatenate([[first], lr])
    # Past the last given step the schedule is held at its last value (np.interp's default).
    return np.interp(s, step, lr)


def build(step, lr, *, warmup: str = "linear", block: int = 16, until: int | None = None) -> Schedule:
    eta = expand(step, lr, warmup=warmup, until=until)
    cum = np.cumsum(eta)
    # The loss-drop term covers the decay after the peak; the rise of a warmup is not a "drop".
    peak = int(np.argmax(eta))
    dec = np.zeros_like(eta)
    dec[1:] = np.maximum(eta[:-1] - eta[1:], 0.0)
    dec[: peak + 1] = 0.0
    idx = np.flatnonzero(dec > 0)
    if idx.size == 0:
        e = np.zeros(0)
        return Schedule(eta, cum, peak, e.astype(np.int64), e, e)
    # Blocks of at most `block` steps, broken wherever the decreasing steps are not contiguous,
    # so separate drops (e.g. two step decays) never merge.
    brk = np.concatenate([[0], np.flatnonzero((np.diff(idx) > 1) | (np.diff(idx // block) != 0)) + 1])
    sizes = np.add.reduceat(dec[idx], brk)
    pos = np.add.reduceat(dec[idx] * idx, brk) / sizes
    k = np.rint(pos).astype(np.int64)
    return Schedule(eta, cum, peak, k, sizes, eta[k])


def area_since(sched: Schedule, k: np.ndarray, t: np.ndarray) -> np.ndarray:
    """S_k(t) = sum_{tau=k..t} eta_tau for each (t, k) pair as a (len(t), len(k)) array, 0 where k > t."""
    t = np.asarray(t, dtype=np.int64)
    s = sched.cum[t][:, None] - np.where(k > 0, sched.cum[np.maximum(k - 1, 0)], 0.0)[None, :]
    return np.where(k[None, :] <= t[:, None], s, 0.0)
