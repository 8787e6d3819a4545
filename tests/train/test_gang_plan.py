"""What a rung larger than one device is planned and accounted as: datasheet peaks x devices for MFU, the
memory-fraction environment, the plan's devices / hosts / microbatches / memory per device, the dry run's
check that a batch splits over processes and microbatches, and the per-shard checkpoint sums."""

from __future__ import annotations

import json
import os
import subprocess
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from patience import HANG_S

from ladder.spec import ModelSpec, Resources, RungSpec
from ladder.trainers.builtin import peaks
from ladder.trainers.builtin.hostdevices import MEM_FRACTION, worker_env
from ladder.trainers.builtin.memory_plan import STATE_BYTES_PER_PARAM, rung_layout

REPO = Path(__file__).resolve().parents[2]
LADDER = str(REPO / ".venv" / "bin" / "ladder")
SMOKE = str(REPO / "experiments" / "smoke.py")


@pytest.mark.parametrize(("kind", "dtype", "want"), [
    ("NVIDIA H100 80GB HBM3", "bfloat16", 989.4e12), ("NVIDIA H100 PCIe", "bfloat16", 756.5e12),
    ("NVIDIA H200", "float32", 66.9e12), ("NVIDIA B200", "bfloat16", 2.25e15), ("NVIDIA GB200", "bfloat16", 2.5e15),
    ("NVIDIA A100-SXM4-80GB", "float32", 19.5e12), ("TPU v4", "bfloat16", 275e12), ("TPU v5 lite", "bfloat16", 197e12),
    ("TPU v5p", "float32", 459e12), ("TPU v6 lite", "bfloat16", 918e12), ("cpu", "float32", None)])
def test_datasheet_peaks_per_device(kind, dtype, want):
    assert peaks.datasheet_peak(kind, dtype) == want


def test_mfu_peak_is_devices_times_the_per_device_peak(monkeypatch):
    monkeypatch.setenv("LADDER_PEAK_FLOPS", "2e12")
    assert peaks.run_peak_flops("bfloat16", 8) == (16e12, "LADDER_PEAK_FLOPS")


def test_memory_fraction_goes_to_a_gpu_runs_environment_only():
    assert worker_env(Resources(gpus=0.5, memory_fraction=0.45))[MEM_FRACTION] == "0.45"
    assert MEM_FRACTION not in worker_env(Resources(gpus=1))
    assert MEM_FRACTION not in worker_env(Resources(cpus=1, memory_fraction=0.45))


def test_fsdp_splits_the_state_and_microbatches_the_activations():
    model = ModelSpec(d_model=256, n_layers=4, n_heads=4)
    base = RungSpec(name="r", model=model, tokens=10**6, batch_size=32, seq_len=256,
                    resources=Resources(gpus=8, devices=8, parallel="fsdp"))
    one = rung_layout(replace(base, resources=Resources(gpus=1, devices=1)))
    eight = rung_layout(base)
    assert one.state_bytes == STATE_BYTES_PER_PARAM * model.params_total
    assert eight.state_bytes == pytest.approx(one.state_bytes / 8)
    assert (one.rows_per_pass, eight.rows_per_pass) == (32, 4)
    assert eight.activation_bytes == pytest.approx(one.activation_bytes / 8)
    micro = rung_layout(replace(base, resources=replace(base.resources, microbatches=4)))
    assert micro.rows_per_pass == 1 and micro.activation_bytes == pytest.approx(eight.activation_bytes / 4)
    gang = rung_layout(replace(base, resources=replace(base.resources, processes=2)))
    assert (gang.devices, gang.processes) == (16, 2)
    full = rung_layout(replace(base, resources=replace(base.resources, remat="full")))
    assert full.activation_bytes < eight.activation_bytes


def _cli(*args):
    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    return subprocess.run([LADDER, *args], capture_output=True, text=True, env=env, timeout=HANG_S)


def test_plan_shows_a_two_host_rung_as_a_gang_and_the_dry_run_checks_its_batch(tmp_path):
    out = _cli("plan", SMOKE, "--root", str(tmp_path), "--json", "--set", "hero.resources.processes=2",
               "--accelerator", "H200")
    assert out.returncode == 0, out.stderr[-2000:]
    # the plan prices with the datasheet table MFU divides by
    assert json.loads(out.stdout)["chip_peak"] == peaks.datasheet_peak("NVIDIA H200", "bfloat16")
    hero = next(r for r in json.loads(out.stdout)["runs"] if r["name"] == "hero")
    assert (hero["hosts"], hero["devices"], hero["microbatches"], hero["rows_per_pass"]) == (2, 2, 1, 8)
    assert hero["memory_per_device"] > 0
    text = _cli("plan", SMOKE, "--root", str(tmp_path), "--set", "hero.resources.processes=2")
    assert any(line.startswith("hero") and "a gang of JAX processes" in line for line in text.stdout.splitlines())
    bad = _cli("submit", SMOKE, "--dry-run", "--root", str(tmp_path), "--set", "hero.resources.microbatches=3")
    assert bad.returncode == 2
    lines = bad.stderr.strip().splitlines()
    assert len(lines) == 1 and "hero.batch_size" in lines[0] and "3 microbatches" in lines[0], bad.stderr
    assert not any(tmp_path.iterdir())  # nothing half-written


def test_a_shard_whose_sums_changed_is_corrupt_and_the_previous_checkpoint_serves(tmp_path, capfd):
    import jax.numpy as jnp

    from ladder.trainers.builtin import shard_check
    from ladder.trainers.builtin.checkpoint import Checkpointer, write_manifest

    params = {"w": jnp.arange(12.0).reshape(3, 4)}
    ckpt = Checkpointer(tmp_path / "checkpoints")
    for step in (4, 8):
        ckpt.save(step, {"w": params["w"] * step}, {}, (), {"step": step, "seed": 0, "wall_s": 0.0})
    sums = tmp_path / "checkpoints" / "8" / shard_check.FOLDER / "process-0.json"
    saved = json.loads(sums.read_text())
    key = next(k for k in saved if "w" in k)
    saved[key][1] += 1.0  # the array no longer sums to what was saved (the manifest rewritten to match)
    sums.write_text(json.dumps(saved))
    write_manifest(tmp_path / "checkpoints" / "8")
    step, got, _, _, _ = ckpt.restore_latest(params, {}, (), {"step": 0, "seed": 0, "wall_s": 0.0})
    assert step == 4 and np.array_equal(np.asarray(got["w"]), np.asarray(params["w"] * 4))
    assert "does not match its saved sums" in capfd.readouterr().err
    ckpt.close()
