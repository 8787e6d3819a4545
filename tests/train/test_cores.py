"""A 1-CPU run pins itself to a core no other run of the machine holds (ladder.trainers.builtin.cores).

Real processes claim real cores: two at once get different ones, every thread of each (one started
before the claim included) runs on its core alone, a third finds none free and is left alone, and
a process that exits gives its core back.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
from patience import HANG_S

from ladder.trainers.builtin import cores

REPO = Path(__file__).resolve().parents[2]
ALL = sorted(os.sched_getaffinity(0))

# Holds a claim until `release` appears; reports the cores it got and every thread's affinity.
HOLDER = """
import json, os, sys, threading, time
from pathlib import Path
early = threading.Thread(target=time.sleep, args=(60,), daemon=True)
early.start()  # a thread that exists before the claim, as XLA's pool does in a reused Ray worker
from ladder.trainers.builtin.cores import pinned
n, report, release = float(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3])
with pinned(n) as got:
    threads = {tid: sorted(os.sched_getaffinity(int(tid))) for tid in os.listdir("/proc/self/task")}
    report.write_text(json.dumps({"cores": got, "threads": threads}))
    while not release.exists():
        time.sleep(0.05)
after = sorted(os.sched_getaffinity(early.native_id))
report.with_suffix(".after").write_text(json.dumps(after))
"""


def _start(tmp_path: Path, name: str, n: float, env: dict) -> tuple[subprocess.Popen, Path]:
    report = tmp_path / f"{name}.json"
    proc = subprocess.Popen([sys.executable, "-c", HOLDER, str(n), str(report), str(tmp_path / "release")],
                            env=env, cwd=REPO)
    return proc, report


def _wait(path: Path, proc: subprocess.Popen) -> dict:
    deadline = time.monotonic() + HANG_S  # the holder exiting ends the wait first
    while not path.exists():
        assert proc.poll() is None, f"holder exited with {proc.returncode}"
        assert time.monotonic() < deadline, f"{path.name} never written"
        time.sleep(0.05)
    return json.loads(path.read_text())


@pytest.mark.skipif(len(ALL) < 2, reason="pinning needs a machine with two cores")
def test_runs_side_by_side_get_cores_of_their_own_and_give_them_back(tmp_path):
    env = {**os.environ, cores.LOCK_DIR_ENV: str(tmp_path / "locks")}
    holders = []
    seen = []
    for i in range(len(ALL)):
        proc, report = _start(tmp_path, f"h{i}", 1, env)
        holders.append(proc)
        got = _wait(report, proc)
        assert got["cores"] is not None and len(got["cores"]) == 1
        seen.append(got["cores"][0])
        # every thread, the one started before the claim too, runs on the claimed core only
        assert all(aff == got["cores"] for aff in got["threads"].values()), got
    assert sorted(seen) == ALL  # each claim found a core nobody else held
    extra, report = _start(tmp_path, "extra", 1, env)
    assert _wait(report, extra)["cores"] is None  # all held: left on every core
    (tmp_path / "release").touch()
    for proc in [*holders, extra]:
        assert proc.wait(timeout=HANG_S) == 0
    assert json.loads((tmp_path / "h0.after").read_text()) == ALL  # the claim undone on exit from the block
    (tmp_path / "release").unlink()
    again, report = _start(tmp_path, "again", 1, env)  # the exited holders' locks are free again
    assert _wait(report, again)["cores"] is not None
    (tmp_path / "release").touch()
    assert again.wait(timeout=HANG_S) == 0


def test_a_run_that_wants_the_whole_machine_is_left_alone(tmp_path, monkeypatch):
    monkeypatch.setenv(cores.LOCK_DIR_ENV, str(tmp_path / "locks"))
    with cores.pinned(len(ALL)) as got:
        assert got is None and sorted(os.sched_getaffinity(0)) == ALL
    with cores.pinned(0.5) as got:  # a fractional CPU holds no core
        assert got is None
