"""Trainer throughput on this machine: tokens/s and achieved GFLOP/s beside the measured matmul peak.

Rows: dense and MoE (top-2 of 8, expert width half the dense width, so the same active size) at
d_model 64 / 128 / 256 (seq 256, batch 16, byte vocab), timed through the trainer's own jitted
multi-step function; FLOPs are the fits' convention (6N + attention, ``ModelSpec.flops_per_token``).
Each row twice: float32, and ``bf16`` (``ModelSpec.compute_dtype="bfloat16"``: the blocks' weight
matmuls take bfloat16 operands with float32 accumulation, ``ladder.trainers.builtin.precision``); a bf16 row's
``% peak`` is against the bf16 matmul peak, measured in the same run.
Two trainer configurations on the same cores: one XLA device using every core (``1 dev``), and the
default of a multi-CPU run, the process split into one XLA host device per core with the batch
data-parallel over them (``N dev``, ``ladder.trainers.builtin.hostdevices``); the second runs in a child
process started with that XLA flag, timed in the same rounds.
The PyTorch eager column trains the same small GPT (RMSNorm pre-LN, RoPE, SwiGLU, tied embeddings,
fused causal SDPA, AdamW) in a subprocess of ``$LADDER_TORCH_PYTHON``, else of this interpreter, when it
can import torch (the ``torch`` extra, which ``make install`` installs; skipped otherwise); against a bf16 row it runs under
``torch.autocast("cpu", dtype=torch.bfloat16)``, like for like. Every ratio is measured in the same run, JAX
and torch alternating, best of several timed calls each; the load average is printed because the
machine is shared, and the CPU's model and widest vector instructions, because the ratios move with them
(XLA and torch's oneDNN pick different kernels on AVX2 and AVX-512 parts). ``LADDER_BENCH_TRAIN_ROWS``, a
regex of the row names, times only those (``dense$``: the float32 dense rows, the torch comparison alone).
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import time

SEQ, BATCH = 256, 16
SIZES = ((64, 2), (128, 4), (256, 4))

TORCH_SCRIPT = r"""
import json, sys, time, math
import torch, torch.nn as nn, torch.nn.functional as F
def run(cfg):
  torch.manual_seed(0)
  torch.set_num_threads(cfg["threads"])
  d, L, H, f, V, T, B = cfg["d"], cfg["L"], cfg["H"], cfg["f"], 256, cfg["T"], cfg["B"]
  hd = d // H

  class Block(nn.Module):
      def __init__(s):
          super().__init__()
          s.n1, s.n2 = nn.RMSNorm(d), nn.RMSNorm(d)
          s.qkv, s.o = nn.Linear(d, 3 * d, bias=False), nn.Linear(d, d, bias=False)
          s.w13, s.w2 = nn.Linear(d, 2 * f, bias=False), nn.Linear(f, d, bias=False)
      def forward(s, x, cos, sin):
          b, t, _ = x.shape
          q, k, v = s.qkv(s.n1(x)).view(b, t, 3, H, hd).unbind(2)
          def rope(z):
              z1, z2 = z.chunk(2, -1)
              return torch.cat([z1 * cos - z2 * sin, z2 * cos + z1 * sin], -1)
          q, k = rope(q).transpose(1, 2), rope(k).transpose(1, 2)
          a = F.scaled_dot_product_attention(q, k, v.transpose(1, 2), is_causal=True)
          x = x + s.o(a.transpose(1, 2).reshape(b, t, d))
          g, u = s.w13(s.n2(x)).chunk(2, -1)
          return x + s.w2(F.silu(g) * u)

  class GPT(nn.Module):
      def __init__(s):
          super().__init__()
          s.emb = nn.Embedding(V, d)
          nn.init.normal_(s.emb.weight, std=0.02)
          s.blocks = nn.ModuleList([Block() for _ in range(L)])
          s.norm = nn.RMSNorm(d)
          inv = 1.0 / (10000 ** (torch.arange(hd // 2) / (hd // 2)))
          ang = torch.arange(T)[:, None] * inv[None]
          s.register_buffer("cos", ang.cos()[None, :, None, :])
          s.register_buffer("sin", ang.sin()[None, :, None, :])
      def forward(s, idx):
          x = s.emb(idx)
          for blk in s.blocks:
              x = blk(x, s.cos, s.sin)
          return s.norm(x) @ s.emb.weight.T

  model = GPT()
  opt = torch.optim.AdamW(model.parameters(), lr=1e-3, betas=(0.9, 0.95), weight_decay=0.1)
  data = torch.randint(0, V, (B, T + 1))
  def step():
      with torch.autocast("cpu", dtype=torch.bfloat16, enabled=cfg.get("bf16", False)):
          logits = model(data[:, :-1])
          loss = F.cross_entropy(logits.float().reshape(-1, V), data[:, 1:].reshape(-1))
      opt.zero_grad(set_to_none=True)
      loss.backward()
      torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
      opt.step()
  for _ in range(3):
      step()
  times = []
  deadline = time.perf_counter() + cfg["seconds"]
  while len(times) < cfg["reps"] or (time.perf_counter() < deadline and len(times) < 4 * cfg["reps"]):
      t = time.perf_counter(); step(); times.append(time.perf_counter() - t)
  return {"best": min(times), "median": sorted(times)[len(times) // 2], "n": len(times)}

print(json.dumps([run(c) for c in json.loads(sys.argv[1])]))
"""


def _torch_python() -> str | None:
    exe = os.environ.get("LADDER_TORCH_PYTHON") or sys.executable
    try:
        subprocess.run([exe, "-c", "import torch"], check=True, capture_output=True, timeout=120)
    except (OSError, subprocess.SubprocessError):
        return None
    return exe


def _torch_round(exe: str, configs: list[dict], seconds: float) -> list[dict] | None:
    cfgs = [{**c, "H": 4, "T": SEQ, "B": BATCH, "threads": os.cpu_count() or 1, "reps": 3, "seconds": seconds}
            for c in configs]
    try:
        out = subprocess.run([exe, "-c", TORCH_SCRIPT, json.dumps(cfgs)], capture_output=True, text=True,
                             timeout=900, check=True)
        return json.loads(out.stdout.strip().splitlines()[-1])
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
        print(f"torch baseline failed: {exc}", file=sys.stderr)
        return None


class _JaxStep:
    """The trainer's own jitted multi-step function on a fixed batch; ``time()`` = seconds per step."""

    def __init__(self, spec, steps_per_call: int, devices: int = 1):
        import jax
        import jax.numpy as jnp
        import numpy as np

        from ladder.spec import Resources, RungSpec
        from ladder.trainers.builtin import optim as optim_lib
        from ladder.trainers.builtin.jitted import make_train_chunk
        from ladder.trainers.builtin.model import build
        from ladder.trainers.builtin.parallel import plan

        rung = RungSpec(name="bench", model=spec, tokens=BATCH * SEQ * 100, batch_size=BATCH, seq_len=SEQ, seed=0,
                        resources=Resources(devices=devices))
        fm = build(spec, 0)
        opt = optim_lib.make_optimizer(rung.optim, fm.params)
        self.state = (fm.params, fm.bias, opt.init(fm.params))
        layout = plan(rung, *self.state)
        if layout is not None:
            self.state = layout.place(*self.state)
        self.fn = make_train_chunk(fm, opt, optim_lib.lr_multipliers(fm.param_names, rung.optim), layout,
                                   steps_per_call)
        self.k = steps_per_call
        self.batches = jnp.asarray(np.random.default_rng(0).integers(0, 256, (self.k, BATCH, SEQ + 1)), jnp.int32)
        self.lrs = jnp.full((self.k,), 1e-3, jnp.float32)
        self._jax = jax
        self.time(1)  # compile

    def time(self, calls: int) -> list[float]:
        out = []
        for _ in range(calls):
            t = time.perf_counter()
            res = self.fn(*self.state, self.batches, self.lrs)
            self._jax.block_until_ready(res)
            out.append((time.perf_counter() - t) / self.k)
            self.state = res[:3]
        return out


def _specs():
    from ladder.spec import ModelSpec

    specs = []
    for dtype in ("float32", "bfloat16"):
        tag = "" if dtype == "float32" else " bf16"
        for d, n_layers in SIZES:
            dense = ModelSpec(d_model=d, n_layers=n_layers, n_heads=4, compute_dtype=dtype)
            moe = ModelSpec(d_model=d, n_layers=n_layers, n_heads=4, n_experts=8, top_k=2,
                            expert_d_ff=dense.dense_d_ff // 2, compute_dtype=dtype)
            specs += [(f"d{d} L{n_layers} dense{tag}", dense), (f"d{d} L{n_layers} moe 2/8{tag}", moe)]
    rows = os.environ.get("LADDER_BENCH_TRAIN_ROWS")  # a regex of the rows to time, e.g. "dense$": float32 dense
    return [(name, spec) for name, spec in specs if not rows or re.search(rows, name)]


def _computed_over_active(spec) -> float:
    """FLOPs the MoE computes per token over its active FLOPs: every expert runs all its capacity
    slots (``capacity_factor`` x its share, per sequence), filled or not."""
    from ladder.trainers.builtin.moe import capacity

    slots = spec.n_experts * capacity(SEQ, spec.n_experts, spec.top_k, spec.capacity_factor) / SEQ
    padding = 6 * spec.n_layers * (slots - spec.top_k) * 3 * spec.d_model * spec.expert_d_ff
    return 1 + padding / spec.flops_per_token(SEQ)


def _child(devices: int) -> None:
    """The host-device side: build every step on ``devices`` devices, then time one round per stdin line."""
    from ladder.trainers.builtin.loop import DEFAULT_STEPS_PER_CALL

    steps = {name: _JaxStep(spec, DEFAULT_STEPS_PER_CALL, devices) for name, spec in _specs()}
    print(json.dumps({"ready": True}), flush=True)
    for _ in sys.stdin:
        print(json.dumps({name: st.time(2) for name, st in steps.items()}), flush=True)


class RoundChild:
    """A child process on ``devices`` XLA host devices that prints one JSON line when ready, then one
    round of timings (row name -> seconds per step) per line it reads; ``argv`` is its command,
    ``xla_extra`` more XLA flags for it (after the user's, before the host-device count)."""

    def __init__(self, argv: list[str], devices: int, env: dict[str, str] | None = None, cwd: str | None = None,
                 xla_extra: str = ""):
        from ladder.trainers.builtin.hostdevices import xla_flags

        flags = xla_flags(devices, f"{os.environ.get('XLA_FLAGS', '')} {xla_extra}".strip())
        full = {**os.environ, "XLA_FLAGS": flags, "JAX_PLATFORMS": "cpu", **(env or {})}
        self.name = f"{' '.join(argv[1:3])} on {devices} devices"
        self.proc = subprocess.Popen(argv, env=full, cwd=cwd, stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        self.ready = self._read()

    def _read(self) -> dict:
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"bench child {self.name} exited ({self.proc.wait()})")
        return json.loads(line)

    def round(self) -> dict[str, list[float]]:
        self.proc.stdin.write("round\n")
        self.proc.stdin.flush()
        return self._read()

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(timeout=60)


def _host_devices(n: int) -> RoundChild:
    """The same steps on ``n`` XLA host devices, data-parallel over them, in a child process."""
    return RoundChild([sys.executable, "-m", "bench.bench_train", "--child", str(n)], n)


def _end_to_end(spec) -> float:
    """tokens/s of a real train() run (data, metrics, evals, checkpoints included), steady state."""
    import tempfile

    from ladder.spec import DataSpec, RungSpec
    from ladder.trainers.builtin import train

    rung = RungSpec(name="bench", model=spec, tokens=BATCH * SEQ * 48, batch_size=BATCH, seq_len=SEQ, seed=0,
                    log_every=8, eval_every=24, checkpoint_every=24)
    with tempfile.TemporaryDirectory() as tmp:
        res = train(rung, DataSpec(eval_tokens=4096), tmp)
    return float(res["tokens_per_s"] or 0.0)


def main() -> None:
    os.environ.setdefault("JAX_PLATFORMS", "cpu")
    from ladder.spec import ModelSpec
    from ladder.trainers.builtin.loop import DEFAULT_STEPS_PER_CALL

    rounds = int(os.environ.get("LADDER_BENCH_ROUNDS", "3"))
    load0 = os.getloadavg()[0]
    torch_exe = _torch_python()
    specs = _specs()
    n_host = os.cpu_count() or 1
    host = _host_devices(n_host) if n_host > 1 else None
    steps = {name: _JaxStep(spec, DEFAULT_STEPS_PER_CALL) for name, spec in specs}
    times: dict[str, list[float]] = {name: [] for name, _ in specs}
    host_times: dict[str, list[float]] = {name: [] for name, _ in specs}
    torch_times: dict[str, list[float]] = {name: [] for name, spec in specs if not spec.is_moe}
    peaks: dict[str, list[float]] = {"float32": [], "bfloat16": []}
    for r in range(rounds):  # interleave everything so contention hits all columns alike
        for dtype, got in peaks.items():
            got.append(measured_peak_flops_fresh(dtype=dtype))
        for name, _ in specs:
            times[name] += steps[name].time(2)
        if host:
            for name, ts in host.round().items():
                host_times[name] += ts
        if torch_exe:
            cfgs = [{"d": s.d_model, "L": s.n_layers, "f": s.dense_d_ff, "bf16": s.compute_dtype == "bfloat16"}
                    for _, s in specs if not s.is_moe]
            got = _torch_round(torch_exe, cfgs, seconds=1.0)
            if got:
                for name, g in zip(torch_times, got, strict=True):
                    torch_times[name].append(g["best"])
        print(f"  round {r + 1}/{rounds} done (load {os.getloadavg()[0]:.1f})", flush=True)
    if host:
        host.close()
    peak = {dtype: max(got) for dtype, got in peaks.items()}
    e2e = _end_to_end(ModelSpec(d_model=128, n_layers=4, n_heads=4))
    load1 = os.getloadavg()[0]

    def rate(spec, ts):
        return BATCH * SEQ / min(ts) * spec.flops_per_token(SEQ) if ts else 0.0

    print(f"\nmatmul peak (1024^3 jitted matmul, float32 accumulation, best of {rounds} rounds): float32 "
          f"{peak['float32'] / 1e9:.1f} GFLOP/s, bf16 operands {peak['bfloat16'] / 1e9:.1f} GFLOP/s; "
          f"seq {SEQ}, batch {BATCH}, {DEFAULT_STEPS_PER_CALL} steps per jitted call; best of {rounds} "
          f"interleaved rounds; load average {load0:.1f} -> {load1:.1f} on {os.cpu_count()} CPUs (shared)")
    nd = f"{n_host} dev"
    head = (f"{'model':<23}{'active N':>10}{'tok/s 1 dev':>12}{f'tok/s {nd}':>12}{'GFLOP/s':>9}{'% peak':>8}"
            f"{'torch tok/s':>12}{'1dev/torch':>11}{f'{nd}/torch':>11}{'MoE/dense':>10}")
    print(head)
    print("-" * len(head))
    dense_rate, torch_f32_tps, moe_computed, bf16_over_torch_f32 = {}, {}, [], []
    for name, spec in specs:
        one, many = rate(spec, times[name]), rate(spec, host_times[name])
        best = max(one, many)
        tps1, tpsn = BATCH * SEQ / min(times[name]), (BATCH * SEQ / min(host_times[name]) if host_times[name] else 0)
        key = (spec.d_model, spec.compute_dtype)
        cells = (f"{name:<23}{spec.params_active:>10,}{tps1:>12,.0f}{tpsn:>12,.0f}{best / 1e9:>9.1f}"
                 f"{100 * best / peak[spec.compute_dtype]:>7.1f}%")
        if spec.is_moe and key not in dense_rate:  # its dense row left out by LADDER_BENCH_TRAIN_ROWS
            cells += f"{'-':>12}{'-':>11}{'-':>11}{'-':>10}"
        elif spec.is_moe:
            cells += f"{'-':>12}{'-':>11}{'-':>11}{best / dense_rate[key]:>9.2f}x"
            padding = _computed_over_active(spec)
            moe_computed.append(f"{name} {best * padding / dense_rate[key]:.2f} (x{padding:.2f})")
        else:
            dense_rate[key] = best
            if spec.compute_dtype == "bfloat16" and spec.d_model in torch_f32_tps:  # float32 rows come first
                bf16_over_torch_f32.append(f"d{spec.d_model} {max(tps1, tpsn) / torch_f32_tps[spec.d_model]:.2f}x")
            if torch_times.get(name):
                torch_tps = BATCH * SEQ / min(torch_times[name])
                if spec.compute_dtype == "float32":
                    torch_f32_tps[spec.d_model] = torch_tps
                cells += f"{torch_tps:>12,.0f}{tps1 / torch_tps:>10.2f}x{tpsn / torch_tps:>10.2f}x"
            else:
                cells += f"{'-':>12}{'-':>11}{'-':>11}"
        print(cells)
    print(f"GFLOP/s, % peak and MoE/dense use the faster configuration of each row; {nd}: one XLA host "
          f"device per core, batch data-parallel over them (the default for a run asking for {n_host} CPUs); "
          f"torch on a bf16 row: autocast bf16")
    print("MoE/dense counting the capacity slots the experts compute, filled or not (computed / active FLOPs): "
          + ", ".join(moe_computed))
    if bf16_over_torch_f32:
        print(f"trainer bf16 (faster configuration) against torch eager float32: {', '.join(bf16_over_torch_f32)}")
    print(f"end-to-end train() d128 L4 dense, 1 dev (real data, metrics, evals, checkpoints): {e2e:,.0f} tok/s")
    print(cpu_line())
    print("targets: dense d256 >= 55% of peak; MoE/dense (active FLOP/s) >= 0.75x; float32 trainer / torch eager "
          "at least 1.11x / 1.03x / 0.93x at d64 / d128 / d256 (measured on an AVX2 EPYC "
          "before rungs larger than one device)")
    if not torch_exe:
        print("torch column skipped: torch does not import here (`make install` installs the torch extra; or set "
              "LADDER_TORCH_PYTHON to an interpreter that has it)")


def cpu_line() -> str:
    """The CPU's model name and its widest vector instructions (Linux's /proc/cpuinfo; blank elsewhere)."""
    try:
        info = open("/proc/cpuinfo").read()
    except OSError:
        return "CPU: unknown (no /proc/cpuinfo)"
    model = next((line.split(":", 1)[1].strip() for line in info.splitlines() if line.startswith("model name")), "?")
    flags = set(next((line.split(":", 1)[1].split() for line in info.splitlines() if line.startswith("flags")), []))
    isa = [f for f in ("avx2", "avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    return f"CPU: {model}, {os.cpu_count()} cores, {' '.join(isa) or 'no AVX2'}"


def measured_peak_flops_fresh(n: int = 1024, reps: int = 5, dtype: str = "float32") -> float:
    """The matmul peak measured now (not cached), so each round has its own."""
    from ladder.trainers.builtin import metrics

    metrics._PEAK.clear()
    return metrics.measured_peak_flops(n=n, reps=reps, dtype=dtype)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(int(sys.argv[2]))
    else:
        main()
