"""Logical axis names for every parameter and activation, and the rules that map them onto mesh axes.

MaxText and Levanter keep the model's code in *logical* names ("embed", "mlp", "expert", "batch") and
map them to the mesh's physical axes by a table of rules, so a layout change is a rules change, not a
model change. Here the mesh has three axes, always in this order: ``data`` (pure data parallelism:
parameters replicated), ``fsdp`` (data parallelism whose parameters and optimizer state are sharded
along their "embed" dimension) and ``expert`` (a MoE's experts split over devices; the batch is split
over it too, as in MaxText). A dimension whose mesh axes do not divide it, or a leaf under
:data:`MIN_SHARDED_SIZE` elements, stays replicated: gathering a norm's scale on every use costs more
than keeping it.

Activations are constrained at block boundaries (:func:`constrain`) only while a mesh is active
(:func:`active`), so the one-device path traces exactly as before.
"""

from __future__ import annotations

import contextlib
import contextvars
import re
from collections.abc import Iterator, Mapping

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding
from jax.sharding import PartitionSpec as P

DATA, FSDP, EXPERT = "data", "fsdp", "expert"
MESH_AXES = (DATA, FSDP, EXPERT)
# Below this many elements a leaf costs less to replicate than to gather on every use.
MIN_SHARDED_SIZE = 1024

# Flat parameter name (regex, first match wins) -> one logical name per dimension.
PARAM_AXES: tuple[tuple[str, tuple[str | None, ...]], ...] = (
    (r"^embed$", ("vocab", "embed")),
    (r"^head$", ("embed", "vocab")),
    (r"\.attn\.wqkv$", ("embed", "qkv")),
    (r"\.attn\.wo$", ("heads", "embed")),
    (r"\.mlp\.router$", ("embed", "expert")),
    (r"\.mlp\.w13$", ("embed", "mlp")),  # dense SwiGLU (d, 2f); a MoE's (E, d, 2f) is matched by rank below
    (r"\.mlp\.w2$", ("mlp", "embed")),
    (r"\.mlp\.latent_in$", ("embed", "latent")),
    (r"\.mlp\.latent_out$", ("latent", "embed")),
    (r"\.mlp\.shared_w13$", ("embed", "mlp")),
    (r"\.mlp\.shared_w2$", ("mlp", "embed")),
    (r"scale$", ("norm",)),
)
EXPERT_AXES = {"w13": ("expert", "embed", "mlp"), "w2": ("expert", "mlp", "embed")}

# Activation logical names used by the model.
BATCH_ACT = ("batch", None, None)  # (B, T, d) at every block boundary


def param_axes(name: str, ndim: int) -> tuple[str | None, ...]:
    """The logical axes of parameter ``name`` (a flat name such as ``layers.0.mlp.w13``)."""
    last = name.rsplit(".", 1)[-1]
    if ndim == 3 and last in EXPERT_AXES:
        return EXPERT_AXES[last]
    if name.endswith(".bias") and ndim == 1:  # the router bias: per expert, tiny
        return ("expert",)
    for pattern, axes in PARAM_AXES:
        if re.search(pattern, name) and len(axes) == ndim:
            return axes
    return (None,) * ndim


def rules(mode: str) -> dict[str, tuple[str, ...]]:
    """Logical name -> mesh axes, for ``resources.parallel`` mode ``replicated`` or ``fsdp``."""
    out = {"batch": (DATA, FSDP, EXPERT), "expert": (EXPERT,)}
    if mode == "fsdp":
        out["embed"] = (FSDP,)
    return out


def spec_for(shape: tuple[int, ...], axes: tuple[str | None, ...], rule: Mapping[str, tuple[str, ...]],
             mesh_shape: Mapping[str, int], min_size: int = MIN_SHARDED_SIZE) -> P:
    """The PartitionSpec of an array of ``shape`` with logical ``axes``: each dimension takes the mesh
    axes its rule names that have size > 1 and divide it; a mesh axis is used once at most."""
    if int(np.prod(shape, dtype=np.int64)) < min_size and "batch" not in axes:
        return P()
    used: set[str] = set()
    out: list = []
    for size, name in zip(shape, axes, strict=True):
        mesh_axes = [a for a in rule.get(name, ()) if a not in used and mesh_shape.get(a, 1) > 1] if name else []
        span = int(np.prod([mesh_shape[a] for a in mesh_axes], dtype=np.int64)) if mesh_axes else 1
        if not mesh_axes or size % span:
            out.append(None)
            continue
        used.update(mesh_axes)
        out.append(mesh_axes[0] if len(mesh_axes) == 1 else tuple(mesh_axes))
    while out and out[-1] is None:
        out.pop()
    return P(*out)


def make_mesh(devices, mode: str, expert: int = 1) -> Mesh:
    """A (data, fsdp, expert) mesh over ``devices``: every device not on the expert axis goes to ``fsdp``
    under FSDP and to ``data`` otherwise."""
    n = len(devices)
    if expert < 1 or n % expert:
        raise ValueError(f"expert parallelism {expert} does not divide {n} devices")
    rest = n // expert
    shape = (1, rest, expert) if mode == "fsdp" else (rest, 1, expert)
    return Mesh(np.array(devices).reshape(shape), MESH_AXES)


_ACTIVE: contextvars.ContextVar[tuple[Mesh, dict] | None] = contextvars.ContextVar("ladder_mesh", default=None)


@contextlib.contextmanager
def active(mesh: Mesh, rule: Mapping[str, tuple[str, ...]]) -> Iterator[None]:
    """While tracing under this, :func:`constrain` pins activations to ``mesh`` by ``rule``."""
    token = _ACTIVE.set((mesh, dict(rule)))
    try:
        yield
    finally:
        _ACTIVE.reset(token)


def constrain(x: jax.Array, axes: tuple[str | None, ...]) -> jax.Array:
    """``with_sharding_constraint`` of ``x`` by its logical ``axes``; ``x`` itself when no mesh is active."""
    current = _ACTIVE.get()
    if current is None:
        return x
    mesh, rule = current
    spec = spec_for(x.shape, axes, rule, dict(mesh.shape), min_size=0)
    return jax.lax.with_sharding_constraint(x, NamedSharding(mesh, spec))
