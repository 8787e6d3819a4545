"""The suite keeps caches out of home and leaves nothing behind in the temporary folder."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from patience import HANG_S

REPO = Path(__file__).resolve().parents[2]


def test_caches_point_into_the_suites_own_folder():
    folder = os.environ["LADDER_TEST_TMP"]
    assert os.path.isdir(folder)
    for var in ("XDG_CACHE_HOME", "XDG_CONFIG_HOME", "MPLCONFIGDIR", "WANDB_DIR", "WANDB_CACHE_DIR",
                "WANDB_CONFIG_DIR", "WANDB_DATA_DIR", "JAX_COMPILATION_CACHE_DIR"):
        assert os.environ[var].startswith(folder + os.sep), (var, os.environ[var], folder)


def test_a_session_removes_the_folder_it_made(tmp_path):
    """Every `make test` used to leave ~50 MB (compile cache, W&B, shared ladders) in /tmp."""
    env = {k: v for k, v in os.environ.items()
           if k not in ("LADDER_TEST_TMP", "LADDER_TEST_SESSION", "PYTEST_XDIST_WORKER", "PYTEST_ADDOPTS")
           and not k.startswith(("XDG_", "WANDB_", "JAX_COMPILATION", "MPLCONFIGDIR"))}
    env["TMPDIR"] = str(tmp_path)
    test = f"{Path(__file__).relative_to(REPO)}::test_caches_point_into_the_suites_own_folder"
    run = subprocess.run([sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", test],
                         cwd=REPO, env=env, capture_output=True, text=True, timeout=HANG_S)
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "1 passed" in run.stdout, run.stdout[-2000:]
    left = sorted(p.name for p in tmp_path.iterdir() if p.name.startswith("ladder-tests-"))
    assert left == [], left
