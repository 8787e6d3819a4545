"""A ladder trained by a foreign trainer (tests/trainers/bigram_trainer.py: the rungs as a command, the hero
as a callable in its Ray worker), through the real CLI and Ray, stopped twice on the way:

1. SIGTERM to the driver while rung_1 trains: the step forwards it to the trainer's process group, the
   trainer checkpoints (less than one logging interval after its last row) and the step is interrupted;
2. the same command resumes it; then SIGKILL of that whole submit's process group: the trainer (its own
   process group, so the kill does not reach it directly) dies with its Ray worker (PR_SET_PDEATHSIG);
3. the same command, with --force past the small ladder's gate, finishes the ladder: rung_1 continues
   from its checkpoint, every result.json names its trainer, the hero's live forecast ran, the report is written.
"""

from __future__ import annotations

import json
import signal
import time
from pathlib import Path

import pytest
from conftest import HANG_S, REPO, cmdlines, kill_group, measured, read_status, run_cli, start_cli, step_dirs, wait_for

pytestmark = pytest.mark.slow

SPEC = str(REPO / "tests" / "trainers" / "foreign_ladder.py")
LOG_EVERY = 5  # the spec's
STEPS = 1000  # rung_1's: long enough that both stops land mid-run, whatever the machine's speed
SETTINGS = ["--no-progress", "--force", "--set", f"rungs[0].tokens={256 * STEPS}",
            "--set", "rungs[0].checkpoint_every=100000", "--set", "rungs[0].eval_every=100000"]
ENV = {"LADDER_HEARTBEAT": "0.5", "LADDER_LEASE_TIMEOUT": "5", "LADDER_STOP_GRACE": "120"}


def _rows(d: Path) -> list[dict]:
    return [json.loads(x) for x in (d / "metrics.jsonl").read_text().splitlines() if x.strip()]


def _checkpoints(d: Path) -> list[int]:
    return sorted(int(p.stem.split("-")[1]) for p in (d / "checkpoints").glob("step-*.npz"))


def _trainers(root: Path) -> list[str]:
    return [c for c in cmdlines() if "bigram_trainer.py" in c and str(root) in c]


def test_a_foreign_trainer_stops_with_its_step_resumes_and_never_outlives_it(tmp_path, procs):
    root = tmp_path / "runs"

    def rung_1(min_step: int):
        def ready():
            d = step_dirs(root, "foreign").get("rung_1")
            if d is None or not (d / "metrics.jsonl").exists():
                return None
            rows = _rows(d)
            return d if rows and rows[-1]["step"] >= min_step else None
        return ready

    # 1. SIGTERM to the driver mid-rung: the trainer checkpoints and the step is interrupted
    first = start_cli("submit", SPEC, "--root", str(root), *SETTINGS, log=tmp_path / "first.log", **ENV)
    procs.append(first)
    d = wait_for(rung_1(5 * LOG_EVERY), "rung_1 to log 5 rows", proc=first, log=tmp_path / "first.log")
    t0 = time.monotonic()
    first.send_signal(signal.SIGTERM)
    assert first.wait(timeout=HANG_S) != 0
    stop_s = time.monotonic() - t0
    status = read_status(d)
    assert status["status"] == "FAILED" and status["error"].startswith("interrupted: the driver stopped"), status
    assert "on SIGTERM" in (d / "trainer.log").read_text(), (d / "trainer.log").read_text()[-2000:]
    saved = _checkpoints(d)
    assert len(saved) == 1 and saved[0] < STEPS, saved  # the stop's own checkpoint: no periodic one was due
    last_logged = _rows(d)[-1]["step"]
    assert 0 <= saved[0] - last_logged < LOG_EVERY, (saved, last_logged)
    assert not _trainers(root)

    # 2. resumed by the same command, then its whole process group SIGKILLed: no trainer is left
    second = start_cli("submit", SPEC, "--root", str(root), *SETTINGS, log=tmp_path / "second.log", **ENV)
    procs.append(second)
    wait_for(rung_1(saved[0] + 3 * LOG_EVERY), "rung_1 to resume and log 3 rows", proc=second,
             log=tmp_path / "second.log")
    assert _trainers(root), "rung_1's trainer runs"
    kill_group(second)
    wait_for(lambda: not _trainers(root), "no trainer process left", bound=measured(stop_s))

    # 3. the same command finishes the ladder
    proc = run_cli("submit", SPEC, "--root", str(root), *SETTINGS, **ENV)
    assert proc.returncode == 0 and "ladder complete" in proc.stdout, proc.stdout[-3000:] + proc.stderr[-3000:]
    dirs = step_dirs(root, "foreign")
    rows = _rows(dirs["rung_1"])
    # one run's rows: every logged step once, in order, as if it had never stopped
    assert [r["step"] for r in rows] == list(range(LOG_EVERY, STEPS + 1, LOG_EVERY))
    results = {name: json.loads((dirs[name] / "result.json").read_text()) for name in ("rung_1", "rung_2", "rung_3", "hero")}
    assert {n: r["trainer"]["kind"] for n, r in results.items()} == {
        "rung_1": "command", "rung_2": "command", "rung_3": "command", "hero": "callable"}
    assert results["rung_1"]["steps"] == STEPS and all(r["status"] == "SUCCESS" for r in results.values())
    # the callable trained in the hero step's Ray worker; the command in a child of rung_1's
    worker = {n: json.loads((dirs[n] / "step.json").read_text())["pid"] for n in ("rung_1", "hero")}
    assert {r["pid"] for r in _rows(dirs["hero"])} == {worker["hero"]}
    assert worker["rung_1"] not in {r["pid"] for r in rows}
    forecasts = [json.loads(x) for x in (dirs["hero"] / "forecasts.jsonl").read_text().splitlines() if x.strip()]
    assert forecasts, "the hero's live forecast made snapshots as the callable's evals arrived"
    assert (dirs["report"] / "report.json").exists()
