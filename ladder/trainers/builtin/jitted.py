"""The jitted functions the training loop calls: up to ``k`` optimizer steps in one call, and one eval batch;
and how a span of steps is cut into such chunks.

A chunk's step count is a runtime argument (a ``fori_loop`` over the first n of k padded batches), so one
compile serves every chunk: with the count static, the single steps around each eval and checkpoint boundary
were a second program. On a 2-core CPU a d16 rung compiled two programs of 9 s each; with one, the rung
took 38.9 s instead of 44.0 s (its single compile 14.6 s that run: compile times vary by a third between runs).

Both take the model split into (graphdef, params, router bias) (:class:`ladder.trainers.builtin.model.Functional`);
with a :class:`ladder.trainers.builtin.parallel.Layout` they are jitted onto its data-parallel mesh, else with
plain ``jax.jit`` (one device, bit-identical to a trainer without the mesh).
"""

from __future__ import annotations

import os
from collections.abc import Mapping

import jax
import jax.numpy as jnp
import numpy as np
import optax

from ladder.trainers.builtin import axes
from ladder.trainers.builtin.model import Functional, cross_entropy, loss_fn
from ladder.trainers.builtin.moe import update_bias
from ladder.trainers.builtin.parallel import Layout

# A compiled call has a fixed cost besides its steps (`python -m bench calls` measures it), so many steps
# go in one call, enough that the cost is a small share of a hero's step time. Any count trains
# bit-identically (the chunks are cut at multiples of it, every step the same program).
DEFAULT_STEPS_PER_CALL = int(os.environ.get("LADDER_STEPS_PER_CALL", "64"))


def make_train_chunk(fm: Functional, opt: optax.GradientTransformation, mults: Mapping[str, float],
                     layout: Layout | None = None, steps_per_call: int = DEFAULT_STEPS_PER_CALL,
                     microbatches: int = 1):
    """``chunk(params, bias, opt_state, batches, lrs)`` runs ``len(lrs)`` (at most ``steps_per_call``) steps and
    returns the new state and each step's metrics (leading axis ``len(lrs)``). ``microbatches`` > 1 runs each
    step's batch as that many passes and averages their gradients (:func:`accumulated_grads`)."""
    spec = fm.spec
    bias_layers = [(name, int(name.split(".")[1])) for name in fm.bias_names]
    moe_layers = sorted({i for _, i in bias_layers})

    def one_step(carry, xs):
        params, bias, opt_state = carry
        batch, lr = xs
        (total, (ce, stats)), grads = accumulated_grads(fm, params, bias, batch, microbatches)
        updates, opt_state = opt.update(grads, opt_state, params)
        updates = {n: (-lr * mults[n]) * u for n, u in updates.items()}
        params = {n: params[n] + updates[n] for n in params}
        new_bias = dict(bias)
        for name, layer in bias_layers:
            s = jax.tree.map(jax.lax.stop_gradient, stats[moe_layers.index(layer)])
            new_bias[name] = update_bias(bias[name], s, spec.balancing, spec.bias_update_rate)
        m = {
            "loss": ce,
            "objective": total,
            "lr": lr,
            "grad_norm": optax.tree.norm(grads),
            "param_norm": optax.tree.norm(params),
            "update_norm": optax.tree.norm(updates),
        }
        if bias_layers:
            m["router_bias_norm"] = jnp.stack([jnp.linalg.norm(new_bias[n]) for n, _ in bias_layers])
            m["expert_load_max_over_mean"] = jnp.mean(jnp.stack([s["load_max_over_mean"] for s in stats]))
            m["drop_rate"] = jnp.mean(jnp.stack([s["drop_rate"] for s in stats]))
            m["routing_entropy"] = jnp.mean(jnp.stack([s["entropy"] for s in stats]))
            m["aux_loss"] = jnp.mean(jnp.stack([s["aux_loss"] for s in stats]))
        return (params, new_bias, opt_state), m

    def chunk(params, bias, opt_state, batches_KxBxL, lrs_K, n):
        carry = (params, bias, opt_state)
        row = jax.eval_shape(one_step, carry, (batches_KxBxL[0], lrs_K[0]))[1]
        metrics = jax.tree.map(lambda a: jnp.zeros((steps_per_call, *a.shape), a.dtype), row)

        def body(i, state):
            carry, metrics = state
            carry, m = one_step(carry, (batches_KxBxL[i], lrs_K[i]))
            return carry, jax.tree.map(lambda buf, v: buf.at[i].set(v), metrics, m)

        (params, bias, opt_state), metrics = jax.lax.fori_loop(0, n, body, (carry, metrics))
        return params, bias, opt_state, metrics

    jitted = layout.jit_chunk(chunk) if layout is not None else jax.jit(chunk)

    def run(params, bias, opt_state, batches, lrs, batch_rows: int | None = None):
        """``batches`` (n, rows, seq + 1); in a gang, this process's rows of batches of ``batch_rows`` rows."""
        n = len(lrs)
        if not 1 <= n <= steps_per_call:
            raise ValueError(f"a chunk runs 1..{steps_per_call} steps, got {n}")
        pad = steps_per_call - n
        if pad:  # padding the program never reads: the loop stops at n
            batches = np.asarray(batches)
            batches = np.concatenate([batches, np.zeros((pad, *batches.shape[1:]), batches.dtype)])
            lrs = np.concatenate([np.asarray(lrs, np.float32), np.zeros(pad, np.float32)])
        if layout is not None and layout.multiprocess:  # this process's rows of every batch
            batches = layout.global_batches(np.asarray(batches), batch_rows)
        params, bias, opt_state, metrics = jitted(params, bias, opt_state, batches, lrs, np.int32(n))
        if pad:
            metrics = jax.tree.map(lambda v: v[:n], metrics)
        return params, bias, opt_state, metrics

    run.jitted = jitted  # the one program: tests read its compile cache
    return run


def accumulated_grads(fm: Functional, params: dict, bias: dict, batch_BxL, microbatches: int):
    """``((objective, (cross-entropy, per-layer MoE stats)), grads)`` of ``batch``, in ``microbatches`` passes.

    Microbatch j takes rows j, j + M, j + 2M, ...: a batch split along its rows over the devices gives every
    device its share of every microbatch. Each pass has the same number of tokens, so the mean of the passes'
    losses, gradients and expert loads is the whole batch's up to float summation order; a MoE's load
    quantile and max-over-mean are averaged over the passes (metrics and the quantile rule's bias step).
    """
    grad_fn = jax.value_and_grad(lambda p, rows: loss_fn(fm, p, bias, rows), has_aux=True)
    if microbatches <= 1:
        return grad_fn(params, batch_BxL)
    b, width = batch_BxL.shape
    rows_MxbxL = jnp.swapaxes(batch_BxL.reshape(b // microbatches, microbatches, width), 0, 1)

    def add(acc, rows_bxL):
        out = grad_fn(params, axes.constrain(rows_bxL, ("batch", None)))
        return jax.tree.map(jnp.add, acc, out), None

    zeros = jax.tree.map(lambda a: jnp.zeros(a.shape, a.dtype), jax.eval_shape(grad_fn, params, rows_MxbxL[0]))
    summed, _ = jax.lax.scan(add, zeros, rows_MxbxL)
    return jax.tree.map(lambda a: a / microbatches, summed)


def make_eval(fm: Functional, layout: Layout | None = None):
    def eval_batch(params, bias, windows, weights):
        logits, _ = fm.apply(params, bias, windows[:, :-1])
        w = jnp.broadcast_to(weights[:, None], windows[:, 1:].shape)
        mean, _ = cross_entropy(logits, windows[:, 1:], w)
        # each window's summed loss too, for the eval's standard error (the mean above stays as it was)
        lse = jax.nn.logsumexp(logits.astype(jnp.float32), axis=-1)
        true = jnp.take_along_axis(logits.astype(jnp.float32), windows[:, 1:, None], axis=-1)[..., 0]
        return mean * jnp.sum(w), jnp.sum(w), jnp.sum(lse - true, axis=-1) * weights

    if layout is None:
        return jax.jit(eval_batch)
    jitted = layout.jit_eval(eval_batch)
    if not layout.multiprocess:
        return jitted
    return lambda p, b, windows, weights: jitted(p, b, layout.global_rows(windows), layout.global_rows(weights))


def segments(start: int, end: int, k: int) -> list[tuple[int, int]]:
    """Pieces of [start, end) of at most k steps, cut at every multiple of k (a resumed run cuts the same)."""
    out, s = [], start
    while s < end:
        n = min(k - s % k, end - s)
        out.append((s, n))
        s += n
    return out
