"""Two `ladder submit` of one ladder at once, through the real CLI with real training, then the first
driver SIGKILLed mid-rung and the ladder finished by the second and submitted a third time.

Checked: with both drivers up (B running rungs of its own and waiting on A's rung_1), A's driver is
paused (SIGSTOP: the extreme of a starved heartbeat thread on a loaded machine) for 2.5 lease
timeouts: B never takes rung_1 over, because the task training it still heartbeats (before the fix,
B took it over after one lease timeout and trained it a second time). Then A is SIGKILLed with its
local Ray: B takes the interrupted rung over once its lease is stale (step.json reason "lease
expired") and it resumes from its newest checkpoint; no step that had succeeded runs again (run ids
compared); every step ends SUCCESS having been claimed once (rung_1 twice: A, then B after A died);
and a third submit runs nothing.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import threading
import time

import pytest
from conftest import (
    HANG_S,
    TINY,
    checkpoint_steps,
    kill_group,
    leases,
    measured,
    read_status,
    run_cli,
    start_cli,
    step_dirs,
    wait_for,
)

pytestmark = pytest.mark.slow

LEASE, BEAT = 6.0, 1.0
RAY_START_S = 300.0  # ladder's own bound on retrying a local Ray start (LADDER_RAY_START_S)
# rung_1 trains long enough after its compile to be paused and killed mid-run, and all it trains after
# the kill is time the test waits. It trains at full speed only to its first checkpoint (1500 steps);
# from there to A's kill (B's Ray start and claim, the pause) it is throttled below. Before the throttle,
# on the 2-core machines, an AVX2 EPYC killed A at step 13 400 (370 steps/s) and an AVX-512 Xeon between
# 15 000 and 16 500, and a loaded run let a rung_1 of 30 000 finish during B's Ray start. With the
# throttle at a fifth of its speed and 30 000 steps, A's kill came between steps 3000 and 4500 (B resumed
# from 3000, on a 2-core machine at load 13): 25 000 steps and more were trained after it. At a tenth of
# its speed, 15 000 steps leave rung_1 as many seconds of B's Ray start as 30 000 did at a fifth (13 500
# steps at a tenth against 28 500 at a fifth), for half the training (measured the same way: B resumed
# from 3000).
R1_STEPS = 15_000
# From B's start to A's kill, rung_1's worker is held to a tenth of its speed: how long B's Ray takes to
# start is the machine's business, and a loaded run once let rung_1 finish inside it (a run beside two
# busy processes). Its heartbeat thread still runs once a second, far inside the 6 s lease.
RUN_S, STOP_S = 0.1, 0.9
OVERRIDES = ["--set", f"rungs[0].tokens={256 * R1_STEPS}", "--set", "rungs[0].checkpoint_every=1500",
             "--set", "rungs[0].eval_every=5000"]


@contextlib.contextmanager
def throttled(pid: int):
    """The process runs RUN_S of every RUN_S + STOP_S seconds (SIGSTOP / SIGCONT), all its threads alike."""
    done = threading.Event()

    def cycle() -> None:
        while not done.is_set():
            try:
                os.kill(pid, signal.SIGSTOP)
                done.wait(STOP_S)
                os.kill(pid, signal.SIGCONT)
            except ProcessLookupError:
                return  # the run ended (or was killed): nothing left to slow
            done.wait(RUN_S)

    thread = threading.Thread(target=cycle, daemon=True)
    thread.start()
    try:
        yield
    finally:
        done.set()
        thread.join()
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, signal.SIGCONT)


def test_two_submits_pause_and_kill_the_first_nothing_lost(tmp_path, ray_tmp, procs):
    root = tmp_path / "runs"
    env = {"LADDER_LEASE_TIMEOUT": str(LEASE), "LADDER_HEARTBEAT": str(BEAT)}
    args = ["submit", TINY, "--root", str(root), "--no-progress", "--force", *OVERRIDES]
    # A trains one step at a time (rung_1, long), so B certainly has rungs of its own to start Ray for.
    a = start_cli(*args, "--max-concurrent", "1", log=tmp_path / "a.log", RAY_TMPDIR=ray_tmp(), **env)
    procs.append(a)

    def rung1_training():
        d = step_dirs(root).get("rung_1")
        return d if d and read_status(d).get("status") == "RUNNING" and checkpoint_steps(d) else None

    began = time.monotonic()
    r1 = wait_for(rung1_training, "rung_1 to be training under driver A", proc=a, log=tmp_path / "a.log")
    a_started = time.monotonic() - began  # A's Ray start, rung_1's compile and first checkpoint, on this machine
    a_owner = read_status(r1)["owner"]
    assert f":{a.pid}:" in a_owner

    r1_pid = json.loads((r1 / "step.json").read_text())["pid"]
    with throttled(r1_pid):
        b = start_cli(*args, log=tmp_path / "b.log", RAY_TMPDIR=ray_tmp(), **env)
        b_id = f":{b.pid}:"
        # B starts its own Ray for the rungs A leaves to it (A runs one step at a time) and claims them;
        # from then on B polls rung_1, waiting for A's result.
        # B has only its Ray to start before it claims: a bound of several of A's whole first phase, and a
        # Ray start B has to retry (LADDER_RAY_START_S) on a loaded machine on top.
        wait_for(lambda: b_id in (read_status(step_dirs(root).get("rung_2", tmp_path)).get("owner") or ""),
                 "B to claim rung_2", proc=b, log=tmp_path / "b.log", bound=measured(a_started, 4) + RAY_START_S)
        assert len(leases(r1)) == 1 and read_status(r1).get("owner") == a_owner

        os.kill(a.pid, signal.SIGSTOP)  # A's driver (and its heartbeat thread) stops; its Ray tasks go on
        t0, paused_running = time.time(), 0
        try:
            while time.time() - t0 < 2.5 * LEASE:
                st = read_status(r1)
                assert len(leases(r1)) == 1 and st.get("owner") == a_owner, \
                    f"B took over rung_1 from the paused but live A: {leases(r1)} {st}"
                paused_running += st.get("status") == "RUNNING"
                time.sleep(0.25)
        finally:
            os.kill(a.pid, signal.SIGCONT)
        assert paused_running * 0.25 > LEASE + 2, "rung_1 finished too soon to test the pause"

        # Kill A (driver and its local Ray) while rung_1 is still mid-run.
        assert read_status(r1).get("status") == "RUNNING", "rung_1 finished before A could be killed"
        ckpt_at_kill = max(checkpoint_steps(r1))
        kill_group(a)
    succeeded = {n: read_status(d)["run_id"] for n, d in step_dirs(root).items()
                 if read_status(d).get("status") == "SUCCESS"}

    assert b.wait(timeout=HANG_S) == 0, (tmp_path / "b.log").read_text()[-3000:]
    blog = (tmp_path / "b.log").read_text()
    assert "ladder complete" in blog
    dirs = step_dirs(root)
    assert set(dirs) == {"rung_1", "rung_2", "rung_3", "fit", "predict", "gate", "hero", "report"}
    for name, d in dirs.items():
        st = read_status(d)
        assert st["status"] == "SUCCESS", (name, st)
        if name in succeeded:
            assert st["run_id"] == succeeded[name], f"{name} succeeded before A died and ran again"
        ls = leases(d)
        if name == "rung_1":
            # handed over exactly once, after A died, and resumed from a checkpoint of A's run
            assert [x["owner"] for x in ls][:1] == [a_owner] and len(ls) == 2 and ls[1]["owner"] != a_owner
            prov = json.loads((d / "step.json").read_text())
            assert prov["reason"].startswith("lease expired"), prov["reason"]
            resumed = [int(m) for m in re.findall(r"rung_1: resumed from step (\d+)", blog)]
            assert resumed and resumed[-1] >= ckpt_at_kill, (resumed, ckpt_at_kill)
        else:
            assert len(ls) == 1 or ls[0]["owner"] == a_owner, (name, ls)  # ran once (or A's claim handed over)
    result = json.loads((dirs["rung_1"] / "result.json").read_text())
    assert result["status"] == "SUCCESS" and result["steps"] == R1_STEPS

    # The same submit a third time: nothing runs.
    before = {n: read_status(d)["run_id"] for n, d in dirs.items()}
    proc = run_cli(*args, **env)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    assert {n: read_status(d)["run_id"] for n, d in step_dirs(root).items()} == before
