"""Step functions for the executor tests. They append one line per execution to ``runtime["log"]``
(O_APPEND: atomic across processes), so tests count executions exactly."""

from __future__ import annotations

import json
import os
import time

from ladder.executor import Blocked


def _log(ctx, event: str = "run") -> None:
    path = ctx.runtime.get("log")
    if path:
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, f"{ctx.name} {ctx.run_id} {event} {os.getpid()}\n".encode())
        finally:
            os.close(fd)


def work(config, ctx):
    """Reads its data deps' value.json, writes its own, optionally sleeps or fails (runtime["fail"])."""
    _log(ctx)
    inputs = {}
    for dep, d in ctx.dep_dirs.items():
        p = os.path.join(d, "value.json")
        if os.path.exists(p):
            with open(p) as f:
                inputs[dep] = json.load(f)["value"]
    sleep = float(ctx.runtime.get("sleep", {}).get(ctx.name, config.get("sleep", 0.0)))
    n = 4
    for i in range(n):
        if sleep:
            time.sleep(sleep / n)
        ctx.progress(step=i + 1, total_steps=n, loss=1.0 / (i + 1), tokens_per_s=1000.0)
    if ctx.name in ctx.runtime.get("fail", ()):
        raise RuntimeError(f"{ctx.name} failed on purpose")
    value = float(config.get("x", 0)) + sum(inputs.values())
    ctx.write_json("value.json", {"value": value, "inputs": inputs})
    return {"value": value, "loss": 1.0 / (1.0 + value)}


def gate(config, ctx):
    _log(ctx)
    if ctx.runtime.get("force_gate") or config.get("pass"):
        return {"passed": True}
    raise Blocked(["backtest error 5.0% exceeds 2.0%", "interval too wide"])


def crash(config, ctx):
    """Kills its own worker process (a system failure, which Ray retries)."""
    _log(ctx)
    os._exit(1)


def resumable(config, ctx):
    """A step that, like the trainer, returns what its directory already holds (result.json from an earlier
    run) and records what it found there, so a test sees whether a rerun started from nothing."""
    _log(ctx)
    found = sorted(n for n in os.listdir(ctx.out_dir) if not n.startswith("."))
    previous = os.path.join(ctx.out_dir, "result.json")
    if os.path.exists(previous):
        with open(previous) as f:
            return {**json.load(f), "found": found}
    if ctx.name in ctx.runtime.get("fail", ()):
        raise RuntimeError(f"{ctx.name} failed on purpose")
    ctx.write_json("output.json", {"run_id": ctx.run_id})
    return {"run_id": ctx.run_id, "pid": os.getpid(), "found": found}
