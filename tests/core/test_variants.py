"""A variant without copying a spec: LadderSpec.variants, `--variant NAME` (the ladder <name>+NAME) and
`--set runs.<field>` reaching every rung and the hero; the base ladder's own steps do not move."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ladder.spec import SpecError, apply_overrides, apply_variant, load_spec

TINY = str(Path(__file__).resolve().parents[2] / "experiments" / "tiny.py")


def test_set_runs_reaches_every_rung_and_the_hero():
    spec = load_spec(TINY, ["runs.optim.b2=0.99", "runs.schedule.decay_frac=0.3"])
    assert {r.optim.b2 for r in spec.all_runs()} == {0.99} and len(spec.all_runs()) == len(load_spec(TINY).all_runs())
    assert {r.schedule.decay_frac for r in spec.all_runs()} == {0.3}
    with pytest.raises(SpecError, match=r"--set runs.optim.b3: OptimSpec has no field 'b3'"):
        load_spec(TINY, ["runs.optim.b3=0.99"])
    with pytest.raises(SpecError, match="'runs' needs a field of a run"):
        load_spec(TINY, ["runs=1"])


def test_a_variant_is_its_own_ladder_with_its_overrides_on_every_run():
    base = load_spec(TINY)
    dense = load_spec(TINY, variant="dense")
    assert dense.name == "tiny+dense" and dense.variants == {}
    assert all(not r.model.is_moe for r in dense.all_runs()) and all(r.model.is_moe for r in base.all_runs())
    assert [r.name for r in dense.all_runs()] == [r.name for r in base.all_runs()]
    mix = load_spec(TINY, variant="code70")
    assert [d.weight for d in mix.data.domains] == [0.7, 0.15, 0.15]
    assert [r.flops for r in mix.all_runs()] == [r.flops for r in base.all_runs()]
    # --set applies after the variant, so it can still move one of its fields
    assert load_spec(TINY, ["data.domains[0].weight=0.6"], variant="code70").data.domains[0].weight == 0.6


def test_the_base_ladders_steps_do_not_move_and_the_variants_do():
    from ladder.dag.stages import build_steps

    base = {s.name: s.config for s in build_steps(load_spec(TINY))}
    no_variants = {s.name: s.config for s in build_steps(dataclasses.replace(load_spec(TINY), variants={}))}
    assert base == no_variants  # declaring variants changes none of tiny's own steps
    mix = {s.name: s.config for s in build_steps(load_spec(TINY, variant="code70"))}
    assert mix["rung_1"]["ladder"] == "tiny+code70" and mix["rung_1"]["data"] != base["rung_1"]["data"]


def test_unknown_variants_and_fields_are_one_line_each():
    spec = load_spec(TINY, resolve_rules=False)
    with pytest.raises(SpecError, match=r"--variant nope: tiny declares no such variant \(it declares: code70, dense\)"):
        apply_variant(spec, "nope")
    bad = dataclasses.replace(spec, variants={"typo": {"runs.model.n_expertz": 0}})
    with pytest.raises(SpecError) as info:
        apply_variant(bad, "typo")
    assert len(info.value.problems) == 1
    assert info.value.problems[0].startswith("variants['typo'] runs.model.n_expertz: ModelSpec has no field 'n_expertz'")
    with pytest.raises(SpecError, match="expected a mapping"):
        apply_variant(dataclasses.replace(spec, variants={"x": 3}), "x")
    assert apply_overrides(spec, ["runs.seq_len=64"]).hero.seq_len == 64


def test_a_heros_mix_switch_is_forecast_with_the_effect_its_replay_measured():
    from ladder.analysis.effect import after_change
    from ladder.spec import RunChange

    base = load_spec(TINY)
    mix = {"code": 0.7, "bible_web": 0.15, "bible_kjv": 0.15}
    step = round(0.28 * base.hero.steps)
    a = dataclasses.replace(base, hero=dataclasses.replace(base.hero, changes=(RunChange(step, "data mix", weights=mix),)))
    b = load_spec(TINY, [f"data.switch_at={step / base.hero.steps!r}", f"data.switch_weights={mix!r}"])
    summary = {"predicted_final_loss": 1.30, "lower": 1.26, "upper": 1.34, "actual_final_loss": 1.285}
    effect = {"at_hero": {"delta": -0.02, "delta_lower": -0.03, "delta_upper": -0.01}}
    out = after_change(a, b, summary, effect)
    assert out["replayed_by_b"] and out["frac"] == pytest.approx(0.28, abs=1e-3)
    assert out["predicted_final_loss"] == pytest.approx(1.28)  # the rungs-only forecast moved by the switch's effect
    assert out["lower"] == pytest.approx(1.28 - (0.04 ** 2 + 0.01 ** 2) ** 0.5)  # both bands' half-widths in quadrature
    assert out["relative_error"] == pytest.approx(1.28 / 1.285 - 1) and out["unchanged_relative_error"] == pytest.approx(1.30 / 1.285 - 1)
    assert out["inside"]
    assert after_change(base, b, summary, effect) is None  # a hero without a declared switch
    assert not after_change(a, load_spec(TINY), summary, effect)["replayed_by_b"]
    assert after_change(a, b, {"predicted_final_loss": None}, effect)["ok"] is False
