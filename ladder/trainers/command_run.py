"""A command trainer's run, inside its training step's Ray task (docs/trainers.md).

The step writes the run's contract input (``run.json``), starts the command as its child
(ladder.trainers.child: own process group, killed with the step) and, while it runs, follows its rows
(the progress line, the hero's live forecast: ladder.trainers.follow) and forwards a stopping driver
as SIGTERM. After it exits: a stop the step forwarded is INTERRUPTED (the next submit resumes from the
trainer's checkpoint), a non-zero status FAILED with the status and its last lines of standard error,
and an exit 0 is read into result.json (ladder.trainers.outcome; FAILED without the final eval).

``resources.processes`` > 1 runs the command once per process as one gang on Ray: the built-in
trainer's placement group, restart and stop machinery (ladder.trainers.builtin.gang.run_gang) with
members that start the command (:class:`CommandMember`) and the torch.distributed and jax.distributed
variables of each process.
"""

from __future__ import annotations

import os
import time
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ladder.outputs import layout
from ladder.trainers import command
from ladder.trainers.child import Child
from ladder.trainers.contract import has_checkpoint, placeholder_values, run_input
from ladder.trainers.follow import Follower, RowError
from ladder.trainers.outcome import NoFinalEval, result
from ladder.trainers.run import TrainRun

POLL_S = 0.2  # how often the rows are read while the trainer runs (the wait returns at once when it exits)


def gang_env(rank: int, world: int, local_rank: int, local_world: int, master: str, coordinator: str) -> dict[str, str]:
    """torch.distributed's and jax.distributed's variables of one process (docs/trainers.md)."""
    host, _, port = master.rpartition(":")
    return {"MASTER_ADDR": host, "MASTER_PORT": port, "RANK": str(rank), "WORLD_SIZE": str(world),
            "LOCAL_RANK": str(local_rank), "LOCAL_WORLD_SIZE": str(local_world),
            "LADDER_COORDINATOR_ADDRESS": coordinator, "LADDER_NUM_PROCESSES": str(world),
            "LADDER_PROCESS_ID": str(rank)}


def free_address() -> str:
    """``ip:port`` of a free port on this node."""
    import socket

    with socket.socket() as s:
        s.bind(("", 0))
        port = s.getsockname()[1]
    try:
        import ray

        ip = ray.util.get_node_ip_address() if ray.is_initialized() else "127.0.0.1"
    except ImportError:
        ip = "127.0.0.1"
    return f"{ip}:{port}"


def write_input(job: TrainRun, trainer: dict) -> tuple[dict, Path]:
    """The run's contract input, written to ``<out>/run.json``; (the input, the output folder)."""
    out_dir = str(job.out_dir)
    if "://" in out_dir:
        raise ValueError(f"{job.rung.name}: a command trainer writes its files into a local folder; the root "
                         f"{out_dir} is a URL: train it into a local (or shared-filesystem) root")
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    inp = run_input(job.rung, job.data, out, role=job.config.get("role", "rung"), ladder=job.config.get("ladder", ""),
                    resume=has_checkpoint(out), shard_dirs=job.shard_dirs, trainer=trainer)
    layout.write_json_atomic(out / layout.RUN_CONFIG, inp)
    return inp, out


def prepare(job: TrainRun) -> tuple[dict, list[str], dict[str, str], Path]:
    """(the contract input, argv, env of the command, the output folder), the input written to run.json."""
    entry = job.trainer
    inp, out = write_input(job, {"kind": "command", "command": list(entry["command"])})
    path = out / layout.RUN_CONFIG
    values = placeholder_values(inp, path)
    env = {"LADDER_RUN_CONFIG": str(path), "LADDER_OUT_DIR": str(out), **command.env(entry, values)}
    return inp, command.argv(entry, values), env, out


def run(job: TrainRun) -> dict:
    if job.rung.resources.processes > 1:
        return _gang(job)
    inp, argv, env, out = prepare(job)
    callbacks = job.callbacks(str(out))
    follower = Follower(out, inp, callbacks, job.progress)
    t0 = time.monotonic()
    env = {**os.environ, **gang_env(0, 1, 0, 1, free_address(), free_address()), **env}
    child = Child(argv, cwd=job.trainer["base_dir"], env=env, log=out / layout.TRAINER_LOG)
    try:
        rc = None
        while rc is None:
            rc = child.wait(POLL_S)
            follower.poll()
            if rc is None and not child.terminated and job.should_stop():
                child.terminate()
        follower.poll(final=True)
    except RowError as exc:  # the trainer's output is broken: the run ends here, the trainer with it
        return {"status": "FAILED", "message": str(exc)}
    finally:
        child.kill()
    return _ended(job, inp, out, rc, child.terminated, child.describe_exit(rc) if rc else "", callbacks,
                  time.monotonic() - t0, argv)


def _ended(job: TrainRun, inp: dict, out: Path, rc: int, stopped: bool, exit_line: str, callbacks: list,
           wall_s: float, argv: list[str]) -> dict:
    return ended(job, inp, out, rc, stopped, f"its trainer {exit_line}", callbacks, wall_s,
                 {"kind": "command", "command": list(job.trainer["command"]), "argv": argv,
                  "processes": int(job.rung.resources.processes)})


def ended(job: TrainRun, inp: dict, out: Path, rc: int, stopped: bool, failure: str, callbacks: list,
          wall_s: float, trainer: dict) -> dict:
    """result.json's dict of a trainer that has ended (``rc`` 0: normally), or the status that says how it
    failed (``failure``: the line when ``rc`` is not 0) or stopped (``stopped``: the step asked it to)."""
    from ladder.trainers.builtin.hooks import call_hooks

    name = job.rung.name
    if stopped and rc != 0:
        return {"status": "INTERRUPTED", "steps": _last_step(out)}
    if rc != 0:
        return {"status": "FAILED", "message": failure}
    try:
        res = result(inp, out, wall_s, trainer)
    except NoFinalEval as exc:
        if stopped:
            return {"status": "INTERRUPTED", "steps": _last_step(out)}
        return {"status": "FAILED", "message": str(exc).removeprefix(f"{name}: ")}
    except RowError as exc:
        return {"status": "FAILED", "message": str(exc)}
    call_hooks(callbacks, "on_end", res)
    return res


def _last_step(out: Path) -> int | None:
    from ladder.outputs.layout import iter_jsonl

    steps = [r.get("step") for r in iter_jsonl(out / layout.METRICS)]
    return steps[-1] if steps else None


class CommandMember:
    """One process of a command trainer's gang (a Ray actor): it starts the command with its rank's
    variables, forwards the gang's stop as SIGTERM, and returns how the command ended."""

    def where(self) -> tuple[int, str]:
        import ray

        return os.getpid(), ray.get_runtime_context().get_node_id()

    def addresses(self) -> tuple[str, str]:
        return free_address(), free_address()

    def run(self, argv: list[str], cwd: str, env: Mapping[str, str], log: str, stop_file: str, every: float) -> dict:
        child = Child(argv, cwd=cwd, env={**os.environ, **env}, log=Path(log))
        try:
            rc = None
            while rc is None:
                rc = child.wait(every)
                if rc is None and not child.terminated and os.path.exists(stop_file):
                    child.terminate()
        finally:
            child.kill()
        return {"rc": rc, "terminated": child.terminated, "exit": child.describe_exit(rc) if rc else ""}


def _check_member(value: Any) -> None:
    """A member's command killed by a signal nobody sent it: the member is lost, the gang restarts."""
    from ladder.trainers.builtin.gang import MemberLost

    if isinstance(value, dict) and value["rc"] and value["rc"] < 0 and not value["terminated"]:
        raise MemberLost(f"its command {value['exit']}")
    if isinstance(value, dict) and value["rc"] and value["rc"] > 0 and not value["terminated"]:
        raise _MemberFailed(value["exit"])


class _MemberFailed(RuntimeError):
    """A member's command exited with an error of its own: not retried."""


def _gang(job: TrainRun) -> dict:
    import ray

    from ladder.trainers.builtin.gang import GANG_DIR, STOP, Watch, member_env, run_gang

    inp, argv, env, out = prepare(job)
    callbacks = job.callbacks(str(out))
    follower = Follower(out, inp, callbacks, job.progress)
    every = min(job.heartbeat_s, 1.0)
    cwd = job.trainer["base_dir"]
    n = int(job.rung.resources.processes)
    folder = out / GANG_DIR

    def start(actors: list, out_s: str) -> list:
        # a restarted gang resumes: its input says so, as a step started again on its folder's does
        layout.write_json_atomic(out / layout.RUN_CONFIG, {**inp, "resume": has_checkpoint(out)})
        where = ray.get([a.where.remote() for a in actors])
        master, coordinator = ray.get(actors[0].addresses.remote())
        nodes = [node for _, node in where]
        calls = []
        for i, a in enumerate(actors):
            local = [j for j, node in enumerate(nodes) if node == nodes[i]]
            mine = {**env, **gang_env(i, n, local.index(i), len(local), master, coordinator)}
            log = out / layout.TRAINER_LOG if i == 0 else folder / f"process-{i}.log"
            calls.append(a.run.remote(argv, cwd, mine, str(log), str(folder / STOP), every))
        return calls

    t0 = time.monotonic()
    watch = Watch(every=every, should_stop=job.should_stop, on_poll=follower.poll)
    # A gang's members use only their bundle's devices: the builtin's per-member env (CPU JAX without a GPU).
    try:
        first = run_gang(job.rung, out, CommandMember, member_env(job.rung), start, watch=watch, check=_check_member)
        follower.poll(final=True)
    except _MemberFailed as exc:
        return {"status": "FAILED", "message": f"a process of its trainer's gang {exc}"}
    except RowError as exc:  # the gang is torn down by run_gang on the way out
        return {"status": "FAILED", "message": str(exc)}
    return _ended(job, inp, out, first["rc"], first["terminated"], first["exit"], callbacks, time.monotonic() - t0,
                  argv)
