"""Data parallelism through jax.sharding on two forced host devices: same losses as one device, really sharded.

XLA_FLAGS must be set before jax is imported, so the runs happen in a child process that writes
what it measured to a JSON file; the assertions are here.
"""

from __future__ import annotations

import textwrap

import numpy as np
import pytest
from host_devices import measure_in_child

from ladder.spec import Resources, SpecError, validate

# Summation order is all that differs between one and two devices (the gradient's all-reduce, the
# loss mean): measured at most 2e-6 relative over these runs; the bound leaves room for other CPUs.
RTOL = 1e-4

CHILD = textwrap.dedent("""
    import json, sys
    import jax
    import numpy as np
    sys.path.insert(0, sys.argv[2])
    from conftest import DENSE, MOE, make_rung
    from ladder.spec import DataSpec, DomainSpec, Resources, ScheduleSpec, SpecError
    from ladder.trainers.builtin import optim, train
    from ladder.trainers.builtin.data import Mixture
    from ladder.trainers.builtin.jitted import make_train_chunk
    from ladder.trainers.builtin.model import build
    from ladder.trainers.builtin.parallel import plan

    assert len(jax.local_devices()) == 2, jax.local_devices()
    out = sys.argv[1]
    data = DataSpec(domains=(DomainSpec("prose", "builtin:kjv", 0.6), DomainSpec("docs", "builtin:pydoc_topics", 0.4)),
                    eval_tokens=256)

    def rung(model, devices, mode, **kw):
        # 16 steps in two 8-step chunks (checkpoint at 8, eval at 16): one compiled chunk per run.
        return make_rung(model, steps=16, checkpoint_every=8, eval_every=16, log_every=1,
                         resources=Resources(devices=devices, parallel=mode),
                         schedule=ScheduleSpec(kind="wsd", warmup_steps=2, decay_frac=0.25), **kw)

    def losses(d):
        return [json.loads(line)["loss"] for line in open(d + "/metrics.jsonl")]

    res = {"runs": {}}
    for name, model in (("dense", DENSE), ("moe", MOE)):
        for devices, mode in ((1, "replicated"), (2, "replicated"), (2, "fsdp")):
            d = f"{out}/{name}-{devices}-{mode}"
            r = train(rung(model, devices, mode), data, d, steps_per_call=8)
            res["runs"][f"{name}-{devices}-{mode}"] = {
                "loss": losses(d), "eval": r["final_eval_loss"], "devices": r["devices"], "parallel": r["parallel"]}

    # Resume onto the same FSDP sharding: stop at the step-8 checkpoint, continue in a second call.
    d = f"{out}/dense-fsdp-resumed"
    first = train(rung(DENSE, 2, "fsdp"), data, d, steps_per_call=8, max_steps=8)
    assert first["complete"] is False and first["steps"] == 8, first
    train(rung(DENSE, 2, "fsdp"), data, d, steps_per_call=8)
    res["resumed"] = losses(d)

    # What the jitted step does with the state: one chunk on the mesh, then look at the shards.
    for mode in ("fsdp", "replicated"):
        r = rung(DENSE, 2, mode)
        fm = build(r.model, 3)
        opt = optim.make_optimizer(r.optim, fm.params)
        layout = plan(r, fm.params, fm.bias, opt.init(fm.params))
        p, b, o = layout.place(fm.params, fm.bias, opt.init(fm.params))
        chunk = make_train_chunk(fm, opt, optim.lr_multipliers(fm.param_names, r.optim), layout)
        batches = Mixture(data, r.seq_len, 3).batches(0, 1, r.batch_size)
        p, b, o, _ = chunk(p, b, o, batches, np.full(1, 1e-3, np.float32))
        mu = o[1].mu
        res[mode] = {n: {"shape": list(p[n].shape), "shard": list(p[n].addressable_shards[0].data.shape),
                         "mu_shard": list(mu[n].addressable_shards[0].data.shape),
                         "replicated": bool(p[n].sharding.is_fully_replicated)} for n in p}

    # The collectives XLA puts into the replicated MoE step: the gradients' one all-reduce, no gather of the
    # batch (XLA's TopK cannot be split along it, so routing through it gathered every row onto each device).
    r = rung(MOE, 2, "replicated")
    fm = build(r.model, 3)
    opt = optim.make_optimizer(r.optim, fm.params)
    layout = plan(r, fm.params, fm.bias, opt.init(fm.params))
    p, b, o = layout.place(fm.params, fm.bias, opt.init(fm.params))
    chunk = make_train_chunk(fm, opt, optim.lr_multipliers(fm.param_names, r.optim), layout, steps_per_call=2)
    batches = Mixture(data, r.seq_len, 3).batches(0, 2, r.batch_size)
    hlo = chunk.jitted.lower(p, b, o, batches, np.full(2, 1e-3, np.float32), np.int32(2)).compile().as_text()
    res["moe_collectives"] = {op: hlo.count(f" {op}(") for op in ("all-gather", "all-reduce", "all-to-all")}

    # Device counts that cannot work are one line naming the field, before any compile.
    errors = {}
    for key, r in (("too_many", rung(DENSE, 4, "fsdp")), ("indivisible", rung(DENSE, 2, "fsdp", batch=3))):
        try:
            train(r, data, f"{out}/bad-{key}")
            errors[key] = None
        except SpecError as exc:
            errors[key] = exc.problems
    res["errors"] = errors
    json.dump(res, open(out + "/measured.json", "w"))
    """)


@pytest.fixture(scope="module")
def measured(tmp_path_factory):
    return measure_in_child(CHILD, 2, tmp_path_factory.mktemp("parallel"))


@pytest.mark.slow
@pytest.mark.parametrize("model", ["dense", "moe"])
@pytest.mark.parametrize("mode", ["replicated", "fsdp"])
def test_two_devices_match_one_device(measured, model, mode):
    one = measured["runs"][f"{model}-1-replicated"]
    two = measured["runs"][f"{model}-2-{mode}"]
    assert one["devices"] == 1 and one["parallel"] == "single"
    assert two["devices"] == 2 and two["parallel"] == mode
    assert len(one["loss"]) == len(two["loss"]) == 16
    rel = np.max(np.abs(np.subtract(two["loss"], one["loss"])) / np.abs(one["loss"]))
    print(f"{model} {mode}: max relative loss difference 2 vs 1 device {rel:.2e} (bound {RTOL:g})")
    np.testing.assert_allclose(two["loss"], one["loss"], rtol=RTOL, atol=0)
    np.testing.assert_allclose(two["eval"], one["eval"], rtol=RTOL, atol=0)


@pytest.mark.slow
def test_fsdp_resume_restores_onto_the_sharding_bit_identically(measured):
    assert measured["resumed"] == measured["runs"]["dense-2-fsdp"]["loss"]


@pytest.mark.slow
def test_fsdp_shards_large_parameters_and_their_adam_moments(measured):
    fsdp, rep = measured["fsdp"], measured["replicated"]
    sharded = [n for n, v in fsdp.items() if not v["replicated"]]
    # every matrix of the tiny dense model is large enough to shard; norm scales (d_model,) are not
    assert {"embed", "layers.0.attn.wqkv", "layers.0.mlp.w13", "layers.1.mlp.w2"} <= set(sharded)
    assert fsdp["final_norm.scale"]["replicated"]
    for n in sharded:
        v = fsdp[n]
        assert np.prod(v["shard"]) * 2 == np.prod(v["shape"]), (n, v)
        assert v["mu_shard"] == v["shard"], (n, v)
    for n, v in rep.items():
        assert v["replicated"] and v["shard"] == v["shape"] and v["mu_shard"] == v["shape"], (n, v)


@pytest.mark.slow
def test_the_replicated_moe_step_syncs_once_with_no_gather_of_the_batch(measured):
    assert measured["moe_collectives"] == {"all-gather": 0, "all-reduce": 1, "all-to-all": 0}, measured["moe_collectives"]


@pytest.mark.slow
def test_device_counts_that_cannot_work_are_one_line(measured):
    too_many, indivisible = measured["errors"]["too_many"], measured["errors"]["indivisible"]
    assert too_many and len(too_many) == 1 and too_many[0].startswith("t.resources.devices: 4 devices asked for")
    assert indivisible and len(indivisible) == 1
    assert indivisible[0].startswith("t.resources.devices: batch_size 3 does not split over 2 devices")


def test_spec_validation_of_devices_and_parallel():
    from conftest import DENSE, make_rung

    from ladder.spec import LadderSpec

    bad = make_rung(DENSE, batch=6, resources=Resources(devices=4, parallel="zero3"))
    with pytest.raises(SpecError) as info:
        validate(LadderSpec(name="x", rungs=(bad,)))
    assert info.value.problems == [
        "rungs[0].resources.parallel: 'zero3' is not one of replicated, fsdp",
        "rungs[0].resources.devices: batch_size 6 does not split over 4 devices; "
        "make batch_size a multiple of 4 or set devices to a divisor of 6",
    ]
    validate(LadderSpec(name="x", rungs=(make_rung(DENSE, batch=8, resources=Resources(devices=4, parallel="fsdp")),)))
