"""Fault-test fixtures: the real CLI on a tiny ladder, driver processes in their own sessions, local
multi-node Ray clusters (cluster/local.sh), and a module Ray for executor-level tests.

Every Ray this folder starts has a short temp dir under /tmp/rf-*, RAY_AUTH_MODE=disabled, and is
stopped by process group or by `cluster/local.sh stop` of its own cluster, never by name.
"""

from __future__ import annotations

import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]
LADDER = str(Path(sys.executable).parent / "ladder")
TINY = str(HERE / "tiny_ladder.py")
LOCAL_SH = str(REPO / "cluster" / "local.sh")
for _path in (str(HERE), str(HERE.parent)):
    if _path not in sys.path:
        sys.path.insert(0, _path)
from patience import HANG_S, measured, wait_for  # noqa: E402, F401  (tests/ on the path first; re-exported)


def cli_env(**extra: str) -> dict:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "RAY_USAGE_STATS_ENABLED": "0", "PYTHONUNBUFFERED": "1",
           "WANDB_MODE": "disabled"}
    env.pop("RAY_ADDRESS", None)  # a test joins a cluster only when it says so
    env.update(extra)
    return env


def run_cli(*args: str, timeout: float = HANG_S, **env: str) -> subprocess.CompletedProcess:
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


def free_port() -> int:
    """A GCS port whose next two ports are free too (local.sh puts the client server and the dashboard
    there). They are only free when checked, so they are drawn where nothing else takes ports on its
    own: below Linux's ephemeral range (32768+: every outgoing connection and every port-0 bind of
    Ray's own processes) and above Ray's worker ports (10002-19999) and the ports its client server
    gives each client's server (23000-23999)."""
    for _ in range(50):
        port = random.randrange(24000, 32000, 10)
        try:
            for p in (port, port + 1, port + 2):
                with socket.socket() as s:
                    s.bind(("127.0.0.1", p))
            return port
        except OSError:
            continue
    raise RuntimeError("no free port")


def cmdlines() -> list[str]:
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                out.append(open(f"/proc/{pid}/cmdline", "rb").read().replace(b"\0", b" ").decode(errors="replace"))
            except OSError:
                pass
    return out


def sessions() -> list[int]:
    """The session id of every process."""
    out = []
    for pid in os.listdir("/proc"):
        if pid.isdigit():
            try:
                out.append(os.getsid(int(pid)))
            except ProcessLookupError:
                pass
    return out


@pytest.fixture
def local_cluster(ray_tmp):
    """start(workers, cpus, **env) -> (lines `local.sh start` printed, sh, env): a cluster/local.sh
    cluster on its own ports and temp dir; `sh(*args)` runs local.sh on it. Every cluster started is
    stopped at the end, and the test fails if any of its processes is left."""
    started: list[tuple] = []

    def start(workers: int, cpus: int, **extra: str) -> tuple[list[str], object, dict]:
        env = {**os.environ, "LADDER_RAY_PORT": str(free_port()), "LADDER_RAY_TMP": ray_tmp(),
               "RAY_AUTH_MODE": "disabled", "RAY": str(REPO / ".venv" / "bin" / "ray"), **extra}
        env.pop("RAY_ADDRESS", None)

        def sh(*args, check=True):
            return subprocess.run([LOCAL_SH, *args], env=env, capture_output=True, text=True, timeout=HANG_S,
                                  check=check)

        # Registered before starting so that a start failing halfway is stopped too.
        started.append((sh, env))
        return sh("start", str(workers), str(cpus)).stdout.strip().splitlines(), sh, env

    yield start
    for sh, env in started:
        sids = {int(f.read_text()) for f in Path(env["LADDER_RAY_TMP"], "nodes").glob("*.sid")}
        sh("stop", check=False)
        assert not any(env["LADDER_RAY_TMP"] in a for a in cmdlines()), "local.sh stop left processes"
        assert not sids & set(sessions()), "local.sh stop left processes in its nodes' sessions"


@pytest.fixture(scope="module")
def ray_local(ray_session):
    """The session's local Ray, with the fault steps shipped by value."""
    import fault_steps

    ray = ray_session.ensure()
    ray.cloudpickle.register_pickle_by_value(fault_steps)
    return ray
