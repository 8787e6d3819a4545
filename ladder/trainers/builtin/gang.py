"""A run over several JAX processes (``resources.processes`` > 1): one gang of Ray actors.

The gang is a Ray placement group of one bundle per process (``cpus``/``gpus`` of the run split evenly;
strategy PACK, so it spreads over as many nodes as it needs and no more) with one actor in each bundle.
The first actor picks the coordinator address; every actor calls ``jax.distributed.initialize`` with it
(CPU collectives through gloo) and trains the same rung: one global mesh over every process's devices,
each process loading only its rows of every batch (``Layout.global_batches``) and writing its own shards
of each orbax checkpoint into the first's folder. Only the first's outputs (metrics, evals, result.json)
are the run's; the others keep theirs under ``gang/process-<i>``.

Why not Ray Train's ``JaxTrainer`` (Ray 2.60): its backend calls ``jax.distributed.initialize`` only for
TPUs and GPUs, so a CPU gang (the tests', and any CPU cluster) would start as independent processes, and
it brings its own run storage, checkpoint and restart machinery beside the executor's and orbax's. A
placement group of actors is the Ray primitive it is built on, with nothing else to reconcile.

A member that dies (its process killed, its node lost) fails its actor call: the gang is torn down
whole (every actor killed, the placement group removed) and started again, up to ``max_retries`` times;
the new gang resumes from the newest checkpoint like any resumed run. An error raised by the training
itself (bad input, divergence) is not retried: the gang is torn down and the error raised.

The caller follows a gang through two files in ``<out>/gang`` (a :class:`Watch`, polled every ``every``
seconds while it waits on the members; both files are removed at each start of the gang). Progress: the
first process writes its latest progress row (step, loss, tokens/s, ETA) to ``progress.json``, at most once
per ``every`` seconds and always at its last step; the caller forwards each new row (the executor's step:
``ctx.progress``, the live view's and ``ladder status``'s row; ``ladder train``: a line on standard error).
Stop: once ``should_stop()`` (a stopping driver), the caller writes ``STOP``, which every member's
``should_stop`` reads; the trainer ors the stop flags of all processes with a collective at each of its
checks (``ladder.trainers.builtin.sigterm.any_process``), so every member checkpoints at the same step and the gang
returns ``{"status": "INTERRUPTED", "steps": s}`` from its first process; running it again resumes from that
checkpoint. A member that dies while its gang is stopping is not restarted (the step's driver is going away):
the error is raised.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from ladder.outputs.layout import write_json_atomic
from ladder.spec import RungSpec, to_dict

GANG_DIR = "gang"
PROGRESS = "progress.json"
STOP = "STOP"


@dataclass(frozen=True)
class Watch:
    """What the caller of a gang follows while it trains, polled every ``every`` seconds: ``on_progress(row)``
    gets each new progress row of the first process; ``should_stop()`` true asks the gang to checkpoint and
    return INTERRUPTED; ``on_poll()`` runs at each poll (a foreign trainer's gang follows its rows there)."""

    every: float
    on_progress: Callable[[dict], None] | None = None
    should_stop: Callable[[], bool] | None = None
    on_poll: Callable[[], None] | None = None


def progress_writer(path: Path, every: float) -> Callable[[dict], None]:
    """The first process's ``progress``: the latest row into ``path``, at most once per ``every`` seconds
    (the caller reads it no more often) and always at the run's last step."""
    last = [float("-inf")]

    def write(row: dict) -> None:
        now = time.monotonic()
        if now - last[0] < every and row["step"] < row["total_steps"]:
            return
        last[0] = now
        write_json_atomic(path, row)

    return write


def _poll(folder: Path, watch: Watch, last: dict | None) -> dict | None:
    """Forward the first process's progress row when it is new; pass a stop request on to the members.
    Returns the last row forwarded."""
    if watch.on_poll is not None:
        watch.on_poll()
    path = folder / PROGRESS
    row = json.loads(path.read_text()) if path.exists() else None  # written atomically: whole or absent
    if row is not None and row != last and watch.on_progress is not None:
        watch.on_progress(row)
        last = row
    if watch.should_stop is not None and watch.should_stop() and not (folder / STOP).exists():
        (folder / STOP).touch()
    return last


def member_env(rung: RungSpec) -> dict[str, str]:
    """Environment of each member's process: its share of host devices; CPU JAX when it has no GPU."""
    from ladder.trainers.builtin.hostdevices import worker_env

    env = dict(worker_env(rung.resources))
    if rung.resources.gpus <= 0:
        env.setdefault("JAX_PLATFORMS", "cpu")
    return env


class Member:
    """One process of the gang (a Ray actor)."""

    def where(self) -> tuple[int, str]:
        """(process id, Ray node id) of this member."""
        import ray

        return os.getpid(), ray.get_runtime_context().get_node_id()

    def coordinator(self) -> str:
        import socket

        import ray

        with socket.socket() as s:
            s.bind(("", 0))
            port = s.getsockname()[1]
        return f"{ray.util.get_node_ip_address()}:{port}"

    def train(self, coordinator: str, processes: int, index: int, rung: dict, data: dict, out_dir: str,
              max_steps: int | None = None, callbacks: Callable[[], Sequence] | None = None,
              shard_dirs: dict[str, str] | None = None, progress_every: float | None = None,
              tokenizer_file: str | None = None) -> dict:
        import jax

        if os.environ.get("JAX_PLATFORMS", "") == "cpu":
            jax.config.update("jax_cpu_collectives_implementation", "gloo")
        jax.distributed.initialize(coordinator_address=coordinator, num_processes=processes, process_id=index)
        from ladder.trainers.builtin import compile_cache, train

        out = Path(out_dir)
        mine = out if index == 0 else out / GANG_DIR / f"process-{index}"
        compile_cache.enable(str(mine))
        # Made here, at each start of the gang, so a restarted gang's callbacks read what the last one
        # wrote (the forecasts already made), as a resumed one-process run's do.
        made = callbacks() if callbacks is not None and index == 0 else ()
        folder = out / GANG_DIR
        progress = progress_writer(folder / PROGRESS, progress_every) if progress_every and index == 0 else None
        return train(rung, data, mine, checkpoint_dir=out / "checkpoints", max_steps=max_steps, callbacks=made,
                     shard_dirs=shard_dirs, progress=progress, should_stop=(folder / STOP).exists,
                     tokenizer_file=tokenizer_file)


def connect() -> None:
    """Ray for a gang started outside a ladder's driver (`ladder train`): the cluster of RAY_ADDRESS, else a
    local one; nothing when Ray is already connected. ``ray.init`` sets its own SIGTERM handler: a caller
    that handles SIGTERM installs its handler after this."""
    import ray

    if not ray.is_initialized():
        ray.init(address=os.environ.get("RAY_ADDRESS") or "local", include_dashboard=False, logging_level="WARNING")


def _check_with_peers(check: Callable[[object], None], value: object, pending: list, every: float | None) -> None:
    """``check(value)``; where it fails a member on its own, first the other members' ends, within a few of
    their polls: a member often fails because a peer was lost before it (its collective's socket closed),
    and then the gang is to restart as for the lost peer, not fail."""
    import ray
    from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError

    try:
        check(value)
    except MemberLost:
        raise
    except Exception as failed:
        grace = 4.0 * (every or 1.0)
        done, _ = ray.wait(pending, num_returns=len(pending), timeout=grace) if pending else ([], [])
        for d in done:
            try:
                check(ray.get(d))
            except MemberLost as lost:
                raise lost from failed
            except (ActorDiedError, ActorUnavailableError, RayActorError) as died:
                raise MemberLost(f"a peer's actor died ({type(died).__name__})") from failed
            except Exception:  # noqa: BLE001 - that peer failed on its own too: the first failure stands
                continue
        raise


class MemberLost(RuntimeError):
    """A member's call ended in a way that means its process was lost (killed by a signal it was not sent):
    the gang restarts like it does when a member's actor dies."""


def train_gang(rung: RungSpec, data, out_dir: str | os.PathLike, *, max_steps: int | None = None,
               on_start: Callable[[list], None] | None = None, callbacks: Callable[[], Sequence] | None = None,
               shard_dirs: dict[str, str] | None = None, watch: Watch | None = None,
               tokenizer_file: str | None = None) -> dict:
    """Train ``rung`` as a gang of ``rung.resources.processes`` JAX processes on the connected Ray cluster;
    result.json's dict (the first process's). ``on_start(actors)`` is called with each gang started.
    ``callbacks()`` (picklable) makes the trainer callbacks of the first process, the one whose outputs are
    the run's (a hero's live forecast, W&B); ``shard_dirs``: the token shards of a tokenized corpus
    (``tokenizer_file``: a ``bpe:`` ladder's tokenizer.json, which encodes ``data.tasks``);
    ``watch``: the progress and stop request the caller follows (module docstring)."""
    import ray

    rung_d, data_d = to_dict(rung), to_dict(data)
    every = watch.every if watch is not None else None

    def start(actors: list, out: str) -> list:
        coordinator = ray.get(actors[0].coordinator.remote())
        if on_start is not None:
            on_start(actors)
        n = len(actors)
        return [a.train.remote(coordinator, n, i, rung_d, data_d, out, max_steps, callbacks if i == 0 else None,
                               shard_dirs, every, tokenizer_file) for i, a in enumerate(actors)]

    return run_gang(rung, out_dir, Member, member_env(rung), start, watch=watch)


def run_gang(rung: RungSpec, out_dir: str | os.PathLike, member: type, env: dict[str, str],
             start: Callable[[list, str], list], *, watch: Watch | None = None,
             check: Callable[[object], None] | None = None):
    """The gang machinery any trainer's gang shares: a placement group of one bundle a process (``cpus`` and
    ``gpus`` split evenly), one ``member`` actor in each with ``env``; ``start(actors, out)`` makes each
    member's call; the calls are waited on together (the caller's ``watch`` polled in between), and the
    first's value returned. A member whose actor dies (or whose value ``check`` finds lost, raising
    :class:`MemberLost`) tears the gang down and starts it again, up to ``max_retries`` times."""
    import ray

    connect()
    from ray.exceptions import ActorDiedError, ActorUnavailableError, RayActorError
    from ray.util.placement_group import placement_group, remove_placement_group
    from ray.util.scheduling_strategies import PlacementGroupSchedulingStrategy

    if "://" in str(out_dir):
        raise ValueError(f"{rung.name}: a gang of processes writes its checkpoint shards into one shared folder; "
                         f"{out_dir} is a URL: train it into a local (or shared-filesystem) root")
    res = rung.resources
    n = int(res.processes)
    bundle = {"CPU": float(res.cpus) / n}
    if res.gpus > 0:
        bundle["GPU"] = float(res.gpus) / n
    out = str(Path(out_dir).absolute())
    folder = Path(out) / GANG_DIR
    every = watch.every if watch is not None else None
    member_cls = ray.remote(member)
    attempts = int(res.max_retries) + 1
    for attempt in range(attempts):
        # A stop or a row left by an earlier gang is not this one's.
        folder.mkdir(parents=True, exist_ok=True)
        for name in (STOP, PROGRESS):
            (folder / name).unlink(missing_ok=True)
        pg = placement_group([dict(bundle) for _ in range(n)], strategy="PACK")
        ray.get(pg.ready())
        actors = [member_cls.options(
            num_cpus=bundle["CPU"], num_gpus=bundle.get("GPU", 0), max_restarts=0,
            runtime_env={"env_vars": env},
            scheduling_strategy=PlacementGroupSchedulingStrategy(pg, placement_group_bundle_index=i),
        ).remote() for i in range(n)]
        try:
            calls = start(actors, out)
            pending, last = list(calls), None
            while pending:  # the first member to fail ends the gang: the others would wait in a collective
                done, pending = ray.wait(pending, num_returns=1, timeout=every)
                for d in done:
                    value = ray.get(d)
                    if check is not None:
                        _check_with_peers(check, value, pending, every)
                if watch is not None:
                    last = _poll(folder, watch, last)
            return ray.get(calls[0])
        except (ActorDiedError, ActorUnavailableError, RayActorError, MemberLost) as exc:
            if watch is not None and watch.should_stop is not None and watch.should_stop():
                raise RuntimeError(f"{rung.name}: a member of its gang died ({type(exc).__name__}) while the "
                                   "gang was stopping: not restarted") from exc
            if attempt + 1 >= attempts:
                raise RuntimeError(f"{rung.name}: a member of its gang of {n} processes died {attempts} times; "
                                   f"the last: {type(exc).__name__}: {exc}") from exc
            print(f"[ladder.train] {rung.name}: a member of its gang died ({type(exc).__name__}); restarting the "
                  f"gang of {n} from its newest checkpoint", flush=True)
        finally:
            for a in actors:
                ray.kill(a, no_restart=True)
            remove_placement_group(pg)
    raise AssertionError("unreachable")
