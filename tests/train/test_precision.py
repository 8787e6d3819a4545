"""Mixed precision: bfloat16 products with float32 accumulation, their own backward pass, and real training."""

import dataclasses
import re
from pathlib import Path

import jax
import jax.numpy as jnp
import numpy as np
import pandas as pd
import pytest

from ladder.spec import LadderSpec, ModelSpec, RungSpec, SpecError, validate
from ladder.trainers.builtin import precision, train


def _bf16_round(a) -> np.ndarray:
    return np.asarray(jnp.asarray(a).astype(jnp.bfloat16).astype(jnp.float32), np.float64)


def _operands(kind: str):
    rng = np.random.default_rng(0)
    if kind == "expert_dot":
        x, w, g = rng.normal(size=(3, 40, 24)), rng.normal(size=(3, 24, 56)), rng.normal(size=(3, 40, 56))
    else:
        x, w, g = rng.normal(size=(5, 8, 24)), rng.normal(size=(24, 56)), rng.normal(size=(5, 8, 56))
    return (jnp.asarray(a, jnp.float32) for a in (x, w, g))


def _reference(kind, x, w, g):
    """float64 products of the bf16-rounded operands and cotangent: what the bf16 path must compute."""
    xr, wr, gr = _bf16_round(x), _bf16_round(w), _bf16_round(g)
    if kind == "expert_dot":
        return xr @ wr, gr @ np.swapaxes(wr, 1, 2), np.swapaxes(xr, 1, 2) @ gr
    x2, g2 = xr.reshape(-1, xr.shape[-1]), gr.reshape(-1, gr.shape[-1])
    return xr @ wr, (g2 @ wr.T).reshape(xr.shape), x2.T @ g2


def _rel(a, b) -> float:
    return float(np.linalg.norm(np.asarray(a, np.float64) - b) / np.linalg.norm(b))


@pytest.mark.parametrize("kind", ["dot", "expert_dot"])
def test_bf16_products_and_their_gradients_round_operands_and_cotangents(kind):
    x, w, g = _operands(kind)
    fn = getattr(precision, kind)

    def value_and_grads(dtype):
        y = jax.jit(lambda x, w: fn(x, w, dtype))(x, w)
        dx, dw = jax.jit(jax.grad(lambda x, w: jnp.sum(fn(x, w, dtype) * g), argnums=(0, 1)))(x, w)
        return y, dx, dw

    got = value_and_grads("bfloat16")
    f32 = value_and_grads("float32")
    for name, a, ref, exact in zip(("y", "dx", "dw"), got, _reference(kind, x, w, g), f32, strict=True):
        assert a.dtype == jnp.float32 and a.shape == ref.shape, name
        assert _rel(a, ref) < 1e-5, name  # bf16 operands, float32 accumulation, right transposes
        assert 1e-4 < _rel(a, np.asarray(exact, np.float64)) < 2e-2, name  # really rounded, not float32


def _dot_operand_dtypes(hlo: str) -> list[tuple[str, ...]]:
    """For every dot in a compiled module, the element types of its operands."""
    found = []
    for block in re.split(r"\n(?=\S)", hlo):  # one computation per block
        types = dict(re.findall(r"%([\w.\-]+) = (\w+)\[", block))
        for operands in re.findall(r"\w+\[[^\]]*\]\S* dot\(([^)]*)\)", block):
            found.append(tuple(types.get(op.strip().lstrip("%"), "?") for op in operands.split(",")))
    return found


def _cpu_has_bf16_dots() -> bool:
    cpuinfo = Path("/proc/cpuinfo")
    return cpuinfo.exists() and "avx512_bf16" in cpuinfo.read_text()


@pytest.mark.skipif(jax.default_backend() != "cpu" or not _cpu_has_bf16_dots(),
                    reason="XLA upcasts bf16 dots where the CPU has no bf16 dot instructions")
def test_forward_and_both_backward_products_compile_to_bf16_dots():
    x, w = jnp.ones((256, 128)), jnp.ones((128, 384))
    grad = jax.jit(jax.grad(lambda x, w: jnp.sum(precision.dot(x, w, "bfloat16") ** 2), argnums=(0, 1)))
    dots = _dot_operand_dtypes(grad.lower(x, w).compile().as_text())
    # forward, dx and dw: the weight gradient is the product XLA upcasts unless x^T is laid out row-major
    assert len(dots) == 3 and all(d == ("bf16", "bf16") for d in dots), dots
    f32 = jax.jit(jax.grad(lambda x, w: jnp.sum(precision.dot(x, w, "float32") ** 2), argnums=(0, 1)))
    assert all(d == ("f32", "f32") for d in _dot_operand_dtypes(f32.lower(x, w).compile().as_text()))


def test_compute_dtype_is_validated():
    rung = RungSpec(name="r", model=ModelSpec(d_model=32, n_layers=2, n_heads=2, compute_dtype="fp8"), tokens=4096)
    with pytest.raises(SpecError) as err:
        validate(LadderSpec(name="l", rungs=(rung,)))
    assert err.value.problems == ["rungs[0].model.compute_dtype: 'fp8' is not one of float32, bfloat16"]


@pytest.mark.parametrize("which", ["dense", "moe"])
def test_bf16_training_tracks_float32_and_resumes_bit_identically(which, dense_spec, moe_spec, data_spec, tmp_path):
    from conftest import resumable_rung

    steps = 24
    f32_rung = resumable_rung(dense_spec if which == "dense" else moe_spec, steps)
    rung = dataclasses.replace(f32_rung, model=dataclasses.replace(f32_rung.model, compute_dtype="bfloat16"))
    assert train(f32_rung, data_spec, tmp_path / "f32")["status"] == "SUCCESS"
    full = train(rung, data_spec, tmp_path / "full")
    assert full["status"] == "SUCCESS"
    f32_loss = pd.read_json(tmp_path / "f32" / "metrics.jsonl", lines=True)["loss"]
    loss = pd.read_json(tmp_path / "full" / "metrics.jsonl", lines=True)["loss"]
    assert float(loss.iloc[-1]) < float(loss.iloc[0]) - 0.5  # it learns
    # the same run up to bf16 rounding: close to float32 at every step, yet not the float32 numbers
    assert float(np.max(np.abs(loss - f32_loss) / f32_loss)) < 0.02
    assert not np.array_equal(loss.to_numpy(), f32_loss.to_numpy())

    first = train(rung, data_spec, tmp_path / "resumed", max_steps=12)
    assert first["complete"] is False
    resumed = train(rung, data_spec, tmp_path / "resumed")
    assert resumed["status"] == "SUCCESS"
    got = pd.read_json(tmp_path / "resumed" / "metrics.jsonl", lines=True)
    assert got["loss"].tolist() == loss.tolist()  # bit for bit
    assert resumed["final_eval_loss"] == full["final_eval_loss"]
