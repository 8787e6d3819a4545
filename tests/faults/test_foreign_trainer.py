"""A ladder trained by a foreign trainer (tests/trainers/bigram_trainer.py as a command), through the real
CLI and Ray, stopped twice on the way:

1. SIGTERM to the driver while rung_1 trains: the step forwards it to the trainer's process group, the
   trainer checkpoints (less than one logging interval after its last row) and the step is interrupted;
2. the same command resumes it; then SIGKILL of that whole submit's process group: the trainer (its own
   process group, so the kill does not reach it directly) dies with its Ray worker (PR_SET_PDEATHSIG);
3. the same command resumes it again to its end: rung_1's rows read as one run's, and its losses and final
   are an uninterrupted run's (`ladder train`) to the bit. (The rest of a foreign ladder, fit to report and
   the hero's live forecast, is tests/trainers/test_smoke_torch.py's.)

Then, in the executor on the session's Ray: each way a trainer fails is its step's one line, and a callable
trainer trains in its step's Ray worker.
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

    # 3. the same command resumes rung_1 to its end (the rest of the ladder is not waited for)
    third = start_cli("submit", SPEC, "--root", str(root), *SETTINGS, log=tmp_path / "third.log", **ENV)
    procs.append(third)
    wait_for(lambda: read_status(d).get("status") == "SUCCESS", "rung_1 to finish", proc=third,
             log=tmp_path / "third.log")
    kill_group(third)
    rows = _rows(d)
    # one run's rows: every logged step once, in order, as if it had never stopped
    assert [r["step"] for r in rows] == list(range(LOG_EVERY, STEPS + 1, LOG_EVERY))
    result = json.loads((d / "result.json").read_text())
    assert result["status"] == "SUCCESS" and result["steps"] == STEPS and result["trainer"]["kind"] == "command"
    worker = json.loads((d / "step.json").read_text())["pid"]
    assert worker not in {r["pid"] for r in rows}  # the command trained in a child of its step's Ray worker

    # stopped twice and resumed, rung_1 trained what one uninterrupted run trains: its checkpoint holds the
    # whole optimizer state and its batches are a function of the step, so to the bit (as the built-in's)
    alone = run_cli("train", SPEC, "rung_1", "--root", str(tmp_path / "alone"), *SETTINGS[2:])
    assert alone.returncode == 0, alone.stdout[-2000:] + alone.stderr[-2000:]
    straight = tmp_path / "alone" / "foreign" / "train-rung_1"
    assert [(r["step"], r["loss"]) for r in rows] == [(r["step"], r["loss"]) for r in _rows(straight)]
    assert result["final_eval_loss"] == json.loads((straight / "result.json").read_text())["final_eval_loss"]


FAULTS = {  # BIGRAM_FAULT -> what its step's one line says
    "exit3": "its trainer exited with status 3: bigram: a fault asked for at step 3 | bigram: exiting with status 3",
    "no_final": "the trainer exited 0 without a final eval row (an eval.jsonl row at step 40",
    "bad_row": "metrics.jsonl:1: a row that is not a JSON object with an integer 'step' ('step 3 loss nan {')",
}


def test_foreign_trainers_in_the_executor_fail_in_one_line_and_a_callable_trains_in_its_worker(tmp_path, ray_local):
    """In the executor (the session's Ray), not only `ladder train`: each way a trainer can fail is its step's
    FAILED status with one line, no trainer is left behind, and a callable trainer runs in its step's worker."""
    import dataclasses

    from ladder.dag.train_steps import train_config, training_step
    from ladder.executor import Executor
    from ladder.spec import load_spec

    variants = {fault: [f"trainer.env={{'BIGRAM_FAULT': '{fault}'}}"] for fault in FAULTS}
    variants["callable"] = ["trainer.kind=callable", "trainer.command=()", "trainer.function=bigram_trainer:train"]
    steps = []
    for name, sets in variants.items():
        spec = load_spec(SPEC, [*sets, "rungs[0].resources.max_retries=0"])
        run = dataclasses.replace(spec.rungs[0], name=name)
        steps.append(training_step(spec, run, "rung", config=train_config(spec, run, "rung")))
    root = tmp_path / "runs"
    ex = Executor(str(root), "foreign")
    summary = ex.run(steps)
    assert not summary.ok
    nodes = ex.graph(steps)
    for fault, line in FAULTS.items():
        status = read_status(Path(nodes[fault].dir))
        assert status["status"] == "FAILED", status
        error = status["error"]
        assert "\n" not in error and error.startswith(f"RuntimeError: {fault} FAILED: ") and line in error, error
    assert not _trainers(root)
    d = Path(nodes["callable"].dir)
    assert read_status(d)["status"] == "SUCCESS"
    result = json.loads((d / "result.json").read_text())
    assert result["trainer"] == {"kind": "callable", "function": "bigram_trainer:train"}
    worker = json.loads((d / "step.json").read_text())["pid"]
    assert {r["pid"] for r in _rows(d)} == {worker}
