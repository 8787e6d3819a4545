"""Stopping a driver (SIGTERM, as a scheduler or `kill` does) lets the running rung checkpoint first.

Defect this pins (issue 19): on SIGTERM or Ctrl-C the driver force-cancelled its Ray tasks, so the
trainer's own save-on-SIGTERM never ran and every restart cost each running rung up to a whole
checkpoint interval. Now the driver asks its tasks to checkpoint and exit, waits a bounded time
(LADDER_STOP_GRACE), and only then cancels. Here the rung checkpoints only when stopped (its
periodic interval is longer than the run), so the checkpoint it resumes from is the stop's.
"""

from __future__ import annotations

import json
import signal

import pytest
from conftest import HANG_S, TINY, checkpoint_steps, read_status, run_cli, start_cli, step_dirs, wait_for

pytestmark = pytest.mark.slow

LOG_EVERY = 10
STEPS = 3000  # long enough that the stop lands mid-run, whatever the machine's speed
SETTINGS = ["--set", f"rungs[0].tokens={256 * STEPS}", "--set", "rungs[0].checkpoint_every=100000",
            "--set", "rungs[0].eval_every=100000", "--set", f"rungs[0].log_every={LOG_EVERY}"]


def _rows(d):
    return [json.loads(line) for line in (d / "metrics.jsonl").read_text().splitlines() if line.strip()]


def test_sigterm_to_the_driver_checkpoints_the_running_rung_and_resume_loses_under_one_log_interval(tmp_path, procs):
    root = tmp_path / "runs"
    env = {"LADDER_HEARTBEAT": "0.5", "LADDER_LEASE_TIMEOUT": "20", "LADDER_STOP_GRACE": "120"}
    driver = start_cli("submit", TINY, "--root", str(root), "--no-progress", *SETTINGS, log=tmp_path / "first.log",
                       **env)
    procs.append(driver)

    def rung_1_trained():
        dirs = step_dirs(root)
        d = dirs.get("rung_1")
        if d is None or not (d / "metrics.jsonl").exists():
            return None
        return d if len(_rows(d)) >= 5 else None

    d = wait_for(rung_1_trained, "rung_1 to log 5 rows", proc=driver, log=tmp_path / "first.log")
    driver.send_signal(signal.SIGTERM)  # the driver only; its Ray workers are its own to stop
    # The driver waits LADDER_STOP_GRACE for the rung's checkpoint, then stops: a bound beyond that grace.
    assert driver.wait(timeout=HANG_S) != 0
    first_log = (tmp_path / "first.log").read_text()
    assert "asked" in first_log and "to checkpoint and exit" in first_log, first_log[-3000:]

    status = read_status(d)
    assert status["status"] == "FAILED" and status["error"].startswith("interrupted: the driver stopped"), status
    saved = checkpoint_steps(d)
    assert len(saved) == 1, saved  # the stop's own checkpoint: no periodic one was due
    last_logged = _rows(d)[-1]["step"]
    assert 0 <= saved[0] - last_logged < LOG_EVERY, (saved, last_logged)
    assert saved[0] < STEPS

    # RAY_DEDUP_LOGS=0: Ray would fold the rungs' alike "resumed from step" lines into one
    proc = run_cli("submit", TINY, "--root", str(root), "--no-progress", *SETTINGS, RAY_DEDUP_LOGS="0",
                   **env)
    # (the tiny ladder's gate may block its hero: only the rung matters here)
    assert "rung_1  SUCCESS" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert f"rung_1: resumed from step {saved[0]}" in proc.stdout + proc.stderr
    result = json.loads((d / "result.json").read_text())
    assert result["status"] == "SUCCESS" and result["steps"] == STEPS
    steps = [r["step"] for r in _rows(d)]
    assert steps == list(range(LOG_EVERY, STEPS + 1, LOG_EVERY))  # no logged interval lost or repeated
