import dataclasses

import jax
import jax.numpy as jnp
import numpy as np
import pytest
from flax import nnx

from ladder.trainers.builtin.init import HostInit
from ladder.trainers.builtin.model import build, loss_fn
from ladder.trainers.builtin.moe import MoE, top_k_indices, update_bias

# A layer applied jitted, as the trainer runs it: op by op, each primitive would compile on its own.
# One wrapper for the module, so its compile cache is shared by every call.
_jitted_call = nnx.jit(lambda layer, x: layer(x))


def _x(b=4, t=32, d=32, seed=0):
    return jnp.asarray(np.random.default_rng(seed).normal(size=(b, t, d)), jnp.float32)


@pytest.mark.parametrize("group_size", [0, 8])
def test_capacity_dispatch_equals_all_experts_reference(moe_spec, group_size):

    spec = dataclasses.replace(moe_spec, capacity_factor=float(moe_spec.n_experts))  # nothing can drop
    fast = MoE(spec, rngs=HostInit(0), group_size=group_size)
    ref = MoE(spec, rngs=HostInit(0), dispatch="dense")
    x = _x()
    y, stats = _jitted_call(fast, x)
    y_ref, _ = _jitted_call(ref, x)
    assert float(stats["drop_rate"]) == 0.0
    np.testing.assert_allclose(np.asarray(y), np.asarray(y_ref), rtol=2e-5, atol=2e-6)


def test_tight_capacity_drops_and_reports_it(moe_spec):

    spec = dataclasses.replace(moe_spec, capacity_factor=1.0)
    layer = MoE(spec, rngs=HostInit(0))
    layer.bias[...] = layer.bias[...].at[0].set(1.0)  # expert 0 in every token's top-2: over capacity
    _, stats = _jitted_call(layer, _x())
    assert float(stats["load_max_over_mean"]) == pytest.approx(2.0)
    # 32 tokens want expert 0, which has ceil(32 * 2 / 4) = 16 slots per sequence: 16 of 64 choices
    # drop there (the other experts share the rest, and may overflow a little too)
    assert 0.25 <= float(stats["drop_rate"]) < 0.35


def test_router_bias_gets_no_gradient_and_changes_selection(moe_spec):
    fm = build(moe_spec, 0)
    toks = jnp.asarray(np.random.default_rng(1).integers(1, 256, (2, 17)), jnp.int32)
    grad_b = jax.jit(jax.grad(lambda b: loss_fn(fm, fm.params, b, toks)[0]))(fm.bias)
    assert all(float(jnp.abs(g).max()) == 0.0 for g in grad_b.values())
    assert not any("bias" in n for n in fm.params)  # not an optimizer parameter
    name = fm.bias_names[0]
    pushed = {**fm.bias, name: fm.bias[name].at[0].set(10.0)}
    loads = jax.jit(lambda b: loss_fn(fm, fm.params, b, toks))(pushed)[1][1][0]["load"]
    assert float(loads[0]) >= 0.49  # a huge bias forces expert 0 into every token's top-2


@pytest.mark.parametrize("balancing", ["aux_free", "aux_free_quantile"])
def test_bias_update_moves_loads_toward_balance(moe_spec, balancing):

    spec = dataclasses.replace(moe_spec, balancing=balancing)
    layer = MoE(spec, rngs=HostInit(0))
    x = _x(8, 32)

    def stats_for(bias):
        layer.bias[...] = bias
        return _jitted_call(layer, x)[1]

    bias = jnp.zeros(spec.n_experts).at[0].set(0.2)  # start badly unbalanced: expert 0 in most top-2s
    first = stats_for(bias)
    assert float(first["load_max_over_mean"]) > 1.6
    for _ in range(60):
        bias = update_bias(bias, stats_for(bias), balancing, 0.01)
    last = stats_for(bias)
    assert float(last["load_max_over_mean"]) < 1.3
    unchanged = update_bias(bias, stats_for(bias), "none", 0.01)
    np.testing.assert_array_equal(np.asarray(unchanged), np.asarray(bias))


def test_aux_loss_in_objective_only_when_asked(moe_spec):
    toks = jnp.asarray(np.random.default_rng(2).integers(1, 256, (2, 17)), jnp.int32)
    for balancing, expect_extra in (("aux_loss", True), ("none", False), ("aux_free", False)):
        spec = dataclasses.replace(moe_spec, balancing=balancing, z_loss=0.0, aux_loss_coef=0.1)
        fm = build(spec, 0)
        total, (ce, _) = jax.jit(lambda p, b, fm=fm: loss_fn(fm, p, b, toks))(fm.params, fm.bias)
        assert (float(total) > float(ce) + 1e-3) == expect_extra


def test_capacity_dispatch_gradients_equal_reference(moe_spec):
    """The gather-only backward of the dispatch gives the same gradients as the all-experts path."""
    spec = dataclasses.replace(moe_spec, capacity_factor=float(moe_spec.n_experts))
    fast, ref = build(spec, 0), build(spec, 0, dispatch="dense")
    toks = jnp.asarray(np.random.default_rng(3).integers(1, 256, (2, 33)), jnp.int32)
    # jitted (one compile each) rather than op by op: the same gradients, in seconds instead of a minute
    g_fast = jax.jit(jax.grad(lambda p: loss_fn(fast, p, fast.bias, toks)[0]))(fast.params)
    g_ref = jax.jit(jax.grad(lambda p: loss_fn(ref, p, ref.bias, toks)[0]))(ref.params)
    for name in g_ref:
        np.testing.assert_allclose(np.asarray(g_fast[name]), np.asarray(g_ref[name]), rtol=2e-4, atol=2e-6,
                                   err_msg=name)


@pytest.mark.parametrize("k", [1, 2, 3])
def test_top_k_indices_are_lax_top_k_ties_included(k):
    rng = np.random.default_rng(k)
    continuous = rng.normal(size=(4, 64, 8))
    tied = rng.integers(0, 3, size=(4, 64, 8))  # many equal scores in a row: the lowest index must win
    for x in (continuous, tied):
        x = jnp.asarray(x, jnp.float32)
        want = jax.lax.top_k(x, k)[1]
        got = jax.jit(top_k_indices, static_argnums=1)(x, k)
        assert got.dtype == want.dtype
        np.testing.assert_array_equal(np.asarray(got), np.asarray(want))
