"""wandb.tags and wandb.notes in the spec reach the real (offline) W&B run of every training step,
stay out of the step hashes, and bad values are one line naming the field."""

from __future__ import annotations

import dataclasses
import subprocess
import sys
from pathlib import Path

from patience import HANG_S

from ladder.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
SMOKE = str(REPO / "experiments" / "smoke.py")


def test_tags_and_notes_reach_the_offline_run(tmp_path):
    import wandb

    from ladder.spec import to_dict
    from ladder.wandb import log as wandb_log

    spec = load_spec(SMOKE, ["wandb.notes=ablation of the router bias"])
    spec = dataclasses.replace(spec, wandb=dataclasses.replace(spec.wandb, mode="offline", tags=("moe", "smoke")))

    class Ctx:
        root, ladder, name, hash = str(tmp_path), "lad", "rung_1", "f00d"
        out_dir = str(tmp_path / "lad" / "rung_1-f00d")
        runtime = {"wandb_mode": "offline"}

    config = {"role": "rung", "ladder": "lad", "rung": {"name": "rung_1"}, "wandb": to_dict(spec.wandb)}
    (cb,) = wandb_log.training_callbacks(config, Ctx())
    cb.on_step(1, {"step": 1, "tokens": 64, "loss": 5.0, "lr": 1e-3})
    try:
        assert tuple(cb.run.tags) == ("moe", "smoke")
        assert cb.run.notes == "ablation of the router bias"
    finally:
        cb.on_end({"status": "SUCCESS"})
        wandb.teardown()


def test_tags_do_not_change_the_plan_hashes_and_bad_tags_are_one_line(tmp_path):
    from click.testing import CliRunner

    from ladder.cli.main import main

    def hashes(*sets):
        import json

        r = CliRunner().invoke(main, ["plan", SMOKE, "--root", str(tmp_path), "--json", *sets])
        assert r.exit_code == 0, r.stderr
        return [s["hash"] for s in json.loads(r.stdout)["steps"]]

    assert hashes() == hashes("--set", "wandb.notes=a note")
    bad = tmp_path / "bad.py"
    bad.write_text(f"import runpy, dataclasses\nbase = runpy.run_path({SMOKE!r})['LADDER']\n"
                   "LADDER = dataclasses.replace(base, wandb=dataclasses.replace(base.wandb, tags=('ok', 3)))\n")
    proc = subprocess.run([sys.executable, "-m", "ladder.cli.main", "plan", str(bad), "--root", str(tmp_path)],
                          capture_output=True, text=True, timeout=HANG_S, cwd=REPO)
    lines = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(lines) == 1 and "wandb.tags" in lines[0], proc.stderr
