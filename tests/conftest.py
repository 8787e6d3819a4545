"""Suite-wide isolation: Ray, JAX, W&B, matplotlib and browser caches go to a temporary dir, not home."""

from __future__ import annotations

import os
import tempfile

import pytest

_ISOLATED = tempfile.mkdtemp(prefix="ladder-tests-")
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
# (ladder/train/compile_cache.py, which stands aside when this variable is set): JAX's default caches
# only compiles over a second, and the suite's many runs of the same tiny rungs compiled each again.
os.environ.setdefault("JAX_PERSISTENT_CACHE_MIN_COMPILE_TIME_SECS", "0")
# A size bound turns on JAX's file lock around cache reads and writes (Ray workers share the folder).
os.environ.setdefault("JAX_COMPILATION_CACHE_MAX_SIZE", str(2 << 30))
os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_SILENT", "true")
os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
os.environ.setdefault("RAY_DISABLE_DOCKER_CPU_WARNING", "1")
os.environ.setdefault("LADDER_TEST_TMP", _ISOLATED)


@pytest.fixture(scope="session")
def isolated_dir() -> str:
    return _ISOLATED


@pytest.fixture(scope="session")
def ladder_smoke_root(tmp_path_factory) -> str:
    """The smoke ladder trained once per session through the real CLI (real Ray, JAX, fits, W&B offline).

    Tests that only read it share it; LADDER_SMOKE_ROOT reuses a finished one (for local iteration).
    """
    import subprocess
    import sys
    from pathlib import Path

    if os.environ.get("LADDER_SMOKE_ROOT"):
        return os.environ["LADDER_SMOKE_ROOT"]
    repo = Path(__file__).resolve().parents[1]
    root = tmp_path_factory.mktemp("smoke-ladder")
    ladder = str(Path(sys.executable).parent / "ladder")
    # Piped, as in CI: the default progress is plain lines (one a second per training step here).
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONUNBUFFERED": "1", "LADDER_PROGRESS_INTERVAL": "1"}
    proc = subprocess.run([ladder, "submit", str(repo / "experiments" / "smoke.py"), "--root", str(root),
                           "--wandb", "offline"], capture_output=True, text=True, timeout=1200, cwd=repo, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "ladder complete" in proc.stdout
    (root / "submit.out").write_text(proc.stdout + proc.stderr)  # what the user saw, workers' logs included
    return str(root)


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
