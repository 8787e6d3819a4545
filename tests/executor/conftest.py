"""Executor test fixtures: one local Ray for the session, ladders of real step functions."""

from __future__ import annotations

import os
import sys

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
if HERE not in sys.path:
    sys.path.insert(0, HERE)

import exec_stepfns  # noqa: E402


@pytest.fixture(scope="module")
def ray_local(ray_session):
    """The session's local Ray, with this folder's step functions shipped by value."""
    ray = ray_session.ensure()
    ray.cloudpickle.register_pickle_by_value(exec_stepfns)
    return ray


@pytest.fixture
def log(tmp_path):
    return str(tmp_path / "executions.log")
