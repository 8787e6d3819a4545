"""The GPU check (bench/gpu_check.sh): a dense and a MoE rung of about 1B total parameters in bfloat16 at
seq 4,096, a few hundred steps each on one device, printing tokens/s, MFU against the device's datasheet
peak (ladder.trainers.builtin.peaks) and the peak memory against the plan's estimate (ladder.trainers.builtin.memory_plan);
then a rung of the contract's PyTorch trainer, examples/torch_gpt, on the same device (bench.gpu_check_torch).

``--size tiny`` runs the same code path at a size a CPU trains in seconds (``make test`` calls it, so the
script cannot rot); MFU there is against the measured CPU peak, and a CPU reports no peak memory.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time

SIZES = {
    # d_model, layers, heads, kv heads, MoE (experts, top_k, expert_d_ff, shared), batch, microbatches, seq, steps
    "full": {
        "dense": dict(model=dict(d_model=2048, n_layers=20, n_heads=16, n_kv_heads=8), batch=8, microbatches=2,
                      seq=4096, steps=300),
        "moe": dict(model=dict(d_model=1024, n_layers=12, n_heads=8, n_experts=16, top_k=2, expert_d_ff=1408,
                               n_shared=1), batch=8, microbatches=2, seq=4096, steps=300),
    },
    "tiny": {
        "dense": dict(model=dict(d_model=32, n_layers=2, n_heads=2, n_kv_heads=1), batch=4, microbatches=2,
                      seq=64, steps=6),
        "moe": dict(model=dict(d_model=32, n_layers=2, n_heads=2, n_experts=4, top_k=2, expert_d_ff=32,
                               n_shared=1), batch=4, microbatches=2, seq=64, steps=6),
    },
}


def rung_for(kind: str, size: str, gpus: float):
    from ladder.spec import ModelSpec, OptimSpec, Resources, RungSpec, ScheduleSpec

    cfg = SIZES[size][kind]
    model = ModelSpec(**cfg["model"], compute_dtype="bfloat16", tie_embeddings=False)
    steps, batch, seq = cfg["steps"], cfg["batch"], cfg["seq"]
    return RungSpec(name=f"gpu_check_{kind}", model=model, tokens=steps * batch * seq, batch_size=batch, seq_len=seq,
                    seed=0, log_every=max(1, steps // 10), n_evals=1, n_checkpoints=1,
                    optim=OptimSpec(lr=3e-4), schedule=ScheduleSpec(kind="wsd", warmup_steps=max(1, steps // 20)),
                    resources=Resources(gpus=gpus, devices=1, microbatches=cfg["microbatches"]))


def check(kind: str, size: str) -> dict:
    import jax

    from ladder.spec import DataSpec, DomainSpec
    from ladder.trainers.builtin import train
    from ladder.trainers.builtin.memory_plan import rung_layout
    from ladder.trainers.builtin.peaks import run_peak_flops

    device = jax.devices()[0]
    rung = rung_for(kind, size, gpus=1.0 if device.platform == "gpu" else 0.0)
    data = DataSpec(domains=(DomainSpec("prose", "builtin:kjv", 1.0),), eval_tokens=rung.seq_len * 8)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory() as out:
        # several calls: the first (compiling) is left out of tokens/s
        result = train(rung, data, out, steps_per_call=max(1, min(64, rung.steps // 5)))
    peak, source = run_peak_flops(rung.model.compute_dtype, 1)
    tps = result["tokens_per_s"] or 0.0
    stats = device.memory_stats() or {}
    return {"kind": kind, "size": size, "device": device.device_kind, "params_total": rung.model.params_total,
            "steps": result["steps"], "seq_len": rung.seq_len, "tokens_per_s": tps,
            "mfu": tps * rung.model.flops_per_token(rung.seq_len) / peak, "peak_flops": peak, "peak_source": source,
            "peak_memory_bytes": stats.get("peak_bytes_in_use"), "estimated_memory_bytes": rung_layout(rung).memory_bytes,
            "final_train_loss": result["final_train_loss"], "wall_s": time.perf_counter() - t0}


def _memory(r: dict) -> str:
    peak, estimate = r["peak_memory_bytes"], r["estimated_memory_bytes"]
    if peak and estimate:
        return f"peak memory {peak / 2**30:.2f} GiB vs estimate {estimate / 2**30:.2f} GiB ({peak / estimate - 1:+.0%})"
    if peak:
        return f"peak memory {peak / 2**30:.2f} GiB (torch's allocator)"
    return f"peak memory n/a on {r['device']}" + (f" (estimate {estimate / 2**30:.3g} GiB)" if estimate else "")


def line(r: dict) -> str:
    mem = _memory(r)
    return (f"{r['kind']:<5} {r['params_total'] / 1e9:.3g}B params, seq {r['seq_len']}, {r['steps']} steps on "
            f"{r['device']}: {r['tokens_per_s']:,.0f} tokens/s, MFU {r['mfu']:.1%} of {r['peak_flops']:.3g} FLOP/s "
            f"({r['peak_source']}); {mem}; final train loss {r['final_train_loss']:.3f}")


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", choices=sorted(SIZES), default="full")
    parser.add_argument("--kinds", default="dense,moe,torch", help="of dense, moe (built-in) and torch (examples/torch_gpt)")
    parser.add_argument("--json", action="store_true", help="one JSON object per rung instead of text")
    args = parser.parse_args(argv)
    for kind in args.kinds.split(","):
        if kind == "torch":
            from bench.gpu_check_torch import check as check_torch

            r = check_torch(args.size)
        else:
            r = check(kind, args.size)
        print(json.dumps(r) if args.json else line(r), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
