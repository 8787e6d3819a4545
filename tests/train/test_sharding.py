"""Named sharding, sharded initialisation, microbatch accumulation and remat.

Logical axes map to mesh axes by rules (unit tests here); the rest runs in a child process with four
forced host devices (XLA_FLAGS must be set before jax is imported) that writes what it measured to JSON.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from host_devices import measure_in_child

from ladder.trainers.builtin import axes

# Accumulating 4 microbatches reorders the batch's sums (per pass, then over passes): measured at most
# 6e-7 relative on the losses of these runs here (MoE; dense 2e-7); the bound leaves room for other CPUs. The same bound as
# test_parallel's one-vs-two devices.
RTOL = 1e-4

CHILD = textwrap.dedent("""
    import json, sys
    import jax
    import numpy as np
    sys.path.insert(0, sys.argv[2])
    from conftest import DENSE, MOE, make_rung
    from dataclasses import replace
    from ladder.spec import DataSpec, DomainSpec, Resources, ScheduleSpec
    from ladder.trainers.builtin import optim, train
    from ladder.trainers.builtin.model import build
    from ladder.trainers.builtin.parallel import plan

    assert len(jax.local_devices()) == 4, jax.local_devices()
    out = sys.argv[1]
    data = DataSpec(domains=(DomainSpec("prose", "builtin:kjv", 1.0),), eval_tokens=256)
    res = {}

    # Sharded init: the live buffers on each device after layout.init, against the whole state.
    wide = replace(DENSE, d_model=64, n_heads=4)
    for mode in ("fsdp", "replicated"):
        r = make_rung(wide, batch=8, resources=Resources(devices=4, parallel=mode))
        fm = build(r.model, 3, host=True)
        opt = optim.make_optimizer(r.optim, fm.params)
        layout = plan(r, fm.params, fm.bias, jax.eval_shape(opt.init, fm.params))
        before = {id(a) for a in jax.live_arrays()}
        p, b, o = layout.init(fm.params, fm.bias, opt)
        whole = sum(int(np.prod(a.shape)) * a.dtype.itemsize for a in jax.tree.leaves((p, b, o)))
        per_device = {str(d): 0 for d in jax.local_devices()}
        largest = 0
        for a in jax.live_arrays():
            if id(a) in before:
                continue
            for s in a.addressable_shards:
                per_device[str(s.device)] += s.data.nbytes
                largest = max(largest, s.data.nbytes)
        compiled = jax.jit(opt.init, in_shardings=(layout.params,), out_shardings=layout.opt).lower(p).compile()
        mem = compiled.memory_analysis()
        res[f"init_{mode}"] = {"whole": whole, "per_device": per_device, "largest_shard": largest,
                               "largest_leaf": max(int(np.prod(a.shape)) * a.dtype.itemsize
                                                   for a in jax.tree.leaves(p)),
                               "opt_init_output_bytes": int(mem.output_size_in_bytes) if mem else None,
                               "opt_whole": sum(int(np.prod(a.shape)) * a.dtype.itemsize for a in jax.tree.leaves(o))}
        del p, b, o

    # Expert parallelism: a MoE's experts split over the expert axis, the rest over fsdp.
    r = make_rung(MOE, batch=8, resources=Resources(devices=4, parallel="fsdp", expert_parallel=2))
    fm = build(r.model, 3, host=True)
    opt = optim.make_optimizer(r.optim, fm.params)
    layout = plan(r, fm.params, fm.bias, jax.eval_shape(opt.init, fm.params))
    res["expert_mesh"] = dict(layout.mesh.shape)
    res["expert_w13"] = [str(a) for a in layout.params["layers.0.mlp.w13"].spec]

    # Microbatch accumulation and remat, on one device and on the fsdp mesh of two.
    def losses(d):
        return [json.loads(line)["loss"] for line in open(d + "/metrics.jsonl")]

    runs = {}
    for name, model in (("dense", DENSE), ("moe", MOE)):
        for key, res_ in (("one", Resources(devices=1)), ("mb4", Resources(devices=1, microbatches=4)),
                          ("mb2_fsdp2_remat", Resources(devices=2, parallel="fsdp", microbatches=2, remat="full")),
                          ("ep2_fsdp2", Resources(devices=4, parallel="fsdp", expert_parallel=2))):
            if key == "ep2_fsdp2" and model is not MOE:
                continue
            r = make_rung(model, steps=6, batch=8, checkpoint_every=6, eval_every=6, resources=res_,
                          schedule=ScheduleSpec(kind="wsd", warmup_steps=2))
            d = f"{out}/{name}-{key}"
            train(r, data, d, steps_per_call=6)
            runs[f"{name}-{key}"] = losses(d)
    res["runs"] = runs
    json.dump(res, open(out + "/measured.json", "w"))
    """)


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    return measure_in_child(CHILD, 4, tmp_path_factory.mktemp("sharding"))


def test_logical_axes_of_every_parameter_kind():
    assert axes.param_axes("embed", 2) == ("vocab", "embed")
    assert axes.param_axes("layers.0.attn.wqkv", 2) == ("embed", "qkv")
    assert axes.param_axes("layers.1.mlp.w13", 2) == ("embed", "mlp")
    assert axes.param_axes("layers.1.mlp.w13", 3) == ("expert", "embed", "mlp")
    assert axes.param_axes("layers.1.mlp.w2", 3) == ("expert", "mlp", "embed")
    assert axes.param_axes("layers.0.attn_norm.scale", 1) == ("norm",)


def test_rules_shard_embed_over_fsdp_and_experts_over_expert():
    fsdp = axes.rules("fsdp")
    mesh = {"data": 1, "fsdp": 4, "expert": 2}
    assert axes.spec_for((8, 64, 128), ("expert", "embed", "mlp"), fsdp, mesh) == axes.P("expert", "fsdp")
    # an indivisible dimension stays whole; a small leaf stays replicated
    assert axes.spec_for((5, 66, 128), ("expert", "embed", "mlp"), fsdp, mesh) == axes.P()
    assert axes.spec_for((64,), ("norm",), fsdp, mesh) == axes.P()
    # replicated mode keeps parameters whole; the batch always splits over every axis that divides it
    assert axes.spec_for((256, 64), ("vocab", "embed"), axes.rules("replicated"), mesh) == axes.P()
    assert axes.spec_for((16, 8), ("batch", None), fsdp, mesh, min_size=0) == axes.P(("fsdp", "expert"))


@pytest.mark.slow
def test_sharded_init_never_holds_the_whole_state_on_one_device(measured):
    got = measured["init_fsdp"]
    for device, held in got["per_device"].items():
        # a quarter of the sharded leaves plus the small replicated ones (norm scales): well under half
        assert held < 0.5 * got["whole"], (device, held, got["whole"])
    assert got["largest_shard"] < got["largest_leaf"]
    assert got["opt_init_output_bytes"] < 0.5 * got["opt_whole"], got
    rep = measured["init_replicated"]  # the contrast: replicated puts the whole state on every device
    assert all(held == rep["whole"] for held in rep["per_device"].values()), rep


@pytest.mark.slow
@pytest.mark.parametrize("model", ["dense", "moe"])
def test_four_microbatches_equal_one_batch(measured, model):
    one, acc = measured["runs"][f"{model}-one"], measured["runs"][f"{model}-mb4"]
    assert len(one) == len(acc) == 6
    np.testing.assert_allclose(acc, one, rtol=RTOL)
    assert one[-1] < one[0]  # it trained: the comparison is of a moving curve


@pytest.mark.slow
@pytest.mark.parametrize("model", ["dense", "moe"])
def test_accumulation_with_remat_on_an_fsdp_mesh_matches(measured, model):
    np.testing.assert_allclose(measured["runs"][f"{model}-mb2_fsdp2_remat"], measured["runs"][f"{model}-one"],
                               rtol=RTOL)


@pytest.mark.slow
def test_expert_parallelism_splits_the_experts_and_trains_the_same_losses(measured):
    assert measured["expert_mesh"] == {"data": 1, "fsdp": 2, "expert": 2}
    assert measured["expert_w13"][:2] == ["expert", "fsdp"]  # (E, d, 2f): experts, then d_model
    np.testing.assert_allclose(measured["runs"]["moe-ep2_fsdp2"], measured["runs"]["moe-one"], rtol=RTOL)
