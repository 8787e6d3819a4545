"""Routed mixture-of-experts MLP: top-k routing, shared experts, capacity dispatch, load balancing.

Routing: softmax router probabilities ``p``; experts are *selected* by ``p + bias`` (the bias is an
auxiliary-loss-free balancing term, DeepSeek-V3) and *weighted* by ``p`` of the selected experts,
renormalised over the k choices when k > 1. The bias is a :class:`RouterBias` variable: it is never
differentiated and is updated outside the gradient by :func:`update_bias` from each step's loads.

Dispatch (``dispatch="capacity"``, the fast path on CPU): each group of ``group_size`` tokens (by
default one sequence) gives each expert ``C = ceil(capacity_factor * group * k / E)`` slots; choices
claim slots in token order (so dispatch is causal); a choice past capacity is dropped (its weight is
lost; the residual stream carries the token). ``dispatch="dense"`` computes every expert for every
token and is the reference the tests compare against (equal outputs when nothing is dropped).

Balancing (``ModelSpec.balancing``):
- ``aux_free``: DeepSeek-V3's sign update, ``b_e += rate * sign(mean_load - load_e)``.
- ``aux_free_quantile``: a quantile target instead of a sign. For each expert, the *margin* of a token
  is its biased score minus the k-th largest biased score among the other experts (positive iff the
  expert is picked). Shifting ``b_e`` by ``-m_e``, where ``m_e`` is the (1 - k/E) quantile of expert
  e's margins over the batch, would give e exactly its share k/E of the batch; the update takes that
  step clipped to ``+-rate``, so it moves like the sign rule far from balance and stops dithering
  near it.
- ``aux_loss``: Switch-Transformer loss ``coef * E * sum_e f_e * P_e`` added to the training loss.
- ``none``: plain top-k.
"""

from __future__ import annotations

import math

import jax
import jax.numpy as jnp
from flax import nnx

from ladder.spec import ModelSpec
from ladder.trainers.builtin import precision
from ladder.trainers.builtin.init import HostInit, residual_std, zeros


class RouterBias(nnx.Variable):
    """Per-expert selection bias: train state, checkpointed, never given a gradient."""


def capacity(group: int, n_experts: int, top_k: int, capacity_factor: float) -> int:
    return int(min(group, max(1, math.ceil(capacity_factor * group * top_k / n_experts))))


def _swiglu_experts(xe: jax.Array, w13: jax.Array, w2: jax.Array) -> jax.Array:
    """xe (G, E, C, d) through each expert's SwiGLU -> (G, E, C, d)."""
    h = jnp.einsum("gecd,edf->gecf", xe, w13)
    a, b = jnp.split(h, 2, axis=-1)
    return jnp.einsum("gecf,efd->gecd", jax.nn.silu(a) * b, w2)


def top_k_indices(x: jax.Array, k: int) -> jax.Array:
    """``jax.lax.top_k(x, k)[1]``: the k largest along the last axis, largest first, the lowest index on ties.

    Built from k argmaxes because XLA's TopK cannot be split along the batch: on a data-parallel mesh the
    partitioner gathers the whole batch onto every device for it, one sync per MoE layer and step.
    """
    picked = []
    for _ in range(k):
        i = jnp.argmax(x, axis=-1).astype(jnp.int32)
        picked.append(i)
        x = jnp.where(jax.nn.one_hot(i, x.shape[-1], dtype=jnp.bool_), -jnp.inf, x)
    return jnp.stack(picked, axis=-1)


def route(x: jax.Array, w_router: jax.Array, bias: jax.Array, top_k: int, use_bias: bool):
    """Return (probs (..., E), chosen expert ids (..., k), gate weights (..., k), biased scores)."""
    logits = x @ w_router
    probs = jax.nn.softmax(logits, axis=-1)
    scores = probs + jax.lax.stop_gradient(bias) if use_bias else probs
    idx = top_k_indices(jax.lax.stop_gradient(scores), top_k)
    gates = jnp.take_along_axis(probs, idx, axis=-1)
    if top_k > 1:
        gates = gates / (jnp.sum(gates, axis=-1, keepdims=True) + 1e-9)
    return probs, idx, gates, scores


@jax.custom_vjp
def _take_rows(x, idx, back_idx):
    """``x[idx]`` for a row gather whose backward is *also* a gather (no scatter-add on CPU).

    ``idx`` (M,) reads rows of x (N, d); ``back_idx`` (N, j) lists, for each row of x, the j output
    positions that read it (M for none), so d x[n] = sum_j g[back_idx[n, j]]. Index M / N point to an
    appended zero row.
    """
    return x[idx]


def _take_rows_fwd(x, idx, back_idx):
    return x[idx], (idx, back_idx, x.shape[0])


def _take_rows_bwd(res, g):
    idx, back_idx, n = res
    gpad = jnp.concatenate([g, jnp.zeros((1, g.shape[-1]), g.dtype)], axis=0)
    dx = jnp.sum(gpad[back_idx], axis=1) if back_idx.ndim == 2 else gpad[back_idx]
    return dx, None, None


_take_rows.defvjp(_take_rows_fwd, _take_rows_bwd)


def dispatch_capacity(x, idx, gates, w13, w2, n_experts: int, cap: int, compute_dtype: str = "float32"):
    """Per-group capacity dispatch. x (G, S, d), idx/gates (G, S, k). Returns (y, kept fraction).

    Slots are assigned with a cumulative count; tokens move to and from the (E, C) expert buffers
    by gathers in both directions (forward and backward), which is what makes it fast on CPU.
    """
    g, s, d = x.shape
    k = idx.shape[-1]
    # Choices claim slots in token order (a token's k choices together), so a later token can never
    # displace an earlier one: dispatch stays causal.
    e_flat = idx.reshape(g, s * k)  # (G, Sk)
    onehot = jax.nn.one_hot(e_flat, n_experts, dtype=jnp.int32)  # (G, Sk, E)
    pos = jnp.sum((jnp.cumsum(onehot, axis=1) - 1) * onehot, axis=-1)  # (G, Sk)
    keep = pos < cap
    n_slots = n_experts * cap
    slot = jnp.where(keep, e_flat * cap + pos, n_slots)  # (G, Sk); n_slots = dropped
    choice = jnp.arange(s * k, dtype=jnp.int32)

    def gather_in(xg, slot_g):
        # which choice fills each slot (s*k: empty) and which token that is (s: empty)
        src_choice = jnp.full((n_slots + 1,), s * k, dtype=jnp.int32).at[slot_g].set(choice)[:n_slots]
        src_token = jnp.where(src_choice < s * k, src_choice // k, s)
        xpad = jnp.concatenate([xg, jnp.zeros((1, d), xg.dtype)], axis=0)
        slot_pad = jnp.concatenate([slot_g.reshape(s, k), jnp.full((1, k), n_slots, jnp.int32)], axis=0)
        back = jnp.concatenate([src_choice, jnp.full((1,), s * k, jnp.int32)])
        return _take_rows(xpad, src_token, slot_pad), back

    xe, back = jax.vmap(gather_in)(x, slot)  # (G, E*C, d)
    # one matmul per expert over all groups' slots: (E, G*C, d)
    xe = jnp.swapaxes(xe.reshape(g, n_experts, cap, d), 0, 1).reshape(n_experts, g * cap, d)
    h = precision.expert_dot(xe, w13, compute_dtype)
    a, b = jnp.split(h, 2, axis=-1)
    ye = precision.expert_dot(jax.nn.silu(a) * b, w2, compute_dtype)
    ye = jnp.swapaxes(ye.reshape(n_experts, g, cap, d), 0, 1).reshape(g, n_slots, d)
    ye = jnp.concatenate([ye, jnp.zeros((g, 1, d), ye.dtype)], axis=1)
    y_choice = jax.vmap(_take_rows)(ye, slot, back)  # (G, Sk, d)
    w = (gates.reshape(g, s * k) * keep)[..., None]
    y = jnp.sum((y_choice * w).reshape(g, s, k, d), axis=2)
    return y, jnp.mean(keep.astype(jnp.float32))


def dispatch_dense(x, idx, gates, w13, w2, n_experts: int):
    """Reference: every expert on every token, combined with the sparse gate weights."""
    g, s, d = x.shape
    ye = _swiglu_experts(jnp.broadcast_to(x[:, None], (g, n_experts, s, d)), w13, w2)  # (G, E, S, d)
    dense_gates = jnp.sum(jax.nn.one_hot(idx, n_experts, dtype=x.dtype) * gates[..., None], axis=-2)
    return jnp.einsum("gse,gesd->gsd", dense_gates, ye), jnp.float32(1.0)


def dispatch_ragged(x, idx, gates, w13, w2, n_experts: int, compute_dtype: str = "float32"):
    """Dropless: every choice computed by its expert, with no capacity and no (G, E, S, d) broadcast.

    The (token, choice) pairs are sorted by expert and run through ``jax.lax.ragged_dot`` (one product per
    expert over its contiguous run of rows): memory (G*S*k, d) whatever the number of experts.
    """
    g, s, d = x.shape
    k = idx.shape[-1]
    expert_Nk = idx.reshape(-1)
    order = jnp.argsort(expert_Nk, stable=True)
    sizes = jnp.bincount(expert_Nk, length=n_experts).astype(jnp.int32)
    dtype = jnp.float32 if compute_dtype == "float32" else jnp.bfloat16
    xs = x.reshape(g * s, d)[order // k].astype(dtype)
    h = jax.lax.ragged_dot(xs, w13.astype(dtype), sizes, preferred_element_type=jnp.float32)
    a, b = jnp.split(h, 2, axis=-1)
    ys = jax.lax.ragged_dot((jax.nn.silu(a) * b).astype(dtype), w2.astype(dtype), sizes,
                            preferred_element_type=jnp.float32)
    y_choice = jnp.zeros_like(ys).at[order].set(ys).reshape(g, s, k, -1)
    return jnp.sum(y_choice * gates[..., None], axis=2), jnp.float32(1.0)


class MoE(nnx.Module):
    def __init__(self, spec: ModelSpec, *, rngs: HostInit, dispatch: str = "capacity", group_size: int = 0):
        d, e, f = spec.d_model, spec.n_experts, spec.expert_d_ff
        width = spec.expert_latent or d  # latent experts: routed on x, computed in a narrower latent
        self.n_experts, self.top_k = e, spec.top_k
        self.capacity_factor = spec.capacity_factor
        self.balancing = spec.balancing
        self.dispatch = dispatch
        self.group_size = group_size
        self.compute_dtype = spec.compute_dtype  # the experts' products; the router stays float32
        out_std = residual_std(spec.n_layers)
        self.router = nnx.Param(rngs.normal((d, e)))
        self.w13 = nnx.Param(rngs.normal((e, width, 2 * f)))
        self.w2 = nnx.Param(rngs.normal((e, f, width), out_std))
        self.latent = bool(spec.expert_latent)
        if self.latent:
            self.latent_in = nnx.Param(rngs.normal((d, width)))
            self.latent_out = nnx.Param(rngs.normal((width, d)))
        self.bias = RouterBias(zeros((e,)))
        self.n_shared = spec.n_shared
        if spec.n_shared:
            fs = spec.n_shared * (spec.shared_d_ff or f)
            self.shared_w13 = nnx.Param(rngs.normal((d, 2 * fs)))
            self.shared_w2 = nnx.Param(rngs.normal((fs, d), out_std))

    def __call__(self, x: jax.Array):
        b, t, d = x.shape
        e, k = self.n_experts, self.top_k
        use_bias = self.balancing in ("aux_free", "aux_free_quantile")
        probs, idx, gates, scores = route(x, self.router[...], self.bias[...], k, use_bias)
        group = self.group_size or t
        if (b * t) % group:
            group = t
        xe = precision.dot(x, self.latent_in[...], self.compute_dtype) if self.latent else x
        xg = xe.reshape(-1, group, xe.shape[-1])
        idx_g, gates_g = idx.reshape(-1, group, k), gates.reshape(-1, group, k)
        if self.dispatch == "dense":
            y, kept = dispatch_dense(xg, idx_g, gates_g, self.w13[...], self.w2[...], e)
        elif self.dispatch == "ragged":
            y, kept = dispatch_ragged(xg, idx_g, gates_g, self.w13[...], self.w2[...], e, self.compute_dtype)
        else:
            cap = capacity(group, e, k, self.capacity_factor)
            y, kept = dispatch_capacity(xg, idx_g, gates_g, self.w13[...], self.w2[...], e, cap, self.compute_dtype)
        y = y.reshape(b, t, xe.shape[-1])
        if self.latent:
            y = precision.dot(y, self.latent_out[...], self.compute_dtype)
        if self.n_shared:
            a, c = jnp.split(precision.dot(x, self.shared_w13[...], self.compute_dtype), 2, axis=-1)
            y = y + precision.dot(jax.nn.silu(a) * c, self.shared_w2[...], self.compute_dtype)
        counts = jnp.sum(jax.nn.one_hot(idx, e, dtype=jnp.float32), axis=(0, 1, 2))  # choices per expert
        load = counts / (b * t * k)  # fraction of choices, sums to 1
        mean_prob = jnp.mean(probs, axis=(0, 1))
        aux = e * jnp.sum(jax.lax.stop_gradient(load) * mean_prob)
        entropy = -jnp.mean(jnp.sum(probs * jnp.log(probs + 1e-9), axis=-1))
        quantile = _margin_quantile(jax.lax.stop_gradient(scores).reshape(-1, e), k) if k < e else counts * 0
        stats = {
            "load": load,
            "quantile": quantile,
            "aux_loss": aux,
            "drop_rate": 1.0 - kept,
            "entropy": entropy,
            "load_max_over_mean": jnp.max(load) * e,
        }
        return y, stats


def _margin_quantile(scores: jax.Array, k: int) -> jax.Array:
    """Per expert: the (1 - k/E) quantile over tokens of (score - k-th best score among the others)."""
    e = scores.shape[-1]
    top, _ = jax.lax.top_k(scores, k + 1)  # (N, k+1), descending
    in_top = scores >= top[:, k - 1 : k]
    kth_other = jnp.where(in_top, top[:, k : k + 1], top[:, k - 1 : k])
    return jnp.quantile(scores - kth_other, 1.0 - k / e, axis=0)


def update_bias(bias: jax.Array, stats: dict, balancing: str, rate: float) -> jax.Array:
    """The router-bias update, outside the gradient (returns the new bias)."""
    if balancing == "aux_free":
        load = stats["load"]
        return bias + rate * jnp.sign(jnp.mean(load) - load)
    if balancing == "aux_free_quantile":
        return bias - jnp.clip(stats["quantile"], -rate, rate)
    return bias
