"""A command trainer as a gang of two processes (``resources.processes=2``): `ladder train` launches the
command once per process over Ray (the built-in gang's placement group and restart), each with its rank's
torch.distributed variables; tests/trainers/bigram_trainer.py sums its gradients over them through rank 0.
The gang trains the losses of one process at the same global batch, and a member SIGKILLed mid-run
restarts the whole gang from its checkpoint, to the same losses."""

from __future__ import annotations

import json
import os
import signal
from pathlib import Path

import numpy as np
import pytest
from conftest import HANG_S, REPO, cmdlines, run_cli, start_cli, wait_for

pytestmark = pytest.mark.slow

SPEC = str(REPO / "tests" / "trainers" / "foreign_ladder.py")
STEPS = 400
CHECKPOINT = 100
SETTINGS = ["--set", f"rungs[0].tokens={256 * STEPS}", "--set", f"rungs[0].checkpoint_every={CHECKPOINT}"]
GANG = ["--set", "rungs[0].resources.processes=2", "--set", "rungs[0].resources.cpus=2"]
# The gang sums each process's half of a batch's gradient, one process the whole at once: float summation
# order only. Measured: a largest relative difference of 3.3e-16 over the 80 logged losses; the bound leaves
# room for other CPUs' rounding.
RTOL = 1e-9


def _losses(out: Path) -> dict[int, float]:
    return {r["step"]: r["loss"] for r in map(json.loads, (out / "metrics.jsonl").read_text().splitlines())}


def _rank_of(pid: int) -> int | None:
    try:
        env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
    except OSError:
        return None
    ranks = [int(e.split(b"=", 1)[1]) for e in env if e.startswith(b"RANK=")]
    return ranks[0] if ranks else None


def _trainer_pids(root: Path) -> dict[int, int]:
    """rank -> pid of each of the gang's trainer processes now running."""
    out = {}
    for pid in (p for p in os.listdir("/proc") if p.isdigit()):
        try:
            cmd = Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:
            continue
        if "bigram_trainer.py" in cmd and str(root) in cmd and (rank := _rank_of(int(pid))) is not None:
            out[rank] = int(pid)
    return out


def test_a_command_gang_trains_one_process_losses_and_restarts_when_a_member_dies(tmp_path):
    one = run_cli("train", SPEC, "rung_1", "--root", str(tmp_path / "one"), *SETTINGS)
    assert one.returncode == 0, one.stdout[-2000:] + one.stderr[-2000:]
    want = _losses(tmp_path / "one" / "foreign" / "train-rung_1")

    root = tmp_path / "gang"
    out = root / "foreign" / "train-rung_1"
    log = tmp_path / "gang.log"
    proc = start_cli("train", SPEC, "rung_1", "--root", str(root), *SETTINGS, *GANG, log=log)
    try:
        def past_checkpoint():
            if not (out / "metrics.jsonl").exists():
                return None
            return max(_losses(out), default=0) >= CHECKPOINT + 10 and _trainer_pids(root).get(1)

        victim = wait_for(past_checkpoint, "the gang to pass its first checkpoint", proc=proc, log=log)
        os.kill(victim, signal.SIGKILL)
        assert proc.wait(timeout=HANG_S) == 0, log.read_text()[-3000:]
    finally:
        if proc.poll() is None:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait()
    text = log.read_text()
    assert "a member of its gang died (MemberLost); restarting the gang of 2" in text, text[-3000:]
    assert not [c for c in cmdlines() if "bigram_trainer.py" in c and str(root) in c]
    got = _losses(out)
    assert sorted(got) == sorted(want) and max(got) == STEPS
    np.testing.assert_allclose([got[s] for s in sorted(got)], [want[s] for s in sorted(want)], rtol=RTOL)
    result = json.loads((out / "result.json").read_text())
    assert result["processes"] == 2 and result["trainer"]["processes"] == 2
    run = json.loads((out / "run.json").read_text())
    assert run["processes"] == 2 and run["resume"] is True  # written again at the restart, on its checkpoint
    assert (out / "gang" / "process-1.log").exists()
