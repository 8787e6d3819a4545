"""Marin's shapes as this tool counts them: grouped-query attention, d/2 latent experts and d/2 shared
experts, within 0.05% of Marin's own formula; shapes the trainer here cannot build are refused in one line."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from ladder.spec import SpecError, load_spec, validate

MARIN = Path(__file__).resolve().parents[2] / "experiments" / "marin_moe_535b.py"


def marin_active(d: int, layers: int, heads: int, kv: int, experts: int = 384, k: int = 8) -> int:
    """Marin's _active_params (small_scale_abl_launch.py): no norms, expert and latent width d/2."""
    half = d // 2
    attn = 2 * d * heads * 128 + 2 * d * kv * 128
    return layers * (attn + d * experts + k * 3 * half * half + 2 * d * half + 2 * 3 * d * half)


def test_counts_follow_marin_s_formula():
    spec = load_spec(MARIN)
    for run in spec.all_runs():
        m = run.model
        theirs = marin_active(m.d_model, m.n_layers, m.n_heads, m.n_kv_heads)
        assert m.params_active == pytest.approx(theirs, rel=5e-4)
        assert m.params_active > theirs  # ours also counts the RMSNorm scales
    assert spec.hero.steps == 390_251 and spec.hero.tokens == 18_005_144_633_344
    assert [r.name for r in spec.rungs] == ["d768", "d1024", "d1536", "d2048"]


def test_bad_kv_heads_and_untrainable_shapes_are_one_line():
    spec = load_spec(MARIN)
    rung = spec.rungs[0]
    bad = dataclasses.replace(rung, model=dataclasses.replace(rung.model, n_kv_heads=4))
    with pytest.raises(SpecError) as info:
        validate(dataclasses.replace(spec, rungs=(bad, *spec.rungs[1:])))
    assert "rungs[0].model.n_kv_heads: n_heads 6 is not a multiple of n_kv_heads 4" in info.value.problems
    from ladder.train.model import build

    small = dataclasses.replace(rung.model, d_model=64, n_heads=2, n_kv_heads=1, n_experts=4, top_k=2,
                                expert_d_ff=32, expert_latent=32, shared_d_ff=32, vocab=256)
    with pytest.raises(ValueError, match="does not build grouped-query attention or latent experts"):
        build(small, seed=0)
