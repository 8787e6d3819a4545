"""Data, FSDP and expert parallelism over the devices of a run, through jax.sharding.

A run spans ``resources.devices`` local devices per process (0: the most that divide its batch) times
``resources.processes`` processes, as a (data, fsdp, expert) :class:`Mesh` (:mod:`ladder.trainers.builtin.axes`).
Every batch is split along its batch dimension over all three axes. Parameters, router bias and optimizer
state are replicated (``resources.parallel = "replicated"``: the devices lie along ``data``) or FSDP-sharded
(``"fsdp"``: along ``fsdp``, each leaf split along its "embed" dimension), and a MoE's experts split over
``resources.expert_parallel`` devices; each leaf's sharding comes from its logical axes and the rules.
The jitted step is given these shardings as ``in_shardings``/``out_shardings`` and XLA's SPMD partitioner
inserts the collectives (gradient all-reduce; for FSDP, all-gathers of weights and reduce-scatters of
gradients), so the model code is the same on one CPU, a GPU node or a TPU host.

On one device :func:`plan` returns None and the trainer takes its single-device path untouched, so
one-device numerics stay bit-identical to a trainer without this module.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from typing import Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

from ladder.spec import RungSpec, SpecError
from ladder.trainers.builtin import axes

DATA = axes.DATA


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
    rule: dict = field(default_factory=dict)  # logical axis -> mesh axes (ladder.trainers.builtin.axes.rules)

    @property
    def n(self) -> int:
        return int(self.mesh.size)

    def place(self, params: dict, bias: dict, opt_state) -> tuple[dict, dict, Any]:
        """Put host (or single-device) state onto the mesh; each device receives only its shards."""
        return (
            {k: _put(v, self.params[k]) for k, v in params.items()},
            {k: _put(v, self.bias[k]) for k, v in bias.items()},
            jax.tree.map(_put, opt_state, self.opt),
        )

    def init(self, params: dict, bias: dict, opt) -> tuple[dict, dict, Any]:
        """The initial state on the mesh from host (numpy) parameters: each device receives only its
        shards of them, and the optimizer state is made by a program jitted with ``out_shardings``, so no
        device ever holds the whole state."""
        p, b = ({k: _put(v, shard[k]) for k, v in tree.items()} for tree, shard in ((params, self.params),
                                                                                    (bias, self.bias)))
        o = jax.jit(opt.init, in_shardings=(self.params,), out_shardings=self.opt)(p)
        return p, b, o

    @property
    def multiprocess(self) -> bool:
        return jax.process_count() > 1

    def process_rows(self, batch: int) -> slice:
        """The rows of a ``batch``-row batch that this process's devices hold (all of them in one process)."""
        if not self.multiprocess:
            return slice(0, batch)
        index = self.rows.addressable_devices_indices_map((batch,)).values()
        starts = [i[0].start or 0 for i in index]
        stops = [batch if i[0].stop is None else i[0].stop for i in index]
        return slice(min(starts), max(stops))

    def global_batches(self, local_KxbxL: np.ndarray, batch: int):
        """A chunk of batches from this process's rows of each (numpy in one process: jit places it)."""
        if not self.multiprocess:
            return local_KxbxL
        shape = (local_KxbxL.shape[0], batch, *local_KxbxL.shape[2:])
        return jax.make_array_from_process_local_data(self.batches, local_KxbxL, shape)

    def global_rows(self, rows_BxX: np.ndarray):
        """Rows every process holds whole (eval windows) as a global array of which each process gives its own."""
        if not self.multiprocess:
            return rows_BxX
        mine = rows_BxX[self.process_rows(rows_BxX.shape[0])]
        return jax.make_array_from_process_local_data(self.rows, mine, rows_BxX.shape)

    def _traced(self, fn):
        @functools.wraps(fn)  # the same program name (and persistent-cache key) as before the rules
        def under_mesh(*args):
            with axes.active(self.mesh, self.rule):
                return fn(*args)
        return under_mesh

    def jit_chunk(self, fn):
        """``fn(params, bias, opt_state, batches, lrs, n) -> (params, bias, opt_state, metrics)`` on the mesh."""
        state = (self.params, self.bias, self.opt)
        return jax.jit(self._traced(fn), in_shardings=(*state, self.batches, self.replicated, self.replicated),
                       out_shardings=(*state, self.replicated))

    def jit_eval(self, fn):
        """``fn(params, bias, windows, weights) -> scalars`` on the mesh."""
        return jax.jit(self._traced(fn), in_shardings=(self.params, self.bias, self.rows, self.rows),
                       out_shardings=self.replicated)


def _put(value, sharding: NamedSharding) -> jax.Array:
    """``value`` (host or device) as a global array of ``sharding``: each process builds only the shards of
    its own devices, from the same host value (every process draws the same initial state)."""
    if isinstance(value, jax.Array) and jax.process_count() == 1:
        return jax.device_put(value, sharding)
    host = np.asarray(value)
    return jax.make_array_from_callback(host.shape, sharding, lambda index: host[index])


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
    """The layout of ``rung``'s train state on its devices, or None when it runs on one device.

    ``opt_state`` may be abstract (``jax.eval_shape(opt.init, params)``): only shapes are read. Every
    leaf's sharding comes from its logical axes (:mod:`ladder.trainers.builtin.axes`) and the mode's rules.
    """
    local = device_count(rung)
    n = local * jax.process_count()
    if n == 1:
        return None
    mode = rung.resources.parallel
    devices = jax.devices()[:n] if jax.process_count() > 1 else jax.local_devices()[:n]
    expert = rung.resources.expert_parallel if rung.model.is_moe else 1
    if n % expert:
        raise SpecError([f"{rung.name}.resources.expert_parallel: {expert} does not divide the run's {n} devices; "
                         "set it to a divisor of them"])
    mesh = axes.make_mesh(devices, mode, expert)
    rule = axes.rules(mode)
    mesh_shape = dict(mesh.shape)
    replicated = NamedSharding(mesh, P())

    def sharding(name: str, x) -> NamedSharding:
        shape = tuple(np.shape(x))
        return NamedSharding(mesh, axes.spec_for(shape, axes.param_axes(name, len(shape)), rule, mesh_shape))

    p_sh = {k: sharding(k, v) for k, v in params.items()}
    b_sh = {k: sharding(k, v) for k, v in bias.items()}

    def opt_sharding(path, leaf) -> NamedSharding:
        # Adam's moments are dicts keyed by parameter name: they follow their parameter's sharding.
        for key in reversed(path):
            name = getattr(key, "key", None)
            if isinstance(name, str) and name in params and np.shape(leaf) == np.shape(params[name]):
                return p_sh[name]
        return replicated

    o_sh = jax.tree_util.tree_map_with_path(opt_sharding, opt_state)
    batch = axes.spec_for((rung.batch_size,), ("batch",), rule, mesh_shape, min_size=0)
    return Layout(mesh=mesh, mode=mode, params=p_sh, bias=b_sh, opt=o_sh,
                  batches=NamedSharding(mesh, P(None, *batch)), rows=NamedSharding(mesh, batch),
                  replicated=replicated, rule=rule)
