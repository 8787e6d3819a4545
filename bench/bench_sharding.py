"""Sharded training on this CPU: per-device memory under FSDP, and the default ladder's speed against a base.

1. Per-device memory at FSDP over 1, 2 and 4 XLA host devices (each count in a child process started with
   that flag): the train state each device holds after the sharded init (live buffers), and the compiled
   train step's temporary bytes per device (XLA's memory analysis: one microbatch's activations and the
   gathered weights), for a dense d256 L4 model at batch 16 x seq 256 in 2 microbatches.
2. The default ladder's (experiments/tiny.py) rung throughput through the trainer's jitted chunk, this tree
   against the trainer before rungs larger than one device (``LADDER_BENCH_BASE``, default 2246bca; one
   line and skipped when git cannot resolve it, as in a copy without history), each tree in its own child
   process (``git archive`` of the base: no worktree registered) with the rung's own device split. Steps/s
   after compile; the rounds alternate the two trees, so load hits both alike; the ratio is the median of
   the rounds' this/base ratios, printed with their range and the load.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
RUNGS = (("rung_1", "rung_3", "rung_5"), ("hero",))  # one host device; the hero's two
STEPS = 64
BASE = "2246bca"  # main before issue 46 (named sharding, gangs): "today's code" the default ladder must not lose to

MEMORY_CHILD = r"""
import json, sys
import jax, numpy as np
from ladder.spec import ModelSpec, Resources, RungSpec
from ladder.trainers.builtin import optim
from ladder.trainers.builtin.jitted import make_train_chunk
from ladder.trainers.builtin.model import build
from ladder.trainers.builtin.parallel import plan
n = len(jax.local_devices())
spec = ModelSpec(d_model=256, n_layers=4, n_heads=4)
rung = RungSpec(name="m", model=spec, tokens=16 * 256 * 10, batch_size=16, seq_len=256, seed=0,
                resources=Resources(devices=n, parallel="fsdp", microbatches=2))
fm = build(spec, 0, host=True)
opt = optim.make_optimizer(rung.optim, fm.params)
layout = plan(rung, fm.params, fm.bias, jax.eval_shape(opt.init, fm.params))
if layout is None:
    import jax.numpy as jnp
    p = {k: jnp.asarray(v) for k, v in fm.params.items()}; b = {k: jnp.asarray(v) for k, v in fm.bias.items()}
    state = (p, b, opt.init(p))
else:
    state = layout.init(fm.params, fm.bias, opt)
leaves = jax.tree.leaves(state)
whole = sum(a.nbytes for a in leaves)
held = max(sum(s.data.nbytes for a in leaves for s in a.addressable_shards if s.device == d) for d in jax.local_devices())
chunk = make_train_chunk(fm, opt, optim.lr_multipliers(fm.param_names, rung.optim), layout, 1, microbatches=2)
batches = np.zeros((1, 16, 257), np.int32)
lowered = chunk.jitted.lower(*state, batches, np.zeros(1, np.float32), np.int32(1))
mem = lowered.compile().memory_analysis()
print(json.dumps({"devices": n, "whole": whole, "held": held, "temp": int(mem.temp_size_in_bytes)}))
"""

SPEED_CHILD = r"""
import hashlib, json, re, sys, time
import jax, numpy as np
import ladder
sys.path.append(sys.argv[4])  # this tree's bench/, after the tree under test
from rung_chunk import rung_chunk
runs, programs = {}, {}
for name in sys.argv[2].split(","):
    chunk, state, batches = rung_chunk(sys.argv[1], name, int(sys.argv[3]))
    lrs = np.full(int(sys.argv[3]), 1e-4, np.float32)
    hlo = chunk.jitted.lower(*state, batches, lrs, np.int32(len(lrs))).compile().as_text()
    hlo = re.sub(r"(, metadata=\{[^}]*\}|, origin=\{[^}]*\}|stack_frame_id=\d+|HloModule \S+)", "", hlo)
    programs[name] = hashlib.sha256("\n".join(l for l in hlo.splitlines()
                                              if "file_location_id" not in l and "file_name_id" not in l
                                              and not re.match(r'^\d+ "', l)).encode()).hexdigest()[:12]
    out = chunk(*state, batches, lrs); jax.block_until_ready(out)
    runs[name] = [chunk, out[:3], batches, lrs]
print(json.dumps({"ready": True, "programs": programs, "ladder": ladder.__file__}), flush=True)
for _ in sys.stdin:
    row = {}
    for name, r in runs.items():
        t = time.perf_counter()
        out = r[0](*r[1], r[2], r[3]); jax.block_until_ready(out)
        r[1] = out[:3]
        row[name] = len(r[3]) / (time.perf_counter() - t)
    print(json.dumps(row), flush=True)
"""


def _env(devices: int, pythonpath: str | None = None) -> dict:
    env = {**os.environ, "JAX_PLATFORMS": "cpu", "LADDER_PEAK_FLOPS": "1e11"}
    env.pop("XLA_FLAGS", None)
    if devices > 1:
        env["XLA_FLAGS"] = f"--xla_force_host_platform_device_count={devices}"
    if pythonpath:
        env["PYTHONPATH"] = pythonpath
    return env


def memory_table() -> None:
    rows = []
    for n in (1, 2, 4):
        proc = subprocess.run([sys.executable, "-c", MEMORY_CHILD], capture_output=True, text=True, env=_env(n),
                              timeout=900)
        if proc.returncode:
            print(f"memory child with {n} devices failed: {proc.stderr[-500:]}")
            return
        rows.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    one = rows[0]
    print("FSDP per-device memory, dense d256 L4, batch 16 x seq 256 in 2 microbatches (bytes per device)")
    print(f"{'devices':>7} {'state held':>12} {'vs 1 dev':>9} {'ideal 1/n':>9} {'step temp':>12} {'vs 1 dev':>9}")
    for r in rows:
        print(f"{r['devices']:>7} {r['held']:>12,} {r['held'] / one['held']:>9.3f} {1 / r['devices']:>9.3f} "
              f"{r['temp']:>12,} {r['temp'] / one['temp']:>9.3f}")


def _base_tree(rev: str) -> tuple[str, str] | None:
    """The base revision's files in a temporary folder (``git archive``: no worktree registered)."""
    hash_ = subprocess.run(["git", "-C", str(REPO), "rev-parse", "--short", rev], capture_output=True, text=True)
    if hash_.returncode:
        print(f"base {rev!r} skipped: git cannot resolve it (set LADDER_BENCH_BASE to a revision)")
        return None
    tmp = tempfile.mkdtemp(prefix="ladder-bench-base-")
    archive = subprocess.Popen(["git", "-C", str(REPO), "archive", rev], stdout=subprocess.PIPE)
    subprocess.run(["tar", "-x", "-C", tmp], stdin=archive.stdout, check=True)
    archive.wait()
    return tmp, hash_.stdout.strip()


def speed_table() -> None:
    import statistics

    rev = os.environ.get("LADDER_BENCH_BASE", BASE)
    rounds = max(3, int(os.environ.get("LADDER_BENCH_ROUNDS", "5")))
    base = _base_tree(rev)
    if base is None:
        return
    base_dir, base_hash = base
    load0 = os.getloadavg()[0]
    try:
        children = {}
        for group in RUNGS:
            devices = 2 if group == ("hero",) else 1
            for label, tree in (("base", base_dir), ("this", str(REPO))):
                children[(label, group)] = subprocess.Popen(
                    [sys.executable, "-c", SPEED_CHILD, str(Path(tree) / "experiments" / "tiny.py"), ",".join(group),
                     str(STEPS), str(REPO / "bench")], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, env=_env(devices, tree),
                    cwd=tree)
        programs = {}
        for (label, _group), child in children.items():
            ready = json.loads(child.stdout.readline())
            tree = base_dir if label == "base" else str(REPO)
            if not Path(ready["ladder"]).resolve().is_relative_to(Path(tree).resolve()):
                raise RuntimeError(f"the {label} child imported {ready['ladder']}, not its tree's {tree}")
            for name, digest in ready["programs"].items():
                programs[(label, name)] = digest
        rates: dict[tuple[str, str], list[float]] = {}
        for _ in range(rounds):
            for (label, _group), child in children.items():
                child.stdin.write("go\n")
                child.stdin.flush()
                for name, tps in json.loads(child.stdout.readline()).items():
                    rates.setdefault((label, name), []).append(tps)
        for child in children.values():
            child.stdin.close()
            child.wait(timeout=60)
        print(f"\ndefault ladder (experiments/tiny.py), trainer chunk of {STEPS} steps after compile, {rounds} rounds "
              f"alternating the trees: steps/s (median), this tree vs base {rev} ({base_hash}); load average "
              f"{load0:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (shared)")
        print(f"{'rung':<8} {'base':>8} {'this':>8} {'this/base':>9} {'range':>13}  compiled program")
        for group in RUNGS:
            for name in group:
                b, t = rates[("base", name)], rates[("this", name)]
                ratios = [x / y for x, y in zip(t, b, strict=True)]
                same = "identical" if programs[("base", name)] == programs[("this", name)] else "differs"
                print(f"{name:<8} {statistics.median(b):>8.2f} {statistics.median(t):>8.2f} "
                      f"{statistics.median(ratios):>9.3f} {min(ratios):>6.3f}-{max(ratios):.3f}  {same} "
                      "(XLA's optimised HLO, source locations left out)")
        print("target: this/base >= 1 within the rounds' range (no slower than the trainer before issue 46)")
    finally:
        shutil.rmtree(base_dir, ignore_errors=True)


def main() -> None:
    print(f"load average {os.getloadavg()[0]:.1f} (a shared machine)")
    memory_table()
    speed_table()


if __name__ == "__main__":
    main()
