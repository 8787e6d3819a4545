"""Data parallelism over the local devices of a node, through jax.sharding.

A run spans ``resources.devices`` local devices (0: the most that divide its batch) as a one-axis :class:`Mesh` named
``"data"``. Every batch is split along its batch dimension. Parameters, router bias and optimizer
state are either replicated on every device (``resources.parallel = "replicated"``) or FSDP-sharded
(``"fsdp"``): a leaf of at least :data:`FSDP_MIN_SIZE` elements is split along its largest dimension
that the device count divides, anything smaller or indivisible stays replicated. The jitted step
is given these shardings as ``in_shardings``/``out_shardings`` and XLA's SPMD partitioner inserts
the collectives (gradient all-reduce; for FSDP, all-gathers of weights and reduce-scatters of
gradients), so the model code is the same on one CPU, a GPU node or a TPU host.

On one device :func:`plan` returns None and the trainer takes its single-device path untouched, so
one-device numerics stay bit-identical to a trainer without this module.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ladder.spec import RungSpec, SpecError

DATA = "data"
# Below this many elements a leaf costs less to replicate than to gather on every use.
FSDP_MIN_SIZE = 1024


def fsdp_spec(shape: tuple[int, ...], n: int, min_size: int = FSDP_MIN_SIZE) -> P:
    """PartitionSpec sharding ``shape`` over ``n`` devices along its largest divisible dimension."""
    if n <= 1 or int(np.prod(shape, dtype=np.int64)) < min_size:
        return P()
    dims = [i for i, size in enumerate(shape) if size % n == 0 and size >= n]
    if not dims:
        return P()
    best = max(dims, key=lambda i: (shape[i], -i))
    return P(*[DATA if i == best else None for i in range(len(shape))])


@dataclass(frozen=True)
class Layout:
    """Where every piece of the train state lives on the mesh, and the jit wrappers that keep it there."""

    mesh: Mesh
    mode: str
    params: dict[str, NamedSharding]
    bias: dict[str, NamedSharding]
    opt: Any  # a pytree of NamedSharding shaped like the optimizer state
    batches: NamedSharding  # a chunk of batches (steps, batch, seq + 1): split along batch
    rows: NamedSharding  # one batch of rows (batch, ...): split along batch
    replicated: NamedSharding

    @property
    def n(self) -> int:
        return int(self.mesh.size)

    def place(self, params: dict, bias: dict, opt_state) -> tuple[dict, dict, Any]:
        return (
            {k: jax.device_put(v, self.params[k]) for k, v in params.items()},
            {k: jax.device_put(v, self.bias[k]) for k, v in bias.items()},
            jax.tree.map(jax.device_put, opt_state, self.opt),
        )

    def jit_chunk(self, fn):
        """``fn(params, bias, opt_state, batches, lrs, n) -> (params, bias, opt_state, metrics)`` on the mesh."""
        state = (self.params, self.bias, self.opt)
        return jax.jit(fn, in_shardings=(*state, self.batches, self.replicated, self.replicated),
                       out_shardings=(*state, self.replicated))

    def jit_eval(self, fn):
        """``fn(params, bias, windows, weights) -> scalars`` on the mesh."""
        return jax.jit(fn, in_shardings=(self.params, self.bias, self.rows, self.rows),
                       out_shardings=self.replicated)


def device_count(rung: RungSpec) -> int:
    """The number of local devices ``rung`` trains on; a SpecError (one line) when that cannot work.

    ``devices`` 0 takes the most local devices the batch splits over evenly: a batch of 14 on a
    4-device node trains on 2.
    """
    local = jax.local_devices()
    if not rung.resources.devices:
        return max(n for n in range(1, len(local) + 1) if rung.batch_size % n == 0)
    want = rung.resources.devices
    where = f"{rung.name}.resources.devices"
    if want > len(local):
        raise SpecError([f"{where}: {want} devices asked for but this node has {len(local)} "
                         f"({local[0].platform}); lower it, or set 0 for as many as the batch divides over"])
    if want > 1 and rung.batch_size % want:
        raise SpecError([f"{where}: batch_size {rung.batch_size} does not split over {want} devices; make "
                         f"batch_size a multiple of {want} or set resources.devices to a divisor of it"])
    return want


def plan(rung: RungSpec, params: dict, bias: dict, opt_state) -> Layout | None:
    """The layout of ``rung``'s train state on its devices, or None when it runs on one device."""
    n = device_count(rung)
    if n == 1:
        return None
    mode = rung.resources.parallel
    mesh = Mesh(np.array(jax.local_devices()[:n]), (DATA,))
    replicated = NamedSharding(mesh, P())

    def sharding(x) -> NamedSharding:
        return NamedSharding(mesh, fsdp_spec(np.shape(x), n)) if mode == "fsdp" else replicated

    p_sh = {k: sharding(v) for k, v in params.items()}
    b_sh = {k: sharding(v) for k, v in bias.items()}

    def opt_sharding(path, leaf) -> NamedSharding:
        # Adam's moments are dicts keyed by parameter name: they follow their parameter's sharding.
        for key in reversed(path):
            name = getattr(key, "key", None)
            if isinstance(name, str) and name in params and np.shape(leaf) == np.shape(params[name]):
                return p_sh[name]
        return replicated

    o_sh = jax.tree_util.tree_map_with_path(opt_sharding, opt_state)
    return Layout(mesh=mesh, mode=mode, params=p_sh, bias=b_sh, opt=o_sh,
                  batches=NamedSharding(mesh, P(None, DATA)), rows=NamedSharding(mesh, P(DATA)),
                  replicated=replicated)
