"""Fault-test fixtures: the real CLI on a tiny ladder, driver processes in their own sessions, a local
multi-node Ray cluster (cluster/local.sh), and a module Ray for executor-level tests.

Every Ray this folder starts has a short temp dir under /tmp/rf-*, RAY_AUTH_MODE=disabled, and is
stopped by process group or by `cluster/local.sh stop` of its own cluster, never by name.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
LADDER = str(Path(sys.executable).parent / "ladder")
TINY = str(HERE / "tiny_ladder.py")
if str(HERE) not in sys.path:
    sys.path.insert(0, str(HERE))


def cli_env(**extra: str) -> dict:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "PYTHONUNBUFFERED": "1",
           "WANDB_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)  # a test joins a cluster only when it says so
    env.update(extra)
    return env


def run_cli(*args: str, timeout: float = 600, **env: str) -> subprocess.CompletedProcess:
    return subprocess.run([LADDER, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO,
                          env=cli_env(**env))


def start_cli(*args: str, log: Path, **env: str) -> subprocess.Popen:
    """A `ladder` process in its own session (its local Ray shares the session: killpg stops all of it)."""
    f = open(log, "w")
    return subprocess.Popen([LADDER, *args], stdout=f, stderr=subprocess.STDOUT, cwd=REPO, env=cli_env(**env),
                            start_new_session=True)


def kill_group(proc: subprocess.Popen, sig: int = signal.SIGKILL) -> None:
    try:
        os.killpg(proc.pid, sig)
    except (ProcessLookupError, PermissionError):
        pass
    if sig == signal.SIGKILL:
        proc.wait()


def step_dirs(root: Path, ladder: str = "tiny") -> dict[str, Path]:
    """name -> the step's directory (the only one of that name in these tests)."""
    out = {}
    for d in sorted((Path(root) / ladder).glob("*-*")):
        if d.is_dir() and not d.name.startswith("."):
            out[d.name.rsplit("-", 1)[0]] = d
    return out


def read_status(d: Path) -> dict:
    try:
        return json.loads((d / ".status").read_text())
    except (OSError, ValueError):
        return {}


def leases(d: Path) -> list[dict]:
    return [json.loads(p.read_text()) for p in sorted(d.glob(".lease-*"), key=lambda p: int(p.name.split("-")[-1]))]


def wait_for(pred, timeout: float, what: str, every: float = 0.2):
    t0 = time.time()
    while time.time() - t0 < timeout:
        v = pred()
        if v:
            return v
        time.sleep(every)
    raise AssertionError(f"timed out after {timeout:.0f}s waiting for {what}")


def checkpoint_steps(d: Path) -> list[int]:
    ck = d / "checkpoints"
    return sorted(int(p.name) for p in ck.iterdir() if p.name.isdigit()) if ck.is_dir() else []


@pytest.fixture
def ray_tmp():
    """Short Ray temp dirs (socket paths have a length limit), removed afterwards."""
    made: list[str] = []

    def make() -> str:
        d = tempfile.mkdtemp(prefix="rf-", dir="/tmp")
        made.append(d)
        return d

    yield make
    for d in made:
        shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def procs():
    """Processes a test started; every one left is SIGKILLed by process group at the end."""
    started: list[subprocess.Popen] = []
    yield started
    for p in started:
        if p.poll() is None:
            try:
                os.killpg(p.pid, signal.SIGCONT)
            except (ProcessLookupError, PermissionError):
                pass
            kill_group(p)


@pytest.fixture(scope="module")
def ray_local():
    """A local Ray (2 CPUs) for a module's executor-level tests; step functions ship by value."""
    import fault_steps
    import ray

    ray.cloudpickle.register_pickle_by_value(fault_steps)
    if ray.is_initialized():
        yield ray
        return
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    tmp = tempfile.mkdtemp(prefix="rf-", dir="/tmp")
    ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=tmp, logging_level="WARNING",
             object_store_memory=100 * 1024 * 1024)
    try:
        yield ray
    finally:
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)
