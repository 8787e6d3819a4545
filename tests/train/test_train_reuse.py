"""`ladder train SPEC RUNG` never continues or hands back a run of another config.

Defect this pins (issue 19): its output directory (<root>/<ladder>/train-<rung>) is not content
addressed, and the trainer returned an old complete result, or continued old checkpoints under a
new schedule, whatever the config; train_config.json was overwritten, never compared.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

from conftest import REPO, ladder_train
from patience import HANG_S


def test_train_refuses_outputs_of_another_config_naming_the_field(tmp_path):
    root = tmp_path / "runs"
    first = ladder_train(root, "rung_1", 2, {})
    assert first["steps"] == 2
    out = root / "smoke" / "train-rung_1"
    saved = (out / "train_config.json").read_text()
    ladder = str(os.path.join(os.path.dirname(sys.executable), "ladder"))
    proc = subprocess.run([ladder, "train", str(REPO / "experiments" / "smoke.py"), "rung_1", "--root", str(root),
                           "--steps", "4", "--set", "rungs[rung_1].optim.lr=0.01"],
                          capture_output=True, text=True, timeout=HANG_S, cwd=REPO,
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
    assert proc.returncode == 2, proc.stdout + proc.stderr
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: train: "), proc.stderr
    assert "rung.optim.lr" in lines[0] and "0.01" in lines[0] and "Traceback" not in proc.stderr
    assert (out / "train_config.json").read_text() == saved  # nothing written
    assert json.loads((out / "result.json").read_text())["steps"] == 2
    # the same config continues where it stopped
    assert ladder_train(root, "rung_1", 4, {})["steps"] == 4
