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
