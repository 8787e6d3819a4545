"""Executor test fixtures: one local Ray for the session, ladders of real step functions."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import exec_stepfns  # noqa: E402


@pytest.fixture(scope="module")
def ray_local():
    """A local Ray (2 CPUs) shared by a module's tests; step functions ship by value."""
    import ray

    ray.cloudpickle.register_pickle_by_value(exec_stepfns)
    if ray.is_initialized():
        yield ray
        return
    tmp = tempfile.mkdtemp(prefix="rl-", dir="/tmp")  # short: Ray's socket paths have a length limit
    ray.init(address="local", num_cpus=2, include_dashboard=False, _temp_dir=tmp, logging_level="WARNING",
             object_store_memory=100 * 1024 * 1024)
    try:
        yield ray
    finally:
        ray.shutdown()
        shutil.rmtree(tmp, ignore_errors=True)


@pytest.fixture
def log(tmp_path):
    return str(tmp_path / "executions.log")
