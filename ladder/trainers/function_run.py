"""A callable trainer's run: ``function(run)`` (or ``function(run, should_stop)``) called in the training
step's Ray worker, the way an in-process JAX trainer such as Levanter runs. Its rows are followed from
a thread beside it (the progress line, the hero's live forecast), its env set for the call, and its end
read into result.json like a command's (ladder.trainers.command_run.ended)."""

from __future__ import annotations

import inspect
import os
import threading
import time

from ladder.trainers import command
from ladder.trainers.command_run import POLL_S, ended, gang_env, write_input
from ladder.trainers.contract import placeholder_values
from ladder.trainers.follow import Follower, RowError
from ladder.trainers.function import load
from ladder.trainers.run import TrainRun


def _follow(follower: Follower, done: threading.Event, errors: list) -> None:
    while not done.wait(POLL_S):
        try:
            follower.poll()
        except Exception as exc:  # raised by the step once the function returns (a bad row, a lost lease)
            errors.append(exc)
            return


def run(job: TrainRun) -> dict:
    entry = job.trainer
    inp, out = write_input(job, {"kind": "callable", "function": entry["function"]})
    from ladder.outputs import layout

    values = placeholder_values(inp, out / layout.RUN_CONFIG)
    env = {"LADDER_RUN_CONFIG": str(out / layout.RUN_CONFIG), "LADDER_OUT_DIR": str(out),
           **gang_env(0, 1, 0, 1, "127.0.0.1:0", "127.0.0.1:0"), **command.env(entry, values)}
    fn = load(entry)
    takes_stop = len(inspect.signature(fn).parameters) >= 2
    callbacks = job.callbacks(str(out))
    follower = Follower(out, inp, callbacks, job.progress)
    saved = {k: os.environ.get(k) for k in env}
    os.environ.update(env)
    done, errors = threading.Event(), []
    thread = threading.Thread(target=_follow, args=(follower, done, errors), daemon=True)
    thread.start()
    t0 = time.monotonic()
    rc, failure = 0, ""
    try:
        fn(inp, job.should_stop) if takes_stop else fn(inp)
    except Exception as exc:  # the lab's function: its error is the step's one line
        rc, failure = 1, f"its trainer {entry['function']} raised {type(exc).__name__}: {exc}"
    finally:
        done.set()
        thread.join()
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
    if errors and isinstance(errors[0], RowError):
        return {"status": "FAILED", "message": str(errors[0])}
    if errors:
        raise errors[0]
    try:
        follower.poll(final=True)
    except RowError as exc:
        return {"status": "FAILED", "message": str(exc)}
    return ended(job, inp, out, rc, bool(job.should_stop()), failure, callbacks, time.monotonic() - t0,
                 {"kind": "callable", "function": entry["function"]})
