"""A Ray worker SIGKILLed mid-rung: Ray retries the task, the rung resumes from its checkpoint, and its
final losses equal an uninterrupted run's bit for bit (CPU)."""

from __future__ import annotations

import json
import os

import fault_steps
import pytest
from conftest import TINY, leases

from ladder.executor import Executor, Step
from ladder.spec import load_spec, to_dict

pytestmark = pytest.mark.slow


def test_sigkilled_worker_is_retried_and_resumes_to_the_same_loss(tmp_path, ray_local):
    spec = load_spec(TINY, ["rungs[0].tokens=16384", "rungs[0].checkpoint_every=8"])  # 64 steps
    rung, data = to_dict(spec.rungs[0]), to_dict(spec.data)
    steps = [
        Step("killed", fault_steps.train_rung, {"rung": rung, "data": data, "kill_after_checkpoint": 24},
             resources={"cpus": 1, "max_retries": 2}),
        Step("reference", fault_steps.train_rung, {"rung": rung, "data": data, "kill_after_checkpoint": None},
             resources={"cpus": 1, "max_retries": 0}),
    ]
    log = tmp_path / "log"
    ex = Executor(str(tmp_path / "runs"), "lad")
    summary = ex.run(steps, runtime={"log": str(log)})
    assert summary.ok, summary.to_dict()
    nodes = ex.graph(steps)
    killed, ref = nodes["killed"].dir, nodes["reference"].dir

    # the worker really died once, after the checkpoint at step 24, and Ray ran the task again
    marker = open(os.path.join(killed, "killed-once")).read().split()
    assert int(marker[0]) == 24
    runs = [ln.split() for ln in log.read_text().splitlines() if ln.startswith("killed ")]
    assert [r[3] for r in runs] == ["start", "start", "end"], runs
    assert runs[0][2] == marker[1] and runs[1][2] != marker[1], "the retry ran in a new worker process"
    assert len({r[1] for r in runs}) == 1, "one run id: Ray retried the same task, not the driver"
    assert len(leases(__import__("pathlib").Path(killed))) == 1

    a = json.load(open(os.path.join(killed, "result.json")))
    b = json.load(open(os.path.join(ref, "result.json")))
    assert a["status"] == b["status"] == "SUCCESS" and a["steps"] == b["steps"] == 64
    assert a["final_eval_loss"] == b["final_eval_loss"]
    assert a["final_train_loss"] == b["final_train_loss"]
    # the resumed run continued from step 24: its metrics rows past 24 equal the reference's
    rows = {}
    for name, d in (("killed", killed), ("reference", ref)):
        rows[name] = {r["step"]: r["loss"] for r in map(json.loads, open(os.path.join(d, "metrics.jsonl")))}
    common = sorted(set(rows["killed"]) & set(rows["reference"]))
    assert common and max(common) == 64
    assert [rows["killed"][s] for s in common] == [rows["reference"][s] for s in common]
