"""Whole driver processes: two racing on one ladder, and one SIGKILLed then restarted."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time

import pytest
from exec_ladders import count_runs, ladder_steps
from patience import HANG_S

from ladder.executor import Executor
from ladder.executor.lease import read_state

HERE = os.path.dirname(os.path.abspath(__file__))
NAMES = ["rung_1", "rung_2", "fit", "gate", "hero", "report"]


def start_driver(root, log, sleep, tmpdirs, lease_timeout=4.0, **extra_env):
    ray_tmp = tempfile.mkdtemp(prefix="rl-", dir="/tmp")  # short: Ray's socket path limit
    tmpdirs.append(ray_tmp)
    env = {**os.environ, "RAY_TMPDIR": ray_tmp, "LADDER_LEASE_TIMEOUT": str(lease_timeout), "LADDER_HEARTBEAT": "0.5",
           "PYTHONUNBUFFERED": "1", **extra_env}
    env.pop("RAY_ADDRESS", None)
    return subprocess.Popen([sys.executable, os.path.join(HERE, "exec_driver.py"), str(root), log, json.dumps(sleep)],
                            env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            start_new_session=True)


def finish(proc, timeout=HANG_S):
    try:
        out, err = proc.communicate(timeout=timeout)
    finally:
        kill_group(proc)
    assert proc.returncode == 0, f"driver exited {proc.returncode}\n{out}\n{err[-3000:]}"
    return json.loads(out.strip().splitlines()[-1])


def kill_group(proc):
    """Stop whatever the driver left (its Ray processes share its session): only the group we started."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except (ProcessLookupError, PermissionError):
        pass
    proc.wait()


@pytest.fixture
def tmpdirs():
    dirs: list[str] = []
    yield dirs
    import shutil

    for d in dirs:
        shutil.rmtree(d, ignore_errors=True)


def test_two_racing_drivers_run_each_step_exactly_once(tmp_path, log, tmpdirs):
    root = tmp_path / "runs"
    sleep = {"rung_1": 2.0, "rung_2": 2.0, "fit": 1.0, "hero": 1.0}
    # a long lease: on a busy 2-core machine a starved driver must not look dead to the other one
    a = start_driver(root, log, sleep, tmpdirs, lease_timeout=20.0)
    b = start_driver(root, log, sleep, tmpdirs, lease_timeout=20.0)
    ra, rb = finish(a), finish(b)
    assert ra["ok"] and rb["ok"]
    assert count_runs(log) == dict.fromkeys(NAMES, 1)
    # every step was run by one driver and waited for (or skipped) by the other
    for name in NAMES:
        assert sorted([ra["actions"][name], rb["actions"][name]]) in (["ran", "waited"], ["ran", "skipped"]), name
    ex = Executor(str(root), "lad")
    assert all(r["status"] == "SUCCESS" for r in ex.status(ladder_steps(gate_pass=True)))


def test_sigkilled_driver_restarted_finishes_the_ladder(tmp_path, log, tmpdirs):
    root = tmp_path / "runs"
    sleep = {"rung_1": 0.2, "rung_2": 30.0}  # rung_2 is still running when the driver dies
    steps = ladder_steps(gate_pass=True)
    nodes = Executor(str(root), "lad").graph(steps)
    store = Executor(str(root), "lad").store
    first = start_driver(root, log, sleep, tmpdirs)
    try:
        deadline = time.time() + HANG_S  # the driver exiting ends the wait first
        while time.time() < deadline:
            if read_state(store, nodes["rung_1"].dir).state == "SUCCESS" and \
                    read_state(store, nodes["rung_2"].dir).state == "RUNNING" and \
                    count_runs(log).get("rung_2"):
                break
            assert first.poll() is None, first.communicate()
            time.sleep(0.1)
        else:
            pytest.fail("the first driver never got rung_2 running")
        os.kill(first.pid, signal.SIGKILL)  # the driver only, at an arbitrary moment
        first.wait()
    finally:
        kill_group(first)
    assert read_state(store, nodes["rung_2"].dir).state == "RUNNING"  # left behind, lease goes stale
    second = start_driver(root, log, {"rung_2": 0.2}, tmpdirs)
    r = finish(second)
    assert r["ok"], r
    assert r["actions"]["rung_1"] == "skipped"
    assert r["actions"]["rung_2"] == "ran" and r["reasons"]["rung_2"].startswith("lease expired")
    counts = count_runs(log)
    assert counts["rung_1"] == 1  # finished work is not redone
    assert counts["rung_2"] == 2  # the killed attempt and the takeover
    assert all(counts[n] == 1 for n in NAMES[2:])


def test_sigterm_releases_running_steps_at_once(tmp_path, log, tmpdirs):
    root = tmp_path / "runs"
    steps = ladder_steps(gate_pass=True)
    ex = Executor(str(root), "lad")
    nodes = ex.graph(steps)
    # These steps never look at ctx.stop_requested: after the stop grace (1 s here) they are cancelled.
    proc = start_driver(root, log, {"rung_1": 30.0, "rung_2": 30.0}, tmpdirs, LADDER_STOP_GRACE="1")
    try:
        deadline = time.time() + HANG_S  # the driver exiting ends the wait first
        while not count_runs(log).get("rung_1") and time.time() < deadline:
            assert proc.poll() is None, proc.communicate()
            time.sleep(0.1)
        proc.send_signal(signal.SIGTERM)
        proc.wait(timeout=HANG_S)
    finally:
        kill_group(proc)
    assert proc.returncode != 0
    st = read_state(ex.store, nodes["rung_1"].dir)
    assert st.state == "FAILED" and "interrupted" in st.status["error"]
    plan = {e.name: e for e in ex.plan(steps)}  # no lease to wait out: the next submit runs it again
    assert plan["rung_1"].action == "run" and plan["rung_1"].reason.startswith("failed before: interrupted")
