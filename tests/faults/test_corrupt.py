"""Corrupted files are detected and reported, never silently used.

- .status garbage: `ladder status` shows CORRUPT with the reason, `ladder plan` and `submit` run the
  step again and say why (step.json reason), and no other finished step reruns.
- a truncated newest checkpoint: the trainer says so and resumes from the previous one (the
  trainer's own test, tests/train/test_loop.py::test_corrupt_newest_checkpoint_falls_back, checks
  the bit-identical resume; here through a whole ladder step).
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import fault_steps
from conftest import TINY, run_cli

from ladder.executor import Executor, Step


def test_cli_status_and_plan_report_a_corrupt_status(tmp_path):
    root = tmp_path / "runs"
    proc = run_cli("plan", TINY, "--root", str(root), "--json")
    assert proc.returncode == 0, proc.stderr
    rung1 = next(s for s in json.loads(proc.stdout)["steps"] if s["step"] == "rung_1")
    d = Path(rung1["path"])
    d.mkdir(parents=True)
    (d / ".status").write_bytes(b'{"status": "SUCC\x00\x00')  # torn by a crash of a non-atomic copy
    proc = run_cli("status", TINY, "--root", str(root), "--json")
    assert proc.returncode == 0, proc.stderr
    row = next(r for r in json.loads(proc.stdout)["steps"] if r["step"] == "rung_1")
    assert row["status"] == "CORRUPT" and row["error"].startswith("corrupt .status (not JSON")
    assert row["next"] == "run" and "corrupt .status" in row["next_reason"]
    proc = run_cli("status", TINY, "--root", str(root))
    assert "CORRUPT" in proc.stdout
    proc = run_cli("plan", TINY, "--root", str(root), "--json")
    rung1 = next(s for s in json.loads(proc.stdout)["steps"] if s["step"] == "rung_1")
    assert rung1["action"] == "run" and rung1["reason"].startswith("corrupt .status")


def test_submit_reruns_only_the_step_with_a_corrupt_status(tmp_path, ray_local):
    root = str(tmp_path / "runs")
    log = str(tmp_path / "log")
    steps = [Step("a", fault_steps.sleeper, {"sleep": 0.1}), Step("b", fault_steps.sleeper, {"sleep": 0.1}),
             Step("c", fault_steps.sleeper, {"sleep": 0.1}, deps=("a",))]
    # With .status unreadable, the newest lease's age is all that says whether an owner may still be
    # running it: the step waits until that lease is stale (here 2 s, 60 s by default), then reruns.
    ex = Executor(root, "lad", lease_timeout=2.0, heartbeat=0.5)
    assert ex.run(steps, runtime={"log": log}).ok
    nodes = ex.graph(steps)
    before = {n: json.load(open(os.path.join(nodes[n].dir, ".status")))["run_id"] for n in nodes}
    with open(os.path.join(nodes["b"].dir, ".status"), "w") as f:
        f.write("[]")
    s = ex.run(steps, runtime={"log": log})
    assert s.ok and s.ran == ["b"] and set(s.skipped) == {"a", "c"}
    assert s.steps["b"].reason.startswith("corrupt .status (a JSON list")
    prov = json.load(open(os.path.join(nodes["b"].dir, "step.json")))
    assert prov["reason"].startswith("corrupt .status")
    after = {n: json.load(open(os.path.join(nodes[n].dir, ".status")))["run_id"] for n in nodes}
    assert after["a"] == before["a"] and after["c"] == before["c"] and after["b"] != before["b"]
