"""Test code on forced XLA host devices: XLA reads XLA_FLAGS when JAX starts, so the code runs in a child
process (argv: the output folder, this folder for ``from conftest import ...``) that writes what it
measured to ``measured.json``; the assertions stay in the test."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from patience import HANG_S

HERE = Path(__file__).resolve().parent


def measure_in_child(code: str, devices: int, out: Path) -> dict:
    env = {**os.environ, "XLA_FLAGS": f"--xla_force_host_platform_device_count={devices}", "JAX_PLATFORMS": "cpu",
           "LADDER_PEAK_FLOPS": "1e11"}
    proc = subprocess.run([sys.executable, "-c", code, str(out), str(HERE)], capture_output=True, text=True, env=env,
                          timeout=HANG_S)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    return json.loads((out / "measured.json").read_text())
