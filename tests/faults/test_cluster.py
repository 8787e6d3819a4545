"""The ladder on a real multi-node Ray cluster on this machine (cluster/local.sh: a 0-CPU head and two
1-CPU worker nodes), joined with RAY_ADDRESS: rungs land on the worker nodes in parallel; the worker
node training rung_1 is killed mid-rung (its raylet and workers SIGKILLed); Ray retries the task on the
other node, rung_1 resumes from its checkpoint, and the ladder completes with every step run once. Then
a second driver process joins with `--address` and reruns the gate there. (The Ray-client path,
`--address ray://...`, passed alone but its client server failed to start inside the full suite, so
it is not part of this test.)"""

from __future__ import annotations

import json
import os
import re
import signal
from pathlib import Path

import pytest
from conftest import (
    HANG_S,
    TINY,
    checkpoint_steps,
    leases,
    read_status,
    run_cli,
    start_cli,
    step_dirs,
    wait_for,
)

pytestmark = pytest.mark.slow

# rung_1 is killed mid-run, after its first checkpoint, and all it trains after the kill is time the
# test waits: 4000 steps, checkpointed every 400. Its worker is frozen (SIGSTOP) the poll after its first
# checkpoint shows, before kill-node's seconds, so what it trains before the kill is the first checkpoint
# and one poll's worth (under a hundred steps at the 410 steps/s measured on the loaded 2-core machine):
# 3600 steps are left to land in. (It was 8000 while kill-node ran with rung_1 still training, and the node
# went down at step 2800-3200; 20 000 before that.)
R1_STEPS = 4_000


@pytest.fixture
def cluster(local_cluster):
    # The head declares a SIGKILLed node dead after 5 missed health checks: one a second, not Ray's 3 s,
    # so the killed rung is retried sooner. A missed check is a refused connection, not a slow reply
    # (each check still waits Ray's 10 s for an answer), so a loaded but live node is not declared dead.
    lines, sh, env = local_cluster(2, 1, RAY_health_check_period_ms="1000")
    return lines[-1], sh, env


def _session_of(pid: int) -> int | None:
    try:
        return os.getsid(pid)
    except ProcessLookupError:
        return None


def test_ladder_on_a_two_node_cluster_survives_losing_a_node(tmp_path, cluster, procs):
    address, sh, env = cluster
    node_sids = {Path(f).stem: int(open(f).read()) for f in Path(env["LADDER_RAY_TMP"], "nodes").glob("*.sid")}
    assert set(node_sids) == {"head", "worker_1", "worker_2"}
    root = tmp_path / "runs"
    sets = ["--set", f"rungs[0].tokens={256 * R1_STEPS}", "--set", "rungs[0].checkpoint_every=400",
            "--set", "rungs[0].eval_every=5000"]
    driver = start_cli("submit", TINY, "--root", str(root), "--no-progress", "--force", *sets,
                       log=tmp_path / "driver.log", RAY_ADDRESS=address)
    procs.append(driver)

    def rung1_mid_run():
        d = step_dirs(root).get("rung_1")
        if not d or read_status(d).get("status") != "RUNNING" or not checkpoint_steps(d):
            return None
        prov = json.loads((d / "step.json").read_text())
        return d, prov["pid"]

    r1, pid = wait_for(rung1_mid_run, "rung_1 training on a worker node", proc=driver, log=tmp_path / "driver.log")
    sid = _session_of(pid)
    node = next((n for n, s in node_sids.items() if s == sid), None)
    assert node in ("worker_1", "worker_2"), f"rung_1 ran in session {sid}, not on a worker node ({node_sids})"
    # Frozen first: kill-node takes seconds on a loaded machine, and rung_1 (about 20 s of training) once
    # finished in that window, so the node died idle and nothing was retried (a CI run on record).
    os.kill(pid, signal.SIGSTOP)
    assert read_status(r1)["status"] == "RUNNING", "rung_1 finished before the test could stop it"
    ckpt = max(checkpoint_steps(r1))
    sh("kill-node", node.split("_")[1])
    assert _session_of(pid) is None, "the killed node's worker is still alive"
    assert sh("nodes").stdout.count("dead") == 1

    assert driver.wait(timeout=HANG_S) == 0, (tmp_path / "driver.log").read_text()[-4000:]
    log = (tmp_path / "driver.log").read_text()
    assert "ladder complete" in log
    dirs = step_dirs(root)
    for name, d in dirs.items():
        assert read_status(d)["status"] == "SUCCESS", name
        assert len(leases(d)) == 1, f"{name} was claimed more than once"
    # rung_1 was retried by Ray (same run id, a new worker elsewhere) and resumed from its checkpoint
    prov = json.loads((r1 / "step.json").read_text())
    assert prov["pid"] != pid and _session_of(prov["pid"]) in (None, *node_sids.values())
    resumed = [int(m) for m in re.findall(r"rung_1: resumed from step (\d+)", log)]
    assert resumed and resumed[-1] >= ckpt, (resumed, ckpt, log[-2000:])
    assert json.loads((r1 / "result.json").read_text())["steps"] == R1_STEPS

    # A second driver joins the cluster with --address: rerun the gate (and the report that reads it)
    # there; nothing else runs again.
    before = {n: read_status(d)["run_id"] for n, d in dirs.items()}
    address = f"127.0.0.1:{int(env['LADDER_RAY_PORT'])}"
    proc = run_cli("rerun", TINY, "gate", "--root", str(root), "--force", "--no-progress", "--address", address,
                   *sets)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    after = {n: read_status(d)["run_id"] for n, d in step_dirs(root).items()}
    assert {n for n in after if after[n] != before[n]} == {"gate", "report"}
