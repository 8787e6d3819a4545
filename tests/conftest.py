"""Suite-wide isolation: Ray, JAX, W&B, matplotlib and browser caches go to a temporary dir, not home."""

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

# Under pytest-xdist the workers inherit the controller's variables below, so they share its folder
# (and its JAX compile cache).
# The session that makes the folder removes it when it ends (a folder named by LADDER_TEST_TMP is the caller's).
_MADE_HERE = not os.environ.get("LADDER_TEST_TMP")
_ISOLATED = os.environ.get("LADDER_TEST_TMP") or tempfile.mkdtemp(prefix="ladder-tests-")
for var, sub in {
    "XDG_CACHE_HOME": "cache",
    "XDG_CONFIG_HOME": "config",
    "MPLCONFIGDIR": "mpl",
    "WANDB_DIR": "wandb",
    "WANDB_CACHE_DIR": "wandb-cache",
    "WANDB_CONFIG_DIR": "wandb-config",
    "WANDB_DATA_DIR": "wandb-data",
    "JAX_COMPILATION_CACHE_DIR": "jax-cache",
}.items():
    os.environ.setdefault(var, os.path.join(_ISOLATED, sub))
# The compile cache above caches every program, as the trainer's own cache beside a ladder's root does
# (ladder/trainers/builtin/compile_cache.py, which stands aside when this variable is set): JAX's default caches
# only compiles over a second, and the suite's many runs of the same tiny rungs compiled each again.
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
# A size bound turns on JAX's file lock around cache reads and writes (Ray workers share the folder).
os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(2 << 30))
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_DISABLE_DOCKER_CPU_WARNING", "1")
# Every Ray a test starts (the session's, a test's own Cluster, a CLI's) runs its workers at the suite's
# priority, as ladder's own local Ray does (ladder.executor.ray_start): at Ray's default nice 15 a gang
# test's members were starved by any busy process beside the suite.
os.environ.setdefault("RAY_worker_niceness", "0")
os.environ.setdefault("LADDER_TEST_TMP", _ISOLATED)


@pytest.fixture(scope="session")
def isolated_dir() -> str:
    return _ISOLATED


# The shared ladders (tests/shared_ladders.py) a session's tests need, started in the background once
# the tests are collected; LADDER_SMOKE_ROOT / LADDER_ISOFLOP_ROOT name finished ones to reuse instead.
# Under pytest-xdist every worker collects the same tests: the first to create the session's folder
# starts the build, the others wait on the same outcome files.
_SHARED = {"smoke": ("ladder_smoke_root", "LADDER_SMOKE_ROOT"), "isoflop": ("isoflop_run", "LADDER_ISOFLOP_ROOT")}
_RUN = os.environ.setdefault("LADDER_TEST_SESSION", os.urandom(6).hex())  # xdist's workers inherit it
_SHARED_DIR = os.path.join(_ISOLATED, f"shared-ladders-{_RUN}")


def pytest_collection_finish(session) -> None:
    wanted = [name for name, (fixture, reuse) in _SHARED.items()
              if not os.environ.get(reuse) and any(fixture in getattr(i, "fixturenames", ()) for i in session.items)]
    if not wanted or session.config.option.collectonly:
        return
    try:
        os.mkdir(_SHARED_DIR)
    except FileExistsError:  # another worker of this session started them
        return
    log = open(os.path.join(_SHARED_DIR, "background.log"), "w")
    proc = subprocess.Popen([sys.executable, str(Path(__file__).with_name("shared_ladders.py")), _SHARED_DIR, *wanted],
                            stdout=log, stderr=subprocess.STDOUT, start_new_session=True)
    Path(_SHARED_DIR, "started.tmp").write_text(json.dumps({"pid": proc.pid, "names": wanted}))
    Path(_SHARED_DIR, "started.tmp").replace(Path(_SHARED_DIR, "started.json"))


def _module_rank(items) -> int:
    """0: a slow module that starts at once; 1: a slow one that first waits for a shared ladder the
    background builds; 2: the rest. Both xdist workers take modules in this order, so the longest start
    first and the short ones fill in at the end, rather than one worker finishing a long module alone."""
    if not any(item.get_closest_marker("slow") for item in items):
        return 2
    waits = any(fixture in getattr(item, "fixturenames", ()) for item in items for fixture, _ in _SHARED.values())
    return 1 if waits else 0


def pytest_collection_modifyitems(session, config, items) -> None:
    by_module: dict[str, list] = {}
    for item in items:
        by_module.setdefault(item.nodeid.split("::")[0], []).append(item)
    ranks = {module: _module_rank(its) for module, its in by_module.items()}
    items[:] = [item for module in sorted(by_module, key=lambda m: ranks[m]) for item in by_module[module]]


def _started() -> dict | None:
    meta = os.path.join(_SHARED_DIR, "started.json")
    for _ in range(600):  # the starter writes it right after creating the folder
        if not os.path.isdir(_SHARED_DIR) or os.path.exists(meta):
            break
        time.sleep(0.1)
    return json.load(open(meta)) if os.path.exists(meta) else None


def _running(pid: int) -> bool:
    import psutil

    try:  # the starter's own child is a zombie once it exits, until reaped
        return psutil.Process(pid).status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def pytest_sessionfinish(session, exitstatus) -> None:
    # Only where the whole session ends (not in one xdist worker, while another may still wait on it).
    if hasattr(session.config, "workerinput"):
        return
    started = _started()
    if started and _running(started["pid"]):  # the session ended before a ladder was needed
        os.killpg(started["pid"], signal.SIGTERM)
        _wait_for_exit(started["pid"])
    if _MADE_HERE:
        # ~50 MB of compile cache, W&B and shared ladders a run; every `make test` left one in /tmp.
        # A process of a test still exiting (a Ray worker) may write into it as it goes: what it leaves is
        # not a failure of the suite, so errors are ignored here.
        shutil.rmtree(_ISOLATED, ignore_errors=True)


def _wait_for_exit(pid: int, timeout: float = 30.0) -> None:
    """Wait (bounded) for the background builder to exit, so it is not writing while its folder is removed."""
    import psutil

    try:
        psutil.Process(pid).wait(timeout=timeout)
    except (psutil.NoSuchProcess, psutil.TimeoutExpired):
        return


def shared_ladder(name: str) -> dict:
    """The outcome of one shared ladder: waited for if the background builds it, else built here."""
    import shared_ladders

    started = _started()
    out = _SHARED_DIR
    if started is None or name not in started["names"]:
        out = tempfile.mkdtemp(prefix=f"shared-{name}-", dir=_ISOLATED)
        shared_ladders.build_into(out, name)
    path = shared_ladders.outcome_path(out, name)
    while not path.exists():
        if not _running(started["pid"]):
            log = open(os.path.join(out, "background.log")).read()[-3000:]
            raise AssertionError(f"the background build of {name} ended before it finished: {log}")
        time.sleep(1.0)
    outcome = json.loads(path.read_text())
    assert outcome["ok"], outcome["error"]
    return outcome["result"]


@pytest.fixture(scope="session")
def shared_ladder_outcome():
    """shared_ladder, for a fixture in another folder (`from conftest import` finds that folder's conftest)."""
    return shared_ladder


class SessionRay:
    """One local Ray (2 CPUs) per test process, shared by every module that only needs a Ray (the
    executor and fault tests' ``ray_local``): a Ray start costs seconds alone and tens of seconds on a
    loaded machine, once per module before. A module that needs a Ray of its own (a cluster) shuts this
    one down first; the next module that asks starts it again."""

    def __init__(self) -> None:
        self.tmp: str | None = None

    def ensure(self):
        import ray

        if ray.is_initialized():
            return ray
        os.environ.setdefault("RAY_AUTH_MODE", "disabled")
        self.tmp = self.tmp or tempfile.mkdtemp(prefix="rs-", dir="/tmp")  # short: Ray's socket paths are limited
        ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=self.tmp, logging_level="WARNING",
                 object_store_memory=100 * 1024 * 1024)
        return ray


@pytest.fixture(scope="session")
def ray_session():
    session = SessionRay()
    yield session
    import ray

    if ray.is_initialized():
        ray.shutdown()
    if session.tmp:
        shutil.rmtree(session.tmp, ignore_errors=True)


@pytest.fixture(scope="session")
def ladder_smoke_root() -> str:
    """The smoke ladder trained once per session through the real CLI (real Ray, JAX, fits, W&B offline).

    Tests that only read it share it; LADDER_SMOKE_ROOT reuses a finished one (for local iteration).
    """
    if os.environ.get("LADDER_SMOKE_ROOT"):
        return os.environ["LADDER_SMOKE_ROOT"]
    return shared_ladder("smoke")["root"]


@pytest.fixture(scope="session")
def s3_endpoint() -> str:
    """A real S3-compatible server on loopback (moto's), reachable from every process of the session.

    Child processes (the CLI, Ray workers) find it through the environment: fsspec reads
    FSSPEC_S3_ENDPOINT_URL, botocore the AWS_* credentials (moto takes any).
    """
    import fsspec
    from moto.server import ThreadedMotoServer

    for var, value in {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing",
                       "AWS_DEFAULT_REGION": "us-east-1"}.items():
        os.environ[var] = value
    server = ThreadedMotoServer(ip_address="127.0.0.1", port=0, verbose=False)
    server.start()
    host, port = server.get_host_and_port()
    endpoint = f"http://{host}:{port}"
    os.environ["FSSPEC_S3_ENDPOINT_URL"] = endpoint
    fsspec.config.conf.setdefault("s3", {})["endpoint_url"] = endpoint  # fsspec read the env at import
    yield endpoint
    server.stop()


@pytest.fixture
def s3_bucket(s3_endpoint, request) -> str:
    """A fresh bucket on the session's S3 server; returns its URL (s3://NAME)."""
    import re
    import uuid

    import fsspec

    name = re.sub(r"[^a-z0-9-]", "-", request.node.name.lower())[:40].strip("-") + "-" + uuid.uuid4().hex[:6]
    fsspec.filesystem("s3").mkdir(name)
    return f"s3://{name}"
