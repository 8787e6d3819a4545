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
from patience import HANG_S

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


# ---- checkpoints: only proven corruption is set aside (issue 19 item 5, issue 15's exit tracebacks)

CKPT_SCRIPT = """
import sys
from pathlib import Path
import numpy as np
from ladder.trainers.builtin.checkpoint import Checkpointer
d, mode = Path(sys.argv[1]), sys.argv[2]
rows = int(sys.argv[3]) if len(sys.argv) > 3 else 20
params = {"w": np.arange(rows * 30, dtype=np.float32).reshape(rows, 30), "b": np.ones(30, np.float32)}
opt = (np.zeros((rows, 30), np.float32), np.ones(30, np.float32))
meta = {"step": 0, "seed": 0, "wall_s": 0.0}
ck = Checkpointer(d)
if mode == "save":
    for s in (4, 8):
        ck.save(s, {k: v + s for k, v in params.items()}, {}, opt, {**meta, "step": s})
else:
    got = ck.restore_latest(params, {}, opt, meta)
    print("RESTORED", got[0] if got else None, float(got[1]["w"][0, 0]) if got else None, flush=True)
ck.close()
"""


def _ckpt(tmp_path, *args, check=True):
    import subprocess
    import sys

    script = tmp_path / "ckpt.py"
    script.write_text(CKPT_SCRIPT)
    proc = subprocess.run([sys.executable, str(script), str(tmp_path / "checkpoints"), *args], capture_output=True,
                          text=True, timeout=HANG_S)
    assert not check or proc.returncode == 0, proc.stdout + proc.stderr
    return proc


def _truncate_arrays(step_dir: Path) -> int:
    n = 0
    for f in step_dir.rglob("*"):
        if f.is_file() and f.parent.name == "d" and f.stat().st_size > 0:  # ocdbt's array data files
            f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
            n += 1
    return n


def test_a_truncated_checkpoint_is_set_aside_and_nothing_prints_at_exit(tmp_path):
    """The restore used to let orbax read the cut-off arrays: it fell back, but the tensorstore futures
    it left printed 'Task exception was never retrieved' / 'Event loop is closed' tracebacks at exit.
    Now the manifest proves the corruption before orbax reads anything."""
    _ckpt(tmp_path, "save")
    assert _truncate_arrays(tmp_path / "checkpoints" / "8")
    proc = _ckpt(tmp_path, "load")
    out = proc.stdout + proc.stderr
    assert "RESTORED 4 4.0" in proc.stdout, out
    assert "checkpoints/8 is corrupt" in proc.stderr and "falling back" in proc.stderr, out
    for noise in ("Traceback", "never retrieved", "Exception ignored", "Event loop is closed"):
        assert noise not in out, out
    assert (tmp_path / "checkpoints.corrupt" / "8").is_dir()  # set aside, not deleted


def test_a_restore_that_fails_for_another_reason_stops_loudly_and_keeps_every_checkpoint(tmp_path):
    """A model whose shapes changed (here 21 rows instead of 20) cannot restore the checkpoints: that is
    not corruption, so the run stops with the reason instead of moving them aside and restarting at 0."""
    _ckpt(tmp_path, "save")
    proc = _ckpt(tmp_path, "load", "21", check=False)
    assert proc.returncode != 0
    assert "CheckpointRestoreError" in proc.stderr and "checkpoints/8 does not fit this model" in proc.stderr
    assert "params.w was saved as (20, 30)" in proc.stderr and "its files are intact, so it was kept" in proc.stderr
    assert sorted(p.name for p in (tmp_path / "checkpoints").iterdir() if p.name.isdigit()) == ["4", "8"]
    assert not (tmp_path / "checkpoints.corrupt").exists()
