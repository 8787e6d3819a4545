"""Initial parameters drawn on the host (numpy), one generator per model seeded by the run's seed.

Drawing each weight with ``jax.random`` compiles a threefry program per weight shape, plus one per
scaling and per constant: about 30 small XLA compiles for a 2-layer MoE, 13-16 s of a cold start
here against 0.1-0.25 s with numpy (measured on the smoke ladder's four rung shapes under the same
load). A new shape is the common case on a ladder: every rung has its own. The draws are
deterministic in the seed and the modules' construction order, and on any CPU (numpy's generator
is scalar code, no SIMD dispatch).
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
import numpy as np

STD = 0.02  # GPT-2's: every matrix; residual outputs are further divided by sqrt(2 * n_layers)


def residual_std(n_layers: int) -> float:
    """The std of a matrix writing into the residual stream (attention and MLP outputs)."""
    return STD / math.sqrt(2 * n_layers)


class HostInit:
    """What the modules draw their weights from (in place of ``nnx.Rngs``)."""

    def __init__(self, seed: int, *, host: bool = False):
        """``host``: keep the draws as numpy arrays (a sharded run places each device's shards from them, so
        no device ever holds a whole weight); otherwise they go to the default device as before."""
        self.host = host
        # a spawn key: numpy pads the entropy before it, so no (seed, step) of the data's batches collides
        self._rng = np.random.default_rng(np.random.SeedSequence(int(seed), spawn_key=(0x1A2D,)))

    def normal(self, shape: tuple[int, ...], std: float = STD) -> jax.Array | np.ndarray:
        draw = self._rng.standard_normal(shape, dtype=np.float32) * np.float32(std)
        return draw if self.host else jnp.asarray(draw)


def ones(shape: tuple[int, ...]) -> jax.Array:
    return jnp.asarray(np.ones(shape, np.float32))


def zeros(shape: tuple[int, ...]) -> jax.Array:
    return jnp.asarray(np.zeros(shape, np.float32))
