"""Split a CPU run's cores into XLA host devices, so the trainer's data parallelism uses them.

On a CPU, XLA runs one program per device and spreads each op over the intra-op thread pool; on
small models the ops are too small to keep two cores busy. Splitting the process into one host
device per core and training data-parallel over them (``ladder.trainers.builtin.parallel``) runs the trainer's
own step faster at the default ladder's widths on a 2-core machine (``make bench`` measures both), as
two 1-CPU rungs side by side beat one 2-thread rung.

XLA reads ``--xla_force_host_platform_device_count`` once, when JAX first opens its CPU backend, so
the flag must be in the environment of the process before that: the executor gives it to the Ray
worker of the step (``runtime_env``), and ``ladder train`` sets it before it imports JAX. This
module imports nothing heavy, so it can run first.
"""

from __future__ import annotations

import os
import sys

from ladder.spec import Resources

FLAG = "--xla_force_host_platform_device_count"
MEM_FRACTION = "XLA_PYTHON_CLIENT_MEM_FRACTION"


def host_device_count(res: Resources) -> int:
    """How many XLA host devices a run with these resources splits into (1: leave XLA alone)."""
    if res.gpus > 0:  # an accelerator run: its devices are the accelerators, not the host
        return 1
    # A gang's cpus are the whole run's: each of its processes has an even share.
    return res.cpu_devices or max(1, int(res.cpus / max(1, res.processes)))


def xla_flags(n: int, flags: str) -> str:
    """``flags`` with ``n`` host devices; a device count already in ``flags`` (the user's) is kept."""
    if n <= 1 or FLAG in flags:
        return flags
    return " ".join([*flags.split(), f"{FLAG}={n}"])


def worker_env(res: Resources) -> dict[str, str]:
    """Environment variables the run's worker process needs (empty when it needs none)."""
    n = host_device_count(res)
    current = os.environ.get("XLA_FLAGS", "")
    wanted = xla_flags(n, current)
    env = {"XLA_FLAGS": wanted} if wanted != current else {}
    if res.gpus > 0 and res.memory_fraction:
        # JAX preallocates 75% of a GPU by default: two runs sharing one must each ask for less.
        env[MEM_FRACTION] = f"{float(res.memory_fraction):g}"
    return env


def apply_here(res: Resources, name: str = "run") -> bool:
    """Set this process's XLA_FLAGS for ``res``; False, with one line on stderr, when JAX had already
    started (the flag would do nothing then, and the run would train on fewer devices than it says)."""
    env = worker_env(res)
    if not env:
        return True
    if "jax" in sys.modules and "XLA_FLAGS" in env:
        print(f"[ladder.train] {name}: JAX was imported before this run could split into "
              f"{host_device_count(res)} host devices, so it trains on the devices JAX has; to split it, set "
              f"XLA_FLAGS={env['XLA_FLAGS']} before importing jax", file=sys.stderr, flush=True)
        return False
    os.environ.update(env)
    return True
