"""experiments/smoke_torch.py through the real CLI and Ray: every rung and the hero trained by PyTorch
(examples/torch_gpt, a command trainer of the contract), then fit, predict, gate and report as for a built-in
ladder. The hero is a 2-process gang (DistributedDataParallel over gloo); one of its processes is SIGKILLed
mid-run, and the gang restarts from its checkpoint: the hero's rows read as one run, each step once.

About 4 minutes on 2 shared cores (most of it the five runs' training and the fit's bootstrap).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from patience import HANG_S, wait_for

pytest.importorskip("torch")

from ladder.outputs.layout import iter_jsonl  # noqa: E402

REPO = Path(__file__).resolve().parents[2]
SPEC = str(REPO / "experiments" / "smoke_torch.py")
LADDER = str(Path(sys.executable).parent / "ladder")


def _step_dir(root: Path, name: str) -> Path | None:
    index = root / "smoke_torch" / ".index" / f"{name}.json"
    if not index.exists():
        return None
    try:
        return Path(json.loads(index.read_text())["path"])
    except (ValueError, KeyError):  # being written
        return None


def _trainer_pid(run_json: Path, rank: int) -> int | None:
    """The pid of the trainer process of ``rank`` training from ``run_json`` (its command line names the file)."""
    for proc in Path("/proc").iterdir():
        if not proc.name.isdigit():
            continue
        try:
            argv = (proc / "cmdline").read_bytes().split(b"\0")
            env = (proc / "environ").read_bytes().split(b"\0")
        except OSError:  # gone, or not ours
            continue
        if str(run_json).encode() in argv and f"RANK={rank}".encode() in env:
            return int(proc.name)
    return None


@pytest.mark.slow
def test_smoke_torch_trains_every_run_with_pytorch_and_a_killed_gang_member_restarts_from_its_checkpoint(tmp_path):
    root = tmp_path / "runs"
    log = tmp_path / "submit.out"
    env = {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONUNBUFFERED": "1", "LADDER_PROGRESS_INTERVAL": "5"}
    submit = subprocess.Popen([LADDER, "submit", SPEC, "--root", str(root), "--wandb", "disabled"], cwd=REPO, env=env,
                              stdout=log.open("w"), stderr=subprocess.STDOUT, start_new_session=True)
    try:
        hero = wait_for(lambda: _step_dir(root, "hero"), "the hero's step", proc=submit, log=log)
        # past its first checkpoint (every 46 steps), so the restart has one to resume from
        wait_for(lambda: any(r["step"] >= 60 for r in iter_jsonl(hero / "metrics.jsonl")), "the hero at step 60",
                 proc=submit, log=log)
        pid = wait_for(lambda: _trainer_pid(hero / "run.json", rank=1), "the hero's rank-1 trainer", proc=submit, log=log)
        os.kill(pid, signal.SIGKILL)
        assert submit.wait(timeout=HANG_S) == 0, log.read_text()[-4000:]
    finally:
        if submit.poll() is None:
            os.killpg(submit.pid, signal.SIGKILL)
    check_finished_ladder(root, log.read_text(), env)


def check_finished_ladder(root: Path, out: str, env: dict) -> None:
    assert "ladder complete" in out
    assert "hero: a member of its gang died" in out and "restarting the gang of 2 from its newest checkpoint" in out

    # every run trained by the command, each result.json naming it
    runs = {name: _step_dir(root, name) for name in ("rung_1", "rung_2", "rung_3", "rung_4", "hero")}
    for name, folder in runs.items():
        result = json.loads((folder / "result.json").read_text())
        assert result["status"] == "SUCCESS" and result["complete"], name
        trainer = result["trainer"]
        assert trainer["kind"] == "command" and trainer["command"][1] == "../examples/torch_gpt/train.py", trainer
        assert trainer["argv"][1:3] == ["../examples/torch_gpt/train.py", "--config"], trainer
        assert trainer["processes"] == (2 if name == "hero" else 1), trainer
        assert 2.0 < result["final_eval_loss"] < 3.6, (name, result["final_eval_loss"])
    finals = [json.loads((runs[n] / "result.json").read_text())["final_eval_loss"] for n in runs]
    assert finals == sorted(finals, reverse=True), finals  # larger runs, lower loss

    # the hero resumed: its rank-0 log shows both starts, its rows each step once, in order
    starts = [ln for ln in (runs["hero"] / "trainer.log").read_text().splitlines() if ln.startswith("[torch_gpt] hero")]
    assert len(starts) == 2 and "starting at step 0" in starts[0] and "resuming from step" in starts[1], starts
    steps = [r["step"] for r in iter_jsonl(runs["hero"] / "metrics.jsonl")]
    assert steps == sorted(set(steps)) and steps[-1] == json.loads((runs["hero"] / "run.json").read_text())["steps"]

    # fit, predict, gate and report as for a built-in ladder
    report = subprocess.run([LADDER, "report", SPEC, "--root", str(root), "--json"], capture_output=True, text=True,
                            cwd=REPO, env=env, timeout=HANG_S)
    assert report.returncode == 0, report.stderr[-3000:]
    rep = json.loads(report.stdout)
    assert rep["gate"]["passed"] is True and [r["name"] for r in rep["rungs"]] == ["rung_1", "rung_2", "rung_3", "rung_4"]
    hero_rep = rep["hero"]
    assert hero_rep["status"] == "SUCCESS" and hero_rep["actual_final_loss"] == pytest.approx(finals[-1])
    assert hero_rep["lower"] < hero_rep["predicted_final_loss"] < hero_rep["upper"] and "inside_interval" in hero_rep
    assert hero_rep["snapshots"], "the hero's live forecast wrote no snapshot"
