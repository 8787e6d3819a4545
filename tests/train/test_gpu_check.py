"""bench/gpu_check.sh at its tiny size on CPU: the GPU check's whole path runs in `make test`, so it cannot rot."""

from __future__ import annotations

import json
import math
import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_gpu_check_runs_at_a_tiny_size_and_reports_its_figures(tmp_path):
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHON": str(REPO / ".venv" / "bin" / "python")}
    proc = subprocess.run([str(REPO / "bench" / "gpu_check.sh"), "--size", "tiny", "--json"], capture_output=True,
                          text=True, env=env, timeout=600, cwd=tmp_path)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-2000:]
    rows = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    assert [r["kind"] for r in rows] == ["dense", "moe", "torch"]  # torch: examples/torch_gpt, the contract's trainer
    for r in rows:
        assert r["steps"] == 6 and r["tokens_per_s"] > 0 and 0 < r["mfu"] and math.isfinite(r["final_train_loss"])
        assert (r["estimated_memory_bytes"] or 0) > 0 or r["kind"] == "torch"
        assert r["peak_flops"] > 0
