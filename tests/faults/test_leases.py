"""A live owner's lease is never taken over: the mechanisms behind a second driver stealing the steps of
a first, live one, each pinned by a test (the whole-CLI reproduction is in test_two_drivers.py).

- A lease file created empty and written after (O_EXCL then write) looked, to a reader in between,
  like a lease "acquired at epoch 0": stale, so the reader took the step over. Now the file appears
  whole (temp file + link) and an unreadable lease ages by its mtime.
- One unreadable read of .status stopped the driver's heartbeat for good.
- A fresh RUNNING heartbeat was ignored whenever the newest lease named another run.
- The heartbeat came only from the driver: a starved or paused driver (load, Ctrl-Z) let a step whose
  task was still training go stale. The task now heartbeats its own status as well.
"""

from __future__ import annotations

import json
import os
import threading
import time

import fault_steps
import pytest

from ladder.executor import Executor, Step
from ladder.executor.lease import (
    RUNNING,
    DirState,
    Heartbeater,
    beat,
    read_state,
    status_path,
    try_claim,
)
from ladder.executor.provenance import step_json_path
from ladder.executor.store import Store


def test_a_claim_is_never_visible_as_a_stale_lease(tmp_path, monkeypatch):
    """While a claimer is between creating its lease file and finishing it, readers see no claim or a live
    one, never a claimed-but-stale step (which they would take over)."""
    store = Store(str(tmp_path))
    d = str(tmp_path / "step-abc")
    store.makedirs(d)
    real_write, real_link = os.write, os.link

    def slow_write(fd, data):
        time.sleep(0.3)
        return real_write(fd, data)

    def slow_link(src, dst, *a, **k):
        time.sleep(0.3)
        return real_link(src, dst, *a, **k)

    monkeypatch.setattr(os, "write", slow_write)
    monkeypatch.setattr(os, "link", slow_link)
    claimer = threading.Thread(target=try_claim, args=(store, d, read_state(store, d)),
                               kwargs={"run_id": "r1", "reason": "new"})
    claimer.start()
    seen_claims, stale = 0, []
    while claimer.is_alive():
        st = read_state(store, d)
        if st.gen:
            seen_claims += 1
            if not st.live(60.0):
                stale.append((st.lease, st.status))
        time.sleep(0.01)
    claimer.join()
    assert not stale, f"a fresh claim looked stale to a reader: {stale[:2]}"
    st = read_state(store, d)
    assert st.live(60.0) and st.run_id == "r1" and st.gen == 1


def test_an_unreadable_lease_file_ages_by_its_mtime(tmp_path):
    store = Store(str(tmp_path))
    d = tmp_path / "s"
    d.mkdir()
    (d / ".lease-1").write_text("")  # e.g. an older writer, or a crash before the write
    assert read_state(store, str(d)).live(60.0)
    old = time.time() - 120
    os.utime(d / ".lease-1", (old, old))
    assert not read_state(store, str(d)).live(60.0)


def test_a_fresh_heartbeat_is_live_whoever_holds_the_newest_lease(tmp_path):
    now = time.time()
    status = {"status": RUNNING, "run_id": "A", "heartbeat": now - 1, "owner": "a"}
    newest_lease = {"gen": 2, "run_id": "B", "owner": "b", "acquired": now - 600}
    assert DirState(status, 2, newest_lease).live(60.0)  # A still beats: not stale, whatever lease 2 says
    status["heartbeat"] = now - 600
    assert not DirState(status, 2, newest_lease).live(60.0)  # nobody beats: stale


def test_one_unreadable_status_read_does_not_stop_the_heartbeat(tmp_path):
    store = Store(str(tmp_path))
    d = str(tmp_path / "s")
    store.makedirs(d)
    assert try_claim(store, d, read_state(store, d), run_id="r1", reason="new")
    good = (tmp_path / "s" / ".status").read_text()
    (tmp_path / "s" / ".status").write_text('{"status": "RUNN')  # a torn read, as from a non-atomic store
    assert beat(store, d, "r1") is None  # unknown: keep beating
    hb = Heartbeater(store, 0.05)
    hb.add(d, "r1")
    time.sleep(0.3)
    (tmp_path / "s" / ".status").write_text(good)
    t0 = time.time()
    time.sleep(0.4)
    hb.stop()
    st = json.loads((tmp_path / "s" / ".status").read_text())
    assert st["heartbeat"] > t0, "the heartbeat stopped after one unreadable read"
    # and it does stop once the status is another run's
    st["run_id"] = "r2"
    store.write_json(status_path(store, d), st)
    assert beat(store, d, "r1") is False


def test_a_step_stays_live_while_its_driver_cannot_heartbeat(tmp_path, ray_local, monkeypatch):
    """The driver's heartbeat thread starved (here: never runs). The task's own heartbeat keeps the step
    live for the whole run, so a second driver would wait, not take over."""
    monkeypatch.setattr(Heartbeater, "_loop", lambda self: None)
    root = str(tmp_path / "runs")
    # A 3 s lease: under two xdist workers on 2 cores the task's 0.2 s beats were measured 1.5-1.64 s
    # apart, past a 1.5 s lease. The run still outlasts the lease, so a missing task heartbeat fails here.
    ex = Executor(root, "lad", lease_timeout=3.0, heartbeat=0.2)
    steps = [Step("slow", fault_steps.sleeper, {"sleep": 7.0})]
    d = ex.graph(steps)["slow"].dir
    store = Store(root)
    stale: list[float] = []
    done = threading.Event()

    def task_running() -> bool:
        # The task writes its pid into step.json as it starts, then beats; until then a Ray worker is
        # still starting (over 3 s measured under the other xdist worker's load), which the driver's
        # heartbeat, not the task's, covers: not what this test starves.
        prov = store.read_json(step_json_path(store, d))
        return isinstance(prov, dict) and prov.get("status") == "RUNNING" and bool(prov.get("pid"))

    def watch():
        started = False
        while not done.is_set():
            st = read_state(store, d)
            if st.state == RUNNING and not started and task_running():
                started = True
                time.sleep(0.3)  # the task's first beat follows its step.json
            elif st.state == RUNNING and started:
                if not st.live(3.0):
                    stale.append(time.time() - float(st.status.get("heartbeat") or 0))
            elif started:
                return
            time.sleep(0.05)

    w = threading.Thread(target=watch)
    w.start()
    try:
        summary = ex.run(steps, runtime={"log": str(tmp_path / "log")})
    finally:
        done.set()
        w.join()
    assert summary.ok
    assert not stale, f"the step went stale while its task ran (heartbeat ages {stale[:3]})"
    assert sorted(os.listdir(d)).count(".lease-1") == 1 and not os.path.exists(os.path.join(d, ".lease-2"))


def test_a_task_whose_step_was_taken_over_stops_and_the_step_runs_once_more(tmp_path, ray_local):
    """Someone else's run took the step over mid-flight: our task stops at its next progress call
    (LeaseLost), writes no result, and the driver then waits for the other owner (here it never beats,
    so its lease goes stale and the driver runs the step itself)."""
    root = str(tmp_path / "runs")
    log = tmp_path / "log"
    ex = Executor(root, "lad", lease_timeout=2.0, heartbeat=0.2)
    steps = [Step("s", fault_steps.sleeper, {"sleep": 4.0})]
    d = ex.graph(steps)["s"].dir
    store = Store(root)

    def steal():
        t0 = time.time()
        while time.time() - t0 < 60:
            if log.exists() and "start" in log.read_text():
                st = store.read_json(status_path(store, d))
                st.update(run_id="intruder", owner="someone-else", heartbeat=time.time())
                store.write_json(status_path(store, d), st)
                return
            time.sleep(0.05)

    t = threading.Thread(target=steal)
    t.start()
    summary = ex.run(steps, runtime={"log": str(log)})
    t.join()
    assert summary.ok, summary.to_dict()
    lines = log.read_text().splitlines()
    assert any(ln.endswith("stopped LeaseLost") for ln in lines), lines
    assert sum(ln.endswith(" end") for ln in lines) == 1, lines
    final = json.loads(open(os.path.join(d, ".status")).read())
    assert final["status"] == "SUCCESS" and final["run_id"] != "intruder"


@pytest.mark.parametrize("garbage", [b"", b"\x00\x01garbage", b"[1, 2]", b'{"status": "DONE-ISH"}',
                                     b'{"status": "RUNNING", "heartbeat": "soon"}'])
def test_a_corrupt_status_is_reported_and_never_trusted(tmp_path, garbage):
    store = Store(str(tmp_path))
    d = tmp_path / "s"
    d.mkdir()
    (d / ".status").write_bytes(garbage)
    st = read_state(store, str(d))
    assert st.status is None and st.corrupt and st.corrupt.startswith("corrupt .status")
    assert not st.live(60.0)


def test_an_owner_that_beats_again_before_the_claim_keeps_its_step(tmp_path, ray_local, monkeypatch):
    """The cause of a second `ladder submit` taking over a live driver's steps: the submit assessed a
    step as stale, then spent seconds (tens, on a loaded machine) starting Ray, then claimed the next
    lease generation from that old assessment, although the owner had been beating again meanwhile.
    The claim now re-reads the directory: the owner is live, so the submit waits for its result."""
    from ladder.executor.lease import write_final

    root = str(tmp_path / "runs")
    store = Store(root)
    ex = Executor(root, "lad", lease_timeout=1.0, heartbeat=0.2)
    steps = [Step("s", fault_steps.sleeper, {"sleep": 0.1})]
    d = ex.graph(steps)["s"].dir
    store.makedirs(d)
    assert try_claim(store, d, read_state(store, d), run_id="other", reason="new", owner="other-driver",
                     heartbeat=0.2)
    st = store.read_json(status_path(store, d))
    st["heartbeat"] = time.time() - 10  # the owner looks dead when the submit assesses the step
    store.write_json(status_path(store, d), st)

    def owner_comes_back():
        for _ in range(10):
            beat(store, d, "other")
            time.sleep(0.2)
        write_final(store, d, "other", "SUCCESS")

    original = Executor._ensure_ray

    def slow_ray_start(self):
        started = original(self)
        beat(store, d, "other")  # while Ray was starting, the owner's heartbeat came back
        threading.Thread(target=owner_comes_back, daemon=True).start()
        return started

    monkeypatch.setattr(Executor, "_ensure_ray", slow_ray_start)
    summary = ex.run(steps, runtime={"log": str(tmp_path / "log")})
    out = summary.steps["s"]
    assert (out.status, out.action, out.run_id) == ("SUCCESS", "waited", "other"), vars(out)
    assert not os.path.exists(os.path.join(d, ".lease-2")), "the live owner's step was taken over"
    assert not (tmp_path / "log").exists(), "the step ran a second time"
