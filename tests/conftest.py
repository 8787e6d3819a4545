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
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONUNBUFFERED": "1"}
    proc = subprocess.run([ladder, "submit", str(repo / "experiments" / "smoke.py"), "--root", str(root), "--no-progress",
                           "--wandb", "offline"], capture_output=True, text=True, timeout=1200, cwd=repo, env=env)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "ladder complete" in proc.stdout
    return str(root)
