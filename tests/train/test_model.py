import jax
import jax.numpy as jnp
import numpy as np
import pytest

from ladder.spec import ModelSpec
from ladder.trainers.builtin.flops import count_params
from ladder.trainers.builtin.model import build, loss_fn


def _tokens(b=2, t=16, seed=0):
    return jnp.asarray(np.random.default_rng(seed).integers(1, 256, (b, t)), jnp.int32)


@pytest.mark.parametrize("which", ["dense", "moe"])
def test_shapes_and_causality(which, dense_spec, moe_spec):
    spec = dense_spec if which == "dense" else moe_spec
    fm = build(spec, 0)
    toks = _tokens()
    apply = jax.jit(lambda x: fm.apply(fm.params, fm.bias, x)[0])
    logits = apply(toks)
    assert logits.shape == (2, 16, spec.vocab)
    assert bool(jnp.all(jnp.isfinite(logits)))
    for j in (5, 11):
        changed = toks.at[:, j:].set((toks[:, j:] + 7) % 256)
        other = apply(changed)
        np.testing.assert_array_equal(np.asarray(other[:, :j]), np.asarray(logits[:, :j]))
        assert not np.allclose(np.asarray(other[:, j]), np.asarray(logits[:, j]))


def test_param_counts_match_hand_count():
    d, L, h, v, f = 32, 3, 4, 256, 48
    dense = ModelSpec(d_model=d, n_layers=L, n_heads=h, d_ff=f, vocab=v, tie_embeddings=False, qk_norm=True)
    hd = d // h
    per_layer = 4 * d * d + 2 * hd + 2 * d + 3 * d * f  # qkv+o, qk-norm scales, two norms, SwiGLU
    hand_non_emb = L * per_layer + d
    assert dense.params_non_embedding == hand_non_emb
    assert dense.params_total == hand_non_emb + 2 * v * d
    assert dense.params_active == hand_non_emb
    counted = count_params({k: np.asarray(a) for k, a in build(dense, 0).params.items()})
    assert counted == {"params_total": dense.params_total, "params_non_embedding": hand_non_emb}
    assert dense.flops_per_token(64) == 6 * (hand_non_emb + d * v) + 12 * L * 64 * d

    e, k, s, fe = 8, 2, 1, 16
    moe = ModelSpec(d_model=d, n_layers=L, n_heads=h, vocab=v, n_experts=e, top_k=k, n_shared=s, expert_d_ff=fe)
    attn_norm = 4 * d * d + 2 * d
    total_layer = attn_norm + d * e + (e + s) * 3 * d * fe
    active_layer = attn_norm + d * e + (k + s) * 3 * d * fe
    assert moe.params_non_embedding == L * total_layer + d
    assert moe.params_active == L * active_layer + d
    assert moe.params_total == L * total_layer + d + v * d  # tied
    fm = build(moe, 0)
    counted = count_params({k_: np.asarray(a) for k_, a in fm.params.items()})
    assert counted["params_total"] == moe.params_total
    assert sum(np.asarray(b).size for b in fm.bias.values()) == L * e  # router bias: state, not params


def test_z_loss_and_tied_head(dense_spec):
    import dataclasses

    toks = _tokens(2, 17)
    base = build(dense_spec, 0)
    zl = dataclasses.replace(dense_spec, z_loss=0.5)
    fm = build(zl, 0)
    total, (ce, _) = loss_fn(fm, fm.params, fm.bias, toks)
    total0, (ce0, _) = loss_fn(base, base.params, base.bias, toks)
    assert float(ce) == pytest.approx(float(ce0), rel=1e-6)
    assert float(total) > float(ce)
    assert "head" not in base.params and "head" in build(dataclasses.replace(dense_spec, tie_embeddings=False), 0).params


def test_block_causal_attention_equals_full_mask():
    from ladder.trainers.builtin.model import causal_attention as eager

    causal_attention = jax.jit(eager, static_argnames="block")  # one compile per block size, not per op
    rng = np.random.default_rng(0)
    q, k, v = (jnp.asarray(rng.normal(size=(2, 2, 128, 8)), jnp.float32) for _ in range(3))
    full = causal_attention(q, k, v, block=0)
    for block in (32, 64):
        np.testing.assert_allclose(np.asarray(causal_attention(q, k, v, block=block)), np.asarray(full),
                                   rtol=1e-5, atol=1e-6)
    # and it stays causal: changing later keys/values leaves earlier outputs alone
    k2, v2 = k.at[:, :, 70:].add(1.0), v.at[:, :, 70:].add(1.0)
    np.testing.assert_array_equal(np.asarray(causal_attention(q, k2, v2, block=32)[:, :, :70]),
                                  np.asarray(causal_attention(q, k, v, block=32)[:, :, :70]))
