"""Marin's shapes as this tool counts and builds them: grouped-query attention, d/2 latent experts and
d/2 shared experts, within 0.05% of Marin's own formula."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest
from patience import HANG_S

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


def test_bad_kv_heads_are_one_line():
    spec = load_spec(MARIN)
    rung = spec.rungs[0]
    bad = dataclasses.replace(rung, model=dataclasses.replace(rung.model, n_kv_heads=4))
    with pytest.raises(SpecError) as info:
        validate(dataclasses.replace(spec, rungs=(bad, *spec.rungs[1:])))
    assert "rungs[0].model.n_kv_heads: n_heads 6 is not a multiple of n_kv_heads 4" in info.value.problems


def test_a_small_model_of_marin_s_shape_builds_as_counted_and_learns():
    """Grouped-query attention and latent experts, as the trainer builds them: its parameters are the
    spec's count, and a few AdamW steps on one batch lower its loss."""
    import jax
    import numpy as np
    import optax

    from ladder.spec import ModelSpec
    from ladder.trainers.builtin.flops import count_params
    from ladder.trainers.builtin.model import build, loss_fn

    spec = ModelSpec(d_model=64, n_layers=2, n_heads=4, n_kv_heads=2, vocab=256, tie_embeddings=False, qk_norm=True,
                     n_experts=8, top_k=2, n_shared=2, expert_d_ff=32, expert_latent=32, shared_d_ff=32)
    fm = build(spec, seed=0)
    counted = count_params({k: np.asarray(a) for k, a in fm.params.items()})
    assert counted["params_total"] == spec.params_total
    assert fm.params["layers.0.attn.wqkv"].shape == (64, 64 + 2 * 2 * 16)
    assert fm.params["layers.0.mlp.w13"].shape == (8, 32, 64)
    tokens = np.random.default_rng(0).integers(0, 256, size=(4, 33))
    opt = optax.adamw(3e-3)
    params, state = fm.params, opt.init(fm.params)

    @jax.jit
    def step(params, state):
        (loss, _), grads = jax.value_and_grad(lambda p: loss_fn(fm, p, fm.bias, tokens), has_aux=True)(params)
        updates, state = opt.update(grads, state, params)
        return optax.apply_updates(params, updates), state, loss

    losses = []
    for _ in range(8):
        params, state, loss = step(params, state)
        losses.append(float(loss))
    assert np.all(np.isfinite(losses)) and losses[-1] < losses[0] - 0.05


def test_the_declared_tokenizer_plans_and_refuses_to_train(tmp_path):
    """Marin's tokenizer is declared (Llama 3's 128,256 tokens), not held: the model's vocab is its size,
    `ladder plan` reads nothing, and `ladder submit` with rungs left to train is one line, exit 2, nothing
    written (importing and forecasting: tests/ladder/test_import_results.py)."""
    import json
    import os
    import subprocess
    import sys

    spec = load_spec(MARIN)
    assert spec.data.tokenizer.startswith("declared:128256:")
    assert {r.model.vocab for r in spec.all_runs()} == {128_256}
    shrunk = load_spec(MARIN, ["data.tokenizer=declared:1000:a smaller one"])  # a set vocab is the model's
    assert {r.model.vocab for r in shrunk.all_runs()} == {128_256}
    with pytest.raises(SpecError, match=r"declared:<vocab>:<name>"):
        load_spec(MARIN, ["data.tokenizer=declared:lots:llama"])
    with pytest.raises(SpecError, match=r"rungs\[0\]\.model\.vocab: 128256 is smaller than data.tokenizer's 200000"):
        load_spec(MARIN, ["data.tokenizer=declared:200000:a larger one"])

    ladder = str(Path(sys.executable).parent / "ladder")
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "RAY_AUTH_MODE": "disabled"}
    root = tmp_path / "root"
    plan = subprocess.run([ladder, "plan", str(MARIN), "--root", str(root), "--json"], capture_output=True, text=True,
                          env=env, timeout=HANG_S)
    assert plan.returncode == 0, plan.stderr[-1500:]
    steps = [s["step"] for s in json.loads(plan.stdout)["steps"]]
    assert steps == ["d768", "d1024", "d1536", "d2048", "fit", "predict", "gate", "report"]  # nothing to tokenize
    proc = subprocess.run([ladder, "submit", str(MARIN), "--root", str(root)], capture_output=True, text=True, env=env,
                          timeout=HANG_S)
    assert proc.returncode == 2, proc.stdout[-1500:] + proc.stderr[-1500:]
    err = proc.stderr.strip()
    assert len(err.splitlines()) == 1 and "Traceback" not in err, err
    assert "data.tokenizer: declared:128256:" in err and "d768, d1024, d1536, d2048 cannot train" in err
    assert not root.exists()
