"""The GPU check's torch rung: examples/torch_gpt, the contract's PyTorch trainer, trains one dense float32 rung on
one GPU (CUDA, when torch sees one; else the CPU) as a ladder would start it: the contract's input JSON, the script
as a child process, its rows read back. Prints the same figures as the built-in rungs' check: tokens/s, MFU
against the float32 peak, peak memory (torch's allocator, written by the script into its rows on a GPU)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SCRIPT = Path(__file__).resolve().parents[1] / "examples" / "torch_gpt" / "train.py"

SIZES = {
    "full": dict(model=dict(d_model=1024, n_layers=12, n_heads=8), batch=16, seq=2048, steps=200),
    "tiny": dict(model=dict(d_model=32, n_layers=2, n_heads=2), batch=4, seq=64, steps=6),
}


def rung_for(size: str):
    from ladder.spec import ModelSpec, OptimSpec, RungSpec, ScheduleSpec

    cfg = SIZES[size]
    steps, batch, seq = cfg["steps"], cfg["batch"], cfg["seq"]
    return RungSpec(name="gpu_check_torch", model=ModelSpec(**cfg["model"]), tokens=steps * batch * seq, batch_size=batch,
                    seq_len=seq, seed=0, log_every=max(1, steps // 10), n_evals=1, n_checkpoints=1,
                    optim=OptimSpec(lr=3e-4), schedule=ScheduleSpec(kind="wsd", warmup_steps=max(1, steps // 20)))


def check(size: str) -> dict:
    from ladder.outputs.layout import iter_jsonl
    from ladder.spec import DataSpec, DomainSpec
    from ladder.trainers.builtin.peaks import run_peak_flops
    from ladder.trainers.contract import run_input

    rung = rung_for(size)
    data = DataSpec(domains=(DomainSpec("prose", "builtin:kjv", 1.0),), eval_tokens=rung.seq_len * 8)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp)
        (out / "run.json").write_text(json.dumps(run_input(rung, data, out, role="rung", ladder="gpu_check", resume=False)))
        proc = subprocess.run([sys.executable, str(SCRIPT), "--config", str(out / "run.json")], capture_output=True,
                              text=True, env={**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", "4")})
        if proc.returncode:
            raise RuntimeError(f"examples/torch_gpt exited {proc.returncode}: {proc.stderr[-2000:]}")
        rows = list(iter_jsonl(out / "metrics.jsonl"))
    first, last = rows[0], rows[-1]  # the first interval holds the start-up: left out of tokens/s
    tps = (last["tokens"] - first["tokens"]) / (last["wall_s"] - first["wall_s"])
    peak, source = run_peak_flops("float32", 1)
    fpt = rung.model.flops_per_token(rung.seq_len)
    return {"kind": "torch", "size": size, "device": _device_name(), "params_total": rung.model.params_total,
            "steps": last["step"], "seq_len": rung.seq_len, "tokens_per_s": tps, "mfu": tps * fpt / peak,
            "peak_flops": peak, "peak_source": source, "peak_memory_bytes": last.get("gpu_peak_memory_bytes"),
            "estimated_memory_bytes": None, "final_train_loss": last["loss_mean"], "wall_s": time.perf_counter() - t0}


def _device_name() -> str:
    import torch

    return torch.cuda.get_device_name(0) if torch.cuda.is_available() else "cpu"
