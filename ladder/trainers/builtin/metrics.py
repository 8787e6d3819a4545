"""Metric files (JSON lines, truncated past a restored step on resume), spike detection, peak FLOP/s."""

from __future__ import annotations

import json
import math
import os
import time
from collections import deque
from pathlib import Path


def _clean(value):
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


class JsonlWriter:
    """Append-only JSON lines; on open, rows with ``step`` past ``keep_until`` are dropped."""

    def __init__(self, path: str | os.PathLike, keep_until: int | None = None):
        self.path = Path(path)
        self.rows_kept: list[dict] = []
        if self.path.exists():
            rows = read_jsonl(self.path)
            if keep_until is not None:
                rows = [r for r in rows if r.get("step", 0) <= keep_until]
            self.rows_kept = rows
            tmp = self.path.with_suffix(self.path.suffix + ".tmp")
            with tmp.open("w") as f:
                for r in rows:
                    f.write(json.dumps(r) + "\n")
            os.replace(tmp, self.path)
        self._f = self.path.open("a")

    def write(self, row: dict) -> None:
        self._f.write(json.dumps({k: _clean(v) for k, v in row.items()}) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


def read_jsonl(path: str | os.PathLike) -> list[dict]:
    rows = []
    p = Path(path)
    if not p.exists():
        return rows
    for line in p.read_text().splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a torn last line after SIGKILL
            break
    return rows


class SpikeDetector:
    """Flags a value far above its recent history: z-score over a window of past values.

    A spike is recorded when the value exceeds ``mean + z * std`` of the last ``window`` values and
    is at least ``min_ratio`` times their mean. ``size`` is value / mean (the multiple of normal).
    For slowly drifting series (the router-bias norm) the step-to-step *change* is tested instead.
    """

    def __init__(self, metric: str, *, window: int = 50, z: float = 6.0, min_ratio: float = 1.2,
                 on_diff: bool = False, warmup: int = 20):
        self.metric, self.window, self.z, self.min_ratio = metric, window, z, min_ratio
        self.on_diff, self.warmup = on_diff, warmup
        self.hist: deque[float] = deque(maxlen=window)
        self.prev: float | None = None

    def update(self, step: int, value: float) -> dict | None:
        if value is None or not math.isfinite(value):
            return None
        x = value
        if self.on_diff:
            x = abs(value - self.prev) if self.prev is not None else None
            self.prev = value
            if x is None:
                return None
        event = None
        if len(self.hist) >= self.warmup:
            n = len(self.hist)
            mean = sum(self.hist) / n
            std = math.sqrt(max(0.0, sum((h - mean) ** 2 for h in self.hist) / n))
            if x > mean + self.z * std and x >= self.min_ratio * max(mean, 1e-12):
                event = {"step": step, "event": "spike", "metric": self.metric, "value": value,
                         "baseline": mean, "size": x / max(mean, 1e-12), "z": (x - mean) / max(std, 1e-12)}
        self.hist.append(x)
        return event


_PEAK: dict[str, float] = {}


def measured_peak_flops(n: int = 1024, reps: int = 6, dtype: str = "float32") -> float:
    """Matmul FLOP/s of this backend with ``dtype`` operands (float32 accumulation), measured once per
    process and dtype (``LADDER_PEAK_FLOPS`` overrides): the denominator of a run's MFU."""
    env = os.environ.get("LADDER_PEAK_FLOPS")
    if env:
        return float(env)
    import jax
    import jax.numpy as jnp

    key = f"{jax.default_backend()}:{dtype}"
    if key in _PEAK:
        return _PEAK[key]
    a = jnp.ones((n, n), dtype) * 0.5
    f = jax.jit(lambda x: jnp.matmul(x, x, preferred_element_type=jnp.float32))
    f(a).block_until_ready()
    best = math.inf
    for _ in range(reps):
        t = time.perf_counter()
        f(a).block_until_ready()
        best = min(best, time.perf_counter() - t)
    _PEAK[key] = 2.0 * n**3 / best
    return _PEAK[key]
