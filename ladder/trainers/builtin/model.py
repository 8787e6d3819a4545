"""Decoder-only transformer (Flax NNX): RMSNorm, RoPE, SwiGLU, causal attention, optional QK-norm,
tied or untied embeddings, dense or MoE MLPs, cross-entropy with an optional z-loss.

On CPU, attention is written by hand (einsum + a precomputed causal mask, block-causal): it beat
``jax.nn.dot_product_attention`` by a wide margin for these small heads; embedding lookup and the
target logit use one-hot matmuls: their gradients are matmuls instead of CPU scatter-adds. On other
backends attention is ``jax.nn.dot_product_attention`` (cuDNN flash attention on a GPU in bfloat16),
the embedding a gather and the target logit ``take_along_axis`` (:func:`onehot_paths`).

The trainer works on *flat* parameter dicts (``"layers.0.attn.wqkv" -> array``) so optax masks,
LR groups and orbax checkpoints see plain names; :class:`Functional` converts between the flat dicts
and the NNX module inside a jitted function.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

import jax
import jax.numpy as jnp
import numpy as np
from flax import nnx

from ladder.spec import ModelSpec
from ladder.trainers.builtin import axes, init, precision
from ladder.trainers.builtin.moe import MoE, RouterBias


def onehot_paths() -> bool:
    """One-hot embedding and target logit on CPU, where their matmul gradients beat a scatter-add; a gather
    and ``take_along_axis`` elsewhere: at vocab 128k the one-hot (B, T, V) arrays would dominate memory."""
    return jax.default_backend() == "cpu"


def attention_implementation(compute_dtype: str) -> str:
    """``einsum``: the block-causal einsum attention, fastest on CPU for these small heads; otherwise
    ``jax.nn.dot_product_attention``, with cuDNN's flash attention on a GPU in bfloat16."""
    backend = jax.default_backend()
    if backend == "cpu":
        return "einsum"
    return "cudnn" if backend == "gpu" and compute_dtype == "bfloat16" else "xla"


class RMSNorm(nnx.Module):
    def __init__(self, dim: int, eps: float = 1e-6):
        self.scale = nnx.Param(init.ones((dim,)))
        self.eps = eps

    def __call__(self, x):
        var = jnp.mean(jnp.square(x), axis=-1, keepdims=True)
        return x * jax.lax.rsqrt(var + self.eps) * self.scale[...]


def rope_tables(seq_len: int, head_dim: int, base: float = 10_000.0):
    half = head_dim // 2
    inv = 1.0 / (base ** (np.arange(half, dtype=np.float64) / half))
    ang = np.arange(seq_len, dtype=np.float64)[:, None] * inv[None, :]
    return np.cos(ang).astype(np.float32), np.sin(ang).astype(np.float32)


def apply_rope(x, cos, sin):
    """x (B, H, T, Dh); cos/sin (T, Dh/2): rotate the two halves of each head."""
    x1, x2 = jnp.split(x, 2, axis=-1)
    c, s = cos[None, None], sin[None, None]
    return jnp.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


ATTN_BLOCK = 64  # query/key block for the block-causal attention


def causal_attention(q, k, v, block: int | None = None):
    """q, k, v (B, H, T, Dh) -> (B, H, T, Dh): einsum attention with a precomputed causal mask.

    Block-causal: the queries are cut into blocks of ``block`` and block i attends only to keys
    0..(i+1)*block, so the fully masked upper blocks are never computed (about half the score
    FLOPs and memory traffic at T = 256; measured 10-25% faster steps at d64-d128 on CPU).
    Heads-major layout (B, H, T, Dh) straight from the projection avoids transposes (~6%).
    """
    b, h, t, dh = q.shape
    block = ATTN_BLOCK if block is None else block
    nb = t // block if (block and t % block == 0 and t >= 2 * block) else 1
    c = t // nb
    q = q * (1.0 / math.sqrt(dh))
    tri = np.triu(np.full((c, c), -1e30, dtype=np.float32), k=1)
    outs = []
    for i in range(nb):
        mask = np.concatenate([np.zeros((c, i * c), np.float32), tri], axis=1)
        kv = slice(0, (i + 1) * c)
        scores = jnp.einsum("bhqd,bhkd->bhqk", q[:, :, i * c : (i + 1) * c], k[:, :, kv]) + mask
        outs.append(jnp.einsum("bhqk,bhkd->bhqd", jax.nn.softmax(scores, axis=-1), v[:, :, kv]))
    return outs[0] if nb == 1 else jnp.concatenate(outs, axis=2)


def fused_attention(q_BxHxTxE, k_BxKxTxE, v_BxKxTxE, implementation: str, compute_dtype: str):
    """Causal ``jax.nn.dot_product_attention`` of heads-major q and (grouped: K of them) k, v -> (B, T, H, E).
    cuDNN takes bfloat16 operands; the output comes back in float32."""
    dtype = jnp.bfloat16 if implementation == "cudnn" else q_BxHxTxE.dtype
    q, k, v = (a.transpose(0, 2, 1, 3).astype(dtype) for a in (q_BxHxTxE, k_BxKxTxE, v_BxKxTxE))
    out = jax.nn.dot_product_attention(q, k, v, is_causal=True,
                                       implementation=None if implementation == "xla" else implementation)
    return out.astype(jnp.float32)


class Attention(nnx.Module):
    def __init__(self, spec: ModelSpec, *, rngs: init.HostInit):
        d = spec.d_model
        self.n_heads, self.head_dim = spec.n_heads, spec.head_dim
        self.n_kv = spec.n_kv_heads or spec.n_heads  # grouped-query attention: K, V heads shared by groups of Q heads
        self.wqkv = nnx.Param(rngs.normal((d, d + 2 * self.n_kv * self.head_dim)))
        self.wo = nnx.Param(rngs.normal((d, d), init.residual_std(spec.n_layers)))
        self.qk_norm = spec.qk_norm
        self.compute_dtype = spec.compute_dtype
        if spec.qk_norm:
            self.q_norm = RMSNorm(spec.head_dim)
            self.k_norm = RMSNorm(spec.head_dim)

    def __call__(self, x, cos, sin):
        b, t, d = x.shape
        h, dh = self.n_heads, self.head_dim
        # One product per projection from slices of the fused weight: slicing the (d, 3d) weight is
        # cheap, while slicing a fused (3, B, H, T, Dh) activation copies it and its gradient pads it
        # back (13% of a d128 step's kernel time went to those copies and pads; 3-9% faster steps).
        w = self.wqkv[...]
        kv = self.n_kv * dh
        parts = ((0, d, h), (d, d + kv, self.n_kv), (d + kv, d + 2 * kv, self.n_kv))
        if self.compute_dtype == "float32":
            q, k, v = (jnp.einsum("btd,dhe->bhte", x, w[:, lo:hi].reshape(d, n, dh)) for lo, hi, n in parts)
        else:  # the 2-D products the bfloat16 kernels take, then heads-major
            q, k, v = (precision.dot(x, w[:, lo:hi], self.compute_dtype).reshape(b, t, n, dh)
                       .transpose(0, 2, 1, 3) for lo, hi, n in parts)
        if self.qk_norm:
            q, k = self.q_norm(q), self.k_norm(k)
        q, k = apply_rope(q, cos, sin), apply_rope(k, cos, sin)
        impl = attention_implementation(self.compute_dtype)
        if impl != "einsum":  # grouped K, V heads go in as they are
            out = fused_attention(q, k, v, impl, self.compute_dtype).reshape(b, t, d)
            return precision.dot(out, self.wo[...], self.compute_dtype)
        if self.n_kv < h:
            k, v = jnp.repeat(k, h // self.n_kv, axis=1), jnp.repeat(v, h // self.n_kv, axis=1)
        out = causal_attention(q, k, v)
        if self.compute_dtype == "float32":
            return jnp.einsum("bhte,hed->btd", out, self.wo[...].reshape(h, dh, d))
        return precision.dot(out.transpose(0, 2, 1, 3).reshape(b, t, d), self.wo[...], self.compute_dtype)


class SwiGLU(nnx.Module):
    def __init__(self, d: int, f: int, n_layers: int, *, rngs: init.HostInit, compute_dtype: str = "float32"):
        self.w13 = nnx.Param(rngs.normal((d, 2 * f)))  # gate and up projections, fused
        self.w2 = nnx.Param(rngs.normal((f, d), init.residual_std(n_layers)))
        self.compute_dtype = compute_dtype

    def __call__(self, x):
        a, b = jnp.split(precision.dot(x, self.w13[...], self.compute_dtype), 2, axis=-1)
        return precision.dot(jax.nn.silu(a) * b, self.w2[...], self.compute_dtype)


class Block(nnx.Module):
    def __init__(self, spec: ModelSpec, *, rngs: init.HostInit, dispatch: str = "capacity", group_size: int = 0):
        self.attn_norm = RMSNorm(spec.d_model)
        self.attn = Attention(spec, rngs=rngs)
        self.mlp_norm = RMSNorm(spec.d_model)
        self.is_moe = spec.is_moe
        if spec.is_moe:
            self.mlp = MoE(spec, rngs=rngs, dispatch=dispatch, group_size=group_size)
        else:
            self.mlp = SwiGLU(spec.d_model, spec.dense_d_ff, spec.n_layers, rngs=rngs,
                              compute_dtype=spec.compute_dtype)

    def __call__(self, x, cos, sin):
        x = x + self.attn(self.attn_norm(x), cos, sin)
        if self.is_moe:
            y, stats = self.mlp(self.mlp_norm(x))
            return x + y, stats
        return x + self.mlp(self.mlp_norm(x)), None


REMAT_POLICIES = {
    "dots": jax.checkpoint_policies.dots_with_no_batch_dims_saveable,  # keep matmul outputs, recompute the rest
    "full": jax.checkpoint_policies.nothing_saveable,  # keep only each block's input
}


class Transformer(nnx.Module):
    def __init__(self, spec: ModelSpec, *, rngs: init.HostInit, dispatch: str = "capacity", group_size: int = 0,
                 remat: str = "none"):
        self.spec = spec
        self.remat = remat
        self.embed = nnx.Param(rngs.normal((spec.vocab, spec.d_model)))
        self.layers = nnx.List(
            [Block(spec, rngs=rngs, dispatch=dispatch, group_size=group_size) for _ in range(spec.n_layers)]
        )
        self.final_norm = RMSNorm(spec.d_model)
        if not spec.tie_embeddings:
            self.head = nnx.Param(rngs.normal((spec.d_model, spec.vocab)))

    def __call__(self, tokens):
        """tokens (B, T) int -> (logits (B, T, V), per-layer MoE stats list or [])."""
        t = tokens.shape[1]
        cos, sin = rope_tables(t, self.spec.head_dim)
        if onehot_paths():
            # one-hot matmul: its backward is a matmul too, far cheaper on CPU than a scatter-add
            x = jax.nn.one_hot(tokens, self.spec.vocab, dtype=jnp.float32) @ self.embed[...]
        else:
            x = self.embed[...][tokens]
        x = axes.constrain(x, axes.BATCH_ACT)
        stats = []
        for layer in self.layers:
            if self.remat in REMAT_POLICIES:
                graphdef, state = nnx.split(layer)

                def block(state, x, graphdef=graphdef):
                    return nnx.merge(graphdef, state)(x, cos, sin)

                x, s = jax.checkpoint(block, policy=REMAT_POLICIES[self.remat])(state, x)
            else:
                x, s = layer(x, cos, sin)
            x = axes.constrain(x, axes.BATCH_ACT)
            if s is not None:
                stats.append(s)
        x = self.final_norm(x)
        # The embedding and the output head stay float32 under mixed precision: bf16 logits cost 1.1%
        # in eval loss on a 600-step d96 run (the body alone in bf16: within 0.1% of float32).
        if self.spec.tie_embeddings:
            logits = x @ self.embed[...].T
        else:
            logits = x @ self.head[...]
        return logits, stats


def _name(path) -> str:
    parts = []
    for p in path:
        key = getattr(p, "key", getattr(p, "idx", getattr(p, "name", p)))
        parts.append(str(key))
    if parts and parts[-1] == "value":
        parts = parts[:-1]
    return ".".join(parts)


@dataclass
class Functional:
    """A model split once into (graphdef, params, router bias) with flat-dict converters.

    ``apply(params, bias, tokens)`` is a pure function usable inside ``jax.jit``.
    """

    spec: ModelSpec
    graphdef: Any
    param_names: list[str]
    param_treedef: Any
    bias_names: list[str]
    bias_treedef: Any
    params: dict[str, jax.Array]
    bias: dict[str, jax.Array]

    def merge(self, params: dict, bias: dict) -> Transformer:
        p_state = jax.tree.unflatten(self.param_treedef, [params[n] for n in self.param_names])
        b_state = jax.tree.unflatten(self.bias_treedef, [bias[n] for n in self.bias_names])
        return nnx.merge(self.graphdef, p_state, b_state)

    def apply(self, params: dict, bias: dict, tokens: jax.Array):
        return self.merge(params, bias)(tokens)


def build(spec: ModelSpec, seed: int, *, dispatch: str = "capacity", group_size: int = 0,
          host: bool = False, remat: str = "none") -> Functional:
    """``host``: the parameters stay numpy arrays on the host (to be placed shard by shard). ``remat``: what
    each block's backward recomputes (``ladder.spec.Resources.remat``)."""
    model = Transformer(spec, rngs=init.HostInit(seed, host=host), dispatch=dispatch, group_size=group_size,
                        remat=remat)
    graphdef, p_state, b_state = nnx.split(model, nnx.Param, RouterBias)
    p_leaves, p_def = jax.tree_util.tree_flatten_with_path(p_state)
    b_leaves, b_def = jax.tree_util.tree_flatten_with_path(b_state)
    p_names = [_name(path) for path, _ in p_leaves]
    b_names = [_name(path) for path, _ in b_leaves]
    return Functional(
        spec=spec,
        graphdef=graphdef,
        param_names=p_names,
        param_treedef=p_def,
        bias_names=b_names,
        bias_treedef=b_def,
        params={n: v for n, (_, v) in zip(p_names, p_leaves, strict=True)},
        bias={n: v for n, (_, v) in zip(b_names, b_leaves, strict=True)},
    )


def cross_entropy(logits, targets, weights=None):
    """Mean token cross-entropy (nats) and mean squared log-partition (for the z-loss)."""
    lse = jax.nn.logsumexp(logits, axis=-1)
    if onehot_paths():
        true = jnp.sum(logits * jax.nn.one_hot(targets, logits.shape[-1], dtype=logits.dtype), axis=-1)
    else:
        true = jnp.take_along_axis(logits, targets[..., None], axis=-1)[..., 0]
    nll = lse - true
    if weights is None:
        return jnp.mean(nll), jnp.mean(jnp.square(lse))
    denom = jnp.maximum(jnp.sum(weights), 1.0)
    return jnp.sum(nll * weights) / denom, jnp.sum(jnp.square(lse) * weights) / denom


def loss_fn(fm: Functional, params: dict, bias: dict, batch: jax.Array):
    """batch (B, T+1) int tokens -> (training objective, (cross-entropy, per-layer stats))."""
    logits, stats = fm.apply(params, bias, batch[:, :-1])
    ce, zsq = cross_entropy(logits, batch[:, 1:])
    total = ce
    spec = fm.spec
    if spec.z_loss:
        total = total + spec.z_loss * zsq
    if spec.is_moe and spec.balancing == "aux_loss" and stats:
        total = total + spec.aux_loss_coef * sum(s["aux_loss"] for s in stats) / len(stats)
    return total, (ce, stats)
