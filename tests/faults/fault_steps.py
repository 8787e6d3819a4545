"""Step functions for executor-level fault tests (shipped to Ray workers by value)."""

from __future__ import annotations

import os
import signal
import time


def _log(ctx, line: str) -> None:
    path = ctx.runtime.get("log")
    if path:
        with open(path, "a") as f:
            f.write(f"{ctx.name} {ctx.run_id} {os.getpid()} {line}\n")


def sleeper(config, ctx):
    """Sleeps ``config['sleep']`` seconds in small slices, reporting progress (so a lost lease stops it)."""
    _log(ctx, "start")
    n = max(1, int(config.get("sleep", 1.0) / 0.1))
    try:
        for i in range(n):
            time.sleep(0.1)
            ctx.progress(step=i + 1, total_steps=n)
    except Exception as e:
        _log(ctx, f"stopped {type(e).__name__}")
        raise
    _log(ctx, "end")
    return {"slept": config.get("sleep", 1.0), "deps": sorted(ctx.dep_dirs)}


def train_rung(config, ctx):
    """Train ``config['rung']`` on ``config['data']`` into the step dir; on the first attempt only, SIGKILL
    this worker right after the checkpoint at ``config['kill_after_checkpoint']`` (a real worker death:
    Ray retries the task, and the trainer resumes from that checkpoint)."""
    from ladder.spec import data_from_dict, rung_from_dict
    from ladder.trainers.builtin import train

    kill_at = config.get("kill_after_checkpoint")
    marker = os.path.join(ctx.out_dir, "killed-once")

    class KillAt:
        def on_checkpoint(self, step):
            if kill_at is not None and step >= kill_at and not os.path.exists(marker):
                with open(marker, "w") as f:
                    f.write(f"{step} {os.getpid()}\n")
                os.kill(os.getpid(), signal.SIGKILL)

    _log(ctx, "start")
    result = train(rung_from_dict(config["rung"]), data_from_dict(config["data"]), ctx.out_dir, callbacks=[KillAt()])
    _log(ctx, "end")
    return result
