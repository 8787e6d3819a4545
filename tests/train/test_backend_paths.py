"""The accelerator paths of the model, run here on CPU against the CPU paths they replace: fused attention
(``jax.nn.dot_product_attention``, its XLA implementation; cuDNN's needs a GPU), the gathered embedding and
``take_along_axis`` target logit, and the ragged dropless MoE dispatch."""

from __future__ import annotations

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from ladder.spec import ModelSpec
from ladder.trainers.builtin import model as model_lib
from ladder.trainers.builtin.init import HostInit
from ladder.trainers.builtin.moe import MoE

# float32 sums in another order (blocked softmax vs one pass; gather vs one-hot matmul): measured at most
# 2e-6 relative here; the bound leaves room for other CPUs.
RTOL = 1e-4


def _heads(seed: int, shape):
    return jnp.asarray(np.random.default_rng(seed).standard_normal(shape, np.float32))


@pytest.mark.parametrize("kv_heads", [4, 2])
def test_fused_attention_equals_the_einsum_attention(kv_heads):
    b, h, t, e = 2, 4, 128, 16
    q, k, v = _heads(0, (b, h, t, e)), _heads(1, (b, kv_heads, t, e)), _heads(2, (b, kv_heads, t, e))
    fused = model_lib.fused_attention(q, k, v, "xla", "float32")  # (B, T, H, E)
    rep = h // kv_heads
    ref = model_lib.causal_attention(q, jnp.repeat(k, rep, axis=1), jnp.repeat(v, rep, axis=1))  # (B, H, T, E)
    np.testing.assert_allclose(np.asarray(fused), np.asarray(ref.transpose(0, 2, 1, 3)), rtol=RTOL, atol=1e-5)


def test_gathered_embedding_and_target_logit_give_the_one_hot_loss(monkeypatch):
    spec = ModelSpec(d_model=32, n_layers=2, n_heads=2, n_kv_heads=1, tie_embeddings=False)
    fm = model_lib.build(spec, 0)
    batch = jnp.asarray(np.random.default_rng(0).integers(0, spec.vocab, (2, 33)), jnp.int32)

    def loss_and_grad():
        return jax.value_and_grad(lambda p: model_lib.loss_fn(fm, p, fm.bias, batch)[0])(fm.params)

    onehot_loss, onehot_grad = loss_and_grad()
    monkeypatch.setattr(model_lib, "onehot_paths", lambda: False)
    monkeypatch.setattr(model_lib, "attention_implementation", lambda dtype: "xla")
    gather_loss, gather_grad = loss_and_grad()
    assert model_lib.onehot_paths() is False
    np.testing.assert_allclose(float(gather_loss), float(onehot_loss), rtol=RTOL)
    for name in ("embed", "head", "layers.0.attn.wqkv"):
        np.testing.assert_allclose(np.asarray(gather_grad[name]), np.asarray(onehot_grad[name]), rtol=1e-3,
                                   atol=1e-7)


@pytest.mark.parametrize("compute_dtype", ["float32", "bfloat16"])
def test_ragged_dropless_dispatch_equals_every_expert_on_every_token(compute_dtype):
    spec = ModelSpec(d_model=32, n_layers=2, n_heads=2, n_experts=8, top_k=2, expert_d_ff=32,
                     compute_dtype=compute_dtype)
    x = _heads(3, (3, 24, 32))
    ys = {}
    for dispatch in ("dense", "ragged"):
        graphdef, state = nnx.split(MoE(spec, rngs=HostInit(0), dispatch=dispatch))
        ys[dispatch] = jax.jit(lambda s, x, g=graphdef: nnx.merge(g, s)(x)[0])(state, x)
    tol = RTOL if compute_dtype == "float32" else 2e-2  # bf16 operands: rounding of the expert products
    np.testing.assert_allclose(np.asarray(ys["ragged"]), np.asarray(ys["dense"]), rtol=tol, atol=tol * 1e-2)
    assert float(jnp.std(ys["dense"])) > 0  # the experts did compute something


def test_cpu_keeps_its_fast_paths():
    assert jax.default_backend() == "cpu"
    assert model_lib.onehot_paths() and model_lib.attention_implementation("bfloat16") == "einsum"
    from ladder.trainers.builtin.evaluate import dropless_dispatch

    assert dropless_dispatch() == "dense"

