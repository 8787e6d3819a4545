"""What a compiled train call costs besides its steps: why the trainer runs 64 steps a call.

The default ladder's hero (experiments/tiny.py: d72, batch 10, seq 128, MoE top-2 of 8) and its largest
rung (d48) are timed through the trainer's own chunk (``ladder.trainers.builtin.jitted.make_train_chunk``), on one
XLA device and on one host device per core (a child process started with that XLA flag, as a
multi-CPU run is), at 1, 8 and 64 steps per call. The rounds alternate the call lengths, so the
machine's drift hits every column alike; each cell is the median over rounds of the per-call mean.
The fixed cost of a call is read off the same run: ms for a 1-step call minus ms per step in
64-step calls. Training is bit-identical at every call length (tests/train/test_jitted.py).
"""

from __future__ import annotations

import json
import os
import statistics
import subprocess
import sys

LENGTHS = (1, 8, 64)
STEPS_TIMED = 128  # steps per length and round


def _time(name: str, rounds: int) -> dict[int, list[float]]:
    """Seconds per step at each call length, one entry per round, for ``name`` of experiments/tiny.py."""
    import time

    import jax
    import numpy as np

    from bench.rung_chunk import rung_chunk

    k = max(LENGTHS)
    chunk, state, batches = rung_chunk(os.path.join(os.path.dirname(__file__), "..", "experiments", "tiny.py"), name, k)
    out: dict[int, list[float]] = {n: [] for n in LENGTHS}
    for r in range(rounds + 1):  # round 0 compiles and warms
        for n in LENGTHS:
            lrs = np.full(n, 1e-4, np.float32)
            calls = max(1, STEPS_TIMED // n)
            t = time.perf_counter()
            for _ in range(calls):
                p, b, o, m = chunk(*state, batches[:n], lrs)
                jax.device_get(m)
                state = (p, b, o)
            if r:
                out[n].append((time.perf_counter() - t) / (calls * n))
    return out


def _child(names: list[str], rounds: int) -> None:
    import jax

    res = {name: _time(name, rounds) for name in names}
    print(json.dumps({"devices": len(jax.local_devices()), "times": res}), flush=True)


def _run(n_devices: int, names: list[str], rounds: int) -> dict:
    from ladder.trainers.builtin.hostdevices import xla_flags

    env = {**os.environ, "JAX_PLATFORMS": "cpu"}
    if n_devices > 1:
        env["XLA_FLAGS"] = xla_flags(n_devices, env.get("XLA_FLAGS", ""))
    proc = subprocess.run([sys.executable, "-m", "bench.bench_calls", "--child", str(rounds), *names], env=env,
                          capture_output=True, text=True, check=False)
    if proc.returncode:
        raise RuntimeError(f"bench_calls child ({n_devices} devices) failed: {proc.stderr[-2000:]}")
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    rounds = int(os.environ.get("LADDER_BENCH_ROUNDS", "3"))
    cores = os.cpu_count() or 1
    load0 = os.getloadavg()[0]
    # The hero trains on one host device per core; a rung on one device (two rungs side by side).
    runs = [(cores, ["hero"])] if cores > 1 else []
    runs.append((1, ["rung_5", "hero"]))
    results = [_run(n, names, rounds) for n, names in runs]
    print(f"\nms per optimizer step by steps per compiled call (median of {rounds} alternated rounds, "
          f"{STEPS_TIMED} steps each); load average {load0:.1f} -> {os.getloadavg()[0]:.1f} on {cores} CPUs")
    head = f"{'run':<10}{'devices':>8}" + "".join(f"{f'{n}/call':>10}" for n in LENGTHS) + f"{'call cost':>11}{'8 vs 64':>9}"
    print(head)
    print("-" * len(head))
    for res in results:
        for name, by_len in res["times"].items():
            ms = {int(n): 1e3 * statistics.median(ts) for n, ts in by_len.items()}
            cost = ms[1] - ms[64]
            print(f"{name:<10}{res['devices']:>8}" + "".join(f"{ms[n]:>10.2f}" for n in LENGTHS)
                  + f"{cost:>9.1f}ms{ms[8] / ms[64]:>8.2f}x")


if __name__ == "__main__":
    if len(sys.argv) > 2 and sys.argv[1] == "--child":
        _child(sys.argv[3:], int(sys.argv[2]))
    else:
        main()
