"""A multi-CPU run splits its process into XLA host devices and trains data-parallel over them.

XLA reads the device count once, when JAX starts, so the end-to-end checks run in child processes:
``ladder train`` on a 2-CPU run (the flag set before JAX is imported), the user's own flag kept, and
``devices = 0`` taking the most devices the batch divides over. The Ray path (the step's worker
started with the flag) is checked on the smoke ladder's 2-CPU hero in tests/ladder/test_ladder_e2e.py.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from patience import HANG_S

from ladder.spec import Resources
from ladder.trainers.builtin import hostdevices

REPO = Path(__file__).resolve().parents[2]


def test_device_count_follows_the_cpus_of_a_cpu_run():
    assert hostdevices.host_device_count(Resources(cpus=2.0)) == 2
    assert hostdevices.host_device_count(Resources(cpus=1.0)) == 1
    assert hostdevices.host_device_count(Resources(cpus=0.5)) == 1
    assert hostdevices.host_device_count(Resources(cpus=4.0, cpu_devices=1)) == 1
    assert hostdevices.host_device_count(Resources(cpus=4.0, cpu_devices=2)) == 2
    # an accelerator run's devices are its accelerators: the host is left alone
    assert hostdevices.host_device_count(Resources(cpus=8.0, gpus=1.0)) == 1


def test_flags_keep_the_users_own_and_add_only_when_needed():
    flag = hostdevices.FLAG
    assert hostdevices.xla_flags(2, "") == f"{flag}=2"
    assert hostdevices.xla_flags(2, "--xla_cpu_enable_fast_math=false") == f"--xla_cpu_enable_fast_math=false {flag}=2"
    assert hostdevices.xla_flags(2, f"{flag}=1") == f"{flag}=1"
    assert hostdevices.xla_flags(1, "--foo") == "--foo"


def test_worker_env_only_for_runs_that_split(monkeypatch):
    monkeypatch.delenv("XLA_FLAGS", raising=False)
    assert hostdevices.worker_env(Resources(cpus=1.0)) == {}
    assert hostdevices.worker_env(Resources(cpus=2.0)) == {"XLA_FLAGS": f"{hostdevices.FLAG}=2"}
    monkeypatch.setenv("XLA_FLAGS", f"{hostdevices.FLAG}=3")
    assert hostdevices.worker_env(Resources(cpus=2.0)) == {}


def test_the_cli_and_the_step_builders_start_without_jax():
    # `ladder train` and the executor set XLA's device flag after importing these and before JAX starts:
    # one top-level import of a JAX module here (train_steps once took hero_data from train/evaluate.py)
    # left every 2-CPU `ladder train` on one device, silently.
    code = ("import sys, ladder.cli.main, ladder.dag.stages, ladder.dag.train_steps, ladder.trainers.builtin.hostdevices; "
            "print(sorted(m for m in sys.modules if m == 'jax' or m.startswith('jax.')))")
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_S, cwd=REPO)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.strip() == "[]"


def test_a_split_asked_for_after_jax_started_says_so():
    code = ("import os, jax; from ladder.spec import Resources; from ladder.trainers.builtin import hostdevices; "
            "print(hostdevices.apply_here(Resources(cpus=1.0)), hostdevices.apply_here(Resources(cpus=2.0), 'hero'), "
            "os.environ.get('XLA_FLAGS'))")
    env = {k: v for k, v in os.environ.items() if k != "XLA_FLAGS"}
    proc = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=HANG_S, cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert proc.stdout.split() == ["True", "False", "None"]  # nothing to do for one CPU; too late for two
    assert "hero: JAX was imported before this run could split into 2 host devices" in proc.stderr
    assert f"XLA_FLAGS={hostdevices.FLAG}=2 before importing jax" in proc.stderr


@pytest.mark.slow
def test_ladder_train_splits_a_two_cpu_run(tmp_path):
    from conftest import ladder_train

    result = ladder_train(tmp_path / "auto", "hero", 4, {"XLA_FLAGS": None})
    assert result["devices"] == 2 and result["parallel"] == "replicated"
    assert result["status"] == "SUCCESS"
    # a device count the user set wins
    assert ladder_train(tmp_path / "user", "hero", 4, {"XLA_FLAGS": f"{hostdevices.FLAG}=1"})["devices"] == 1


CHILD = r"""
import json
from ladder.spec import ModelSpec, Resources, RungSpec, SpecError
from ladder.trainers.builtin.parallel import device_count
def rung(batch, devices=0):
    return RungSpec(name="r", model=ModelSpec(d_model=16, n_layers=1, n_heads=2), tokens=10**6,
                    batch_size=batch, seq_len=32, resources=Resources(devices=devices))
out = {"b14": device_count(rung(14)), "b16": device_count(rung(16)), "b7": device_count(rung(7))}
try:
    device_count(rung(14, devices=4))
except SpecError as exc:
    out["explicit"] = str(exc)
print(json.dumps(out))
"""


def test_all_devices_means_the_most_the_batch_divides_over():
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "XLA_FLAGS": f"{hostdevices.FLAG}=4"}
    proc = subprocess.run([sys.executable, "-c", CHILD], capture_output=True, text=True, timeout=HANG_S, cwd=REPO, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    out = json.loads(proc.stdout.strip().splitlines()[-1])
    assert (out["b14"], out["b16"], out["b7"]) == (2, 4, 1)
    # an explicit count that the batch does not divide into is still a one-line error
    assert "r.resources.devices: batch_size 14 does not split over 4 devices" in out["explicit"]
