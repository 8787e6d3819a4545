"""ladder/spec/: counting against a hand count, rules, overrides, validation."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ladder.spec import (
    LadderSpec,
    ModelSpec,
    OptimSpec,
    Rule,
    RungSpec,
    SpecError,
    apply_overrides,
    deepseek_batch_rule,
    deepseek_lr_rule,
    load_spec,
    resolve,
    resolve_rung,
    rung_from_dict,
    to_dict,
    validate,
)

REPO = Path(__file__).resolve().parents[2]


def test_dense_counts_match_a_hand_count():
    m = ModelSpec(d_model=64, n_layers=2, n_heads=4, d_ff=256, vocab=256)
    per_layer = 4 * 64 * 64 + 3 * 64 * 256 + 2 * 64  # q,k,v,o + SwiGLU (3 matrices) + 2 RMSNorm scales
    assert m.params_non_embedding == 2 * per_layer + 64  # + final norm
    assert m.params_total == m.params_non_embedding + 256 * 64  # tied embedding counted once
    assert m.params_active == m.params_non_embedding
    untied = dataclasses.replace(m, tie_embeddings=False)
    assert untied.params_total == m.params_total + 256 * 64


def test_moe_counts_match_a_hand_count():
    m = ModelSpec(d_model=32, n_layers=3, n_heads=2, n_experts=8, top_k=2, n_shared=1, expert_d_ff=48, vocab=256)
    attn, norms, router, expert = 4 * 32 * 32, 2 * 32, 32 * 8, 3 * 32 * 48
    assert m.params_non_embedding == 3 * (attn + norms + router + 9 * expert) + 32
    assert m.params_active == 3 * (attn + norms + router + 3 * expert) + 32
    assert m.params_total == m.params_non_embedding + 256 * 32
    # 6 N (active, plus the output projection) + attention 12 L T d
    assert m.flops_per_token(128) == 6 * (m.params_active + 32 * 256) + 12 * 3 * 128 * 32


def test_deepseek_rules_give_published_values():
    # DeepSeek LLM eq. 1 at C = 1e20: lr = 0.3118 * 1e20^-0.125, batch = 0.2920 * 1e20^0.3271 tokens
    assert deepseek_lr_rule()(0, 1e20) == pytest.approx(0.3118 * 1e20 ** -0.125)
    assert deepseek_batch_rule()(0, 1e20) == pytest.approx(0.2920 * 1e20 ** 0.3271)
    assert Rule("power_n", 2.0, -0.5, hi=0.1)(100.0, 0) == 0.1


def _ladder(**rung_changes) -> LadderSpec:
    model = ModelSpec(d_model=32, n_layers=2, n_heads=2, n_experts=4, top_k=2, expert_d_ff=32)
    args = {"model": model, "tokens": 100_000, "batch_size": 8, "seq_len": 64, **rung_changes}
    rungs = tuple(RungSpec(name=f"rung_{i}", **args) for i in range(1, 4))
    return LadderSpec(name="t", rungs=rungs)


def test_rules_resolve_per_rung_and_seed_override_reaches_every_rung():
    spec = _ladder(optim=OptimSpec(lr=Rule("power_c", 0.3118, -0.125)), batch_size=Rule("power_c", 0.292, 0.3271))
    spec = apply_overrides(spec, ["seed=3", "rungs[2].tokens=400000"])
    r = resolve(spec)
    assert [x.seed for x in r.rungs] == [3, 3, 3]
    assert r.rungs[2].tokens == 400_000
    c = r.rungs[2].flops
    assert r.rungs[2].lr == pytest.approx(0.3118 * c ** -0.125)
    assert r.rungs[2].batch_size == max(1, round(0.292 * c ** 0.3271 / 64))
    assert r.rungs[0].lr > r.rungs[2].lr  # more compute, lower LR


def test_rules_of_compute_see_the_vocabulary_of_the_tokenizer():
    """A default vocab follows the tokenizer before any rule is evaluated: the output head's FLOPs at the
    tokenizer's size are in the compute a rule sees, not 256's."""
    from ladder.spec import DataSpec

    spec = _ladder(optim=OptimSpec(lr=Rule("power_c", 0.3118, -0.125)), batch_size=Rule("power_c", 0.292, 0.3271))
    spec = dataclasses.replace(spec, data=DataSpec(tokenizer="declared:32768:a lab's tokenizer"))
    r = resolve(spec)
    rung = r.rungs[0]
    assert rung.model.vocab == 32768
    c = rung.flops
    assert c > resolve(_ladder()).rungs[0].flops * 2  # the head at 32,768 tokens, against 256
    assert rung.lr == pytest.approx(0.3118 * c ** -0.125)
    assert rung.batch_size == max(1, round(0.292 * c ** 0.3271 / 64))


def test_overrides_by_name_wildcard_and_errors():
    spec = apply_overrides(_ladder(), ["rungs[rung_2].model.d_model=48", "rungs[*].seq_len=32"])
    assert spec.rungs[1].model.d_model == 48 and spec.rungs[0].model.d_model == 32
    assert {r.seq_len for r in spec.rungs} == {32}
    with pytest.raises(SpecError, match="has no field 'nope'"):
        apply_overrides(spec, ["rungs[0].nope=1"])
    with pytest.raises(SpecError, match="out of range"):
        apply_overrides(spec, ["rungs[7].tokens=1"])
    with pytest.raises(SpecError, match="expected key=value"):
        apply_overrides(spec, ["seed"])


def test_rung_dict_round_trip():
    r = resolve(_ladder()).rungs[0]
    assert rung_from_dict(to_dict(r)) == r


def test_validation_collects_every_problem_with_its_field():
    bad = _ladder()
    bad = dataclasses.replace(bad, rungs=(
        dataclasses.replace(bad.rungs[0], model=dataclasses.replace(bad.rungs[0].model, top_k=9)),
        dataclasses.replace(bad.rungs[1], tokens=-5),
        bad.rungs[2],
    ))
    with pytest.raises(SpecError) as info:
        validate(bad)
    assert "rungs[0].model.top_k: 9 exceeds n_experts 4" in info.value.problems
    assert any(p.startswith("rungs[1].tokens:") for p in info.value.problems)


def test_shipped_experiments_load():
    for name in ("smoke", "tiny", "marin_moe_535b"):
        spec = load_spec(REPO / "experiments" / f"{name}.py")
        firsts = [r for r in spec.rungs if r.replica == 0]
        assert spec.hero is not None and len(firsts) >= 4
        flops = [r.flops for r in firsts]
        assert flops == sorted(flops)
        assert spec.hero.flops > flops[-1]
        # a replica repeats a size of the ladder, on its own seed
        sizes = {(r.model, r.tokens) for r in firsts}
        assert all((r.model, r.tokens) in sizes for r in spec.rungs if r.replica)
        seeds = [r.seed for r in resolve(spec).rungs]
        assert len(set(seeds)) == 1 + max(r.replica for r in spec.rungs)


def test_replicas_take_their_own_seed_and_leave_the_first_run_s_hash_alone():
    from ladder.dag.stages import build_steps

    spec = load_spec(REPO / "experiments" / "smoke.py")
    spec = dataclasses.replace(spec, rungs=tuple(dataclasses.replace(r, seed=None) for r in spec.rungs))
    rung = spec.rungs[0]
    twin = dataclasses.replace(rung, name=rung.name + "_r1", replica=1)
    with_twin = dataclasses.replace(spec, rungs=(*spec.rungs, twin))
    r = resolve(dataclasses.replace(with_twin, seed=7))
    assert [x.seed for x in r.rungs] == [7] * len(spec.rungs) + [1007]
    assert resolve_rung(r.rungs[-1], 7).seed == 1007  # resolving twice keeps the seed
    plain = {s.name: s for s in build_steps(resolve(spec))}
    both = {s.name: s for s in build_steps(resolve(with_twin))}
    from ladder.executor.hashing import hashed_config

    assert hashed_config(plain[rung.name].config) == hashed_config(both[rung.name].config)
    assert hashed_config(both[twin.name].config)["rung"]["seed"] == 1000


def test_marin_hero_compute_matches_the_published_figure():
    spec = load_spec(REPO / "experiments" / "marin_moe_535b.py")
    assert spec.hero.flops == pytest.approx(2.7e24, rel=0.05)
    assert spec.hero.model.params_total == pytest.approx(535e9, rel=0.05)


def test_fields_added_later_keep_existing_hashes_at_their_default():
    from ladder.dag.stages import build_steps
    from ladder.executor.hashing import hashed_config

    spec = resolve(load_spec(REPO / "experiments" / "smoke.py"))
    rung = spec.rungs[0]
    config = hashed_config({s.name: s for s in build_steps(spec)}[rung.name].config)
    assert rung.model.compute_dtype == "float32" and "compute_dtype" not in config["rung"]["model"]
    bf16 = dataclasses.replace(rung, model=dataclasses.replace(rung.model, compute_dtype="bfloat16"))
    changed = resolve(dataclasses.replace(spec, rungs=(bf16, *spec.rungs[1:])))
    steps = {s.name: s for s in build_steps(changed)}
    assert hashed_config(steps[rung.name].config)["rung"]["model"]["compute_dtype"] == "bfloat16"
