"""The jitted functions the training loop calls: ``k`` optimizer steps in one ``lax.scan``, and one eval batch;
and how a span of steps is cut into such chunks.

Both take the model split into (graphdef, params, router bias) (:class:`ladder.train.model.Functional`);
with a :class:`ladder.train.parallel.Layout` they are jitted onto its data-parallel mesh, else with
plain ``jax.jit`` (one device, bit-identical to a trainer without the mesh).
"""

from __future__ import annotations

from collections.abc import Mapping

import jax
import jax.numpy as jnp
import optax

from ladder.train.model import Functional, cross_entropy, loss_fn
from ladder.train.moe import update_bias
from ladder.train.parallel import Layout


def make_train_chunk(fm: Functional, opt: optax.GradientTransformation, mults: Mapping[str, float],
                     layout: Layout | None = None):
    spec = fm.spec
    bias_layers = [(name, int(name.split(".")[1])) for name in fm.bias_names]
    moe_layers = sorted({i for _, i in bias_layers})

    def one_step(carry, xs):
        params, bias, opt_state = carry
        batch, lr = xs
        (total, (ce, stats)), grads = jax.value_and_grad(
            lambda p: loss_fn(fm, p, bias, batch), has_aux=True
        )(params)
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

    def chunk(params, bias, opt_state, batches, lrs):
        (params, bias, opt_state), metrics = jax.lax.scan(one_step, (params, bias, opt_state), (batches, lrs))
        return params, bias, opt_state, metrics

    return layout.jit_chunk(chunk) if layout is not None else jax.jit(chunk)


def make_eval(fm: Functional, layout: Layout | None = None):
    def eval_batch(params, bias, windows, weights):
        logits, _ = fm.apply(params, bias, windows[:, :-1])
        w = jnp.broadcast_to(weights[:, None], windows[:, 1:].shape)
        mean, _ = cross_entropy(logits, windows[:, 1:], w)
        return mean * jnp.sum(w), jnp.sum(w)

    return layout.jit_eval(eval_batch) if layout is not None else jax.jit(eval_batch)


def segments(start: int, end: int, k: int) -> list[tuple[int, int]]:
    """Pieces of [start, end): k-step chunks aligned to multiples of k, single steps elsewhere."""
    out, s = [], start
    while s < end:
        n = k if (k > 1 and s % k == 0 and s + k <= end) else 1
        out.append((s, n))
        s += n
    return out
