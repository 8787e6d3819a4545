"""Where a run starts: its state drawn fresh, or restored from its newest valid checkpoint.

The parameters are drawn on the host (``build(..., host=True)``); a sharded run places each device's shards
only (``Layout.init``, ``Layout.place``), so no device ever holds the whole state. On one device the arrays
are plain ``jnp`` arrays, exactly as the single-device path always made them (bit-identical numerics).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np

from ladder.trainers.builtin.checkpoint import Checkpointer
from ladder.trainers.builtin.mirror import OutputDir
from ladder.trainers.builtin.outputs import TrainConfigMismatch
from ladder.trainers.builtin.parallel import Layout


@dataclass(frozen=True)
class Start:
    """The state a run goes on from: its step (0 when fresh), arrays placed, and the wall time already spent."""

    step: int
    params: dict[str, Any]
    bias: dict[str, Any]
    opt_state: Any
    wall_s: float


def fresh(fm, opt, layout: Layout | None) -> tuple[dict, dict, Any]:
    """(params, bias, optimizer state) of a new run, placed on the run's devices."""
    if layout is not None:
        return layout.init(fm.params, fm.bias, opt)
    params = jax.tree.map(jnp.asarray, fm.params)
    return params, jax.tree.map(jnp.asarray, fm.bias), opt.init(params)


def start(name: str, seed: int, fm, opt, layout: Layout | None, ckpt: Checkpointer, output: OutputDir) -> Start:
    """The run's newest valid checkpoint restored and placed (a remote root's fetched one at a time until one
    reads whole), else a fresh state. A checkpoint trained with another seed is refused."""
    params, bias, opt_state = fresh(fm, opt, layout)
    meta0 = {"step": 0, "seed": 0, "wall_s": 0.0}
    restored = ckpt.restore_latest(params, bias, opt_state, meta0)
    while restored is None and output.fetch_checkpoint():  # a URL's newest was unreadable: try the next
        restored = ckpt.restore_latest(params, bias, opt_state, meta0)
    if restored is None:
        return Start(0, params, bias, opt_state, 0.0)
    step, params, bias, opt_state, meta = restored
    if int(np.asarray(meta["seed"])) != seed:
        raise TrainConfigMismatch(f"{output.url or output.local}: its checkpoint at step {step} was trained with seed "
                                  f"{int(np.asarray(meta['seed']))}, this run has seed {seed}; "
                                  "train into another directory or remove it")
    output.checkpoint(ckpt.max_to_keep)  # a corrupt checkpoint was moved aside: the URL's copy goes too
    if layout is not None:
        params, bias, opt_state = layout.place(params, bias, opt_state)
    else:
        params, bias, opt_state = jax.tree.map(jnp.asarray, (params, bias, opt_state))
    print(f"[ladder.train] {name}: resumed from step {step}", flush=True)
    return Start(step, params, bias, opt_state, float(meta["wall_s"]))
