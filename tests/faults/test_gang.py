"""The smoke ladder's hero as a gang of two JAX processes of one CPU device each, on two local Ray nodes
(CPU collectives through gloo), trained by `ladder train` (stopped by SIGTERM, then resumed by the same
command), against the same hero in one process over two host devices; then a member
SIGKILLed mid-run: the whole gang restarts from its newest checkpoint and trains the same losses on, its
first process carrying the hero's callbacks (live forecast snapshots, W&B offline) as a one-process hero's;
then a stop requested mid-run: every member checkpoints at one step, the gang returns INTERRUPTED and a rerun
resumes to the same losses, the first process's progress rows reaching the caller all along; last, the
executor's gang step: its progress.json, a driver's stop request (Interrupted) and the run again."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
import threading
from pathlib import Path

import numpy as np
import pytest
from patience import HANG_S, wait_for
from wandb_history import read_wandb_history

REPO = Path(__file__).resolve().parents[2]
SMOKE = str(REPO / "experiments" / "smoke.py")
FIRST_CHECKPOINT = 46  # the hero's first checkpoint (and eval), of 456 steps
STEPS = 100  # past the hero's first checkpoint and well into the next stretch
# Two processes of one device against one process of two: the same global program, sharded alike, up to
# how XLA splits the gradient's all-reduce (gloo between processes, in-process between host devices).
# Measured: identical losses here (max relative difference 0); the bound leaves room for other CPUs.
RTOL = 1e-4
# How often a test's caller of train_gang polls its gang: the fault tests' driver heartbeat (test_driver_stop),
# the interval at which the executor's gang step polls when its driver beats that often.
POLL_S = 0.5


def _losses(out: Path) -> dict[int, float]:
    """step -> loss of every logged step (the hero logs every 10th)."""
    rows = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    return {r["step"]: r["loss"] for r in rows}


def _same(got: dict[int, float], want: dict[int, float]) -> None:
    assert sorted(got) == sorted(want) and max(want) == STEPS, (sorted(got), sorted(want))
    np.testing.assert_allclose([got[s] for s in sorted(got)], [want[s] for s in sorted(want)], rtol=RTOL)


@pytest.fixture(scope="module")
def two_nodes():
    import ray
    from ray.cluster_utils import Cluster

    if ray.is_initialized():  # the session's shared local Ray (tests/conftest.py): this module needs the cluster
        ray.shutdown()
    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    tmp = tempfile.mkdtemp(prefix="rg-", dir="/tmp")
    # The cluster records its head's address in Ray's default folder (ray_current_cluster) whatever its own
    # temp_dir, and fails where no Ray has made that folder yet (a fresh machine running this file first).
    from ray._common.utils import get_default_ray_temp_dir

    os.makedirs(get_default_ray_temp_dir(), exist_ok=True)
    store = 80 * 1024 * 1024
    cluster = Cluster(initialize_head=True, head_node_args={"num_cpus": 1, "temp_dir": tmp, "include_dashboard": False,
                                                            "object_store_memory": store})
    cluster.add_node(num_cpus=1, object_store_memory=store)
    ray.init(address=cluster.address, logging_level="WARNING")
    try:
        yield cluster
    finally:
        ray.shutdown()
        cluster.shutdown()


@pytest.fixture(scope="module")
def one_process(ladder_smoke_root):
    """The losses to STEPS of the smoke ladder's hero in one process over two host devices: the session's
    shared smoke ladder trained it (tests/shared_ladders.py), with the seed, data and schedule `ladder train
    SMOKE hero --steps STEPS` uses (measured: the same losses to the bit as that command's, which this fixture
    ran before: the same run trained twice)."""
    [hero] = Path(ladder_smoke_root, "smoke").glob("hero-*")
    result = json.loads((hero / "result.json").read_text())
    assert result["devices"] == 2 and result["processes"] == 1, result
    return {step: loss for step, loss in _losses(hero).items() if step <= STEPS}


def _hero(root: Path):
    from ladder.spec.load import load_spec

    return load_spec(SMOKE, ["hero.resources.processes=2", f"root={root}"])


def _ladder_train(root: Path, cluster, log: Path) -> subprocess.Popen:
    """`ladder train` of the smoke hero as a gang of two processes, on the module's cluster, every progress
    row printed (LADDER_PROGRESS_INTERVAL=0); stdout and stderr into ``log``."""
    env = {**os.environ, "RAY_ADDRESS": cluster.address, "LADDER_PROGRESS_INTERVAL": "0", "JAX_PLATFORMS": "cpu"}
    return subprocess.Popen([str(REPO / ".venv" / "bin" / "ladder"), "train", SMOKE, "hero", "--steps", str(STEPS),
                             "--root", str(root), "--set", "hero.resources.processes=2"],
                            stdout=log.open("w"), stderr=subprocess.STDOUT, env=env)


@pytest.mark.slow
def test_gang_of_two_processes_trains_the_losses_of_one_process_over_two_devices(two_nodes, one_process, tmp_path):
    out = tmp_path / "smoke" / "train-hero"
    # `ladder train` of a gang, sent SIGTERM as soon as its gang is starting (its folder is made after the
    # driver's handler is in place, and the members' start and first compile outlast a poll many times over):
    # every member checkpoints at one step short of the last and the command ends, saying so.
    log = tmp_path / "stopped.log"
    proc = _ladder_train(tmp_path, two_nodes, log)
    wait_for(lambda: (out / "gang").is_dir(), "the gang to start", proc=proc, log=log)
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(HANG_S) != 0, log.read_text()[-3000:]
    stopped = [line for line in log.read_text().splitlines() if "checkpointed at step" in line]
    assert stopped, log.read_text()[-3000:]
    at = int(stopped[0].split("checkpointed at step ")[1].split()[0])
    assert 0 < at < STEPS and (out / "checkpoints" / str(at) / "ladder_manifest.json").exists(), stopped
    assert not (out / "result.json").exists()

    # The same command again resumes to the last step: the losses of one process over two devices.
    log = tmp_path / "resumed.log"
    proc = _ladder_train(tmp_path, two_nodes, log)
    assert proc.wait(HANG_S) == 0, log.read_text()[-3000:]
    result = json.loads((out / "result.json").read_text())
    assert result["status"] == "SUCCESS" and result["processes"] == 2 and result["devices"] == 2, result
    _same(_losses(out), one_process)
    # one run, one result: the second process's outputs stay in its own folder, not the run's
    assert (out / "gang" / "process-1").is_dir()
    # the first process's progress reached the command line, to the last step with its loss
    lines = [line for line in log.read_text().splitlines() if "] hero: step " in line]
    assert lines and f"step {STEPS}/{STEPS} 100%, loss {_losses(out)[STEPS]:.4f}," in lines[-1], lines


def _prediction(folder: Path, total_steps: int) -> Path:
    """A predict step's two files the hero's live forecast reads: a prior loss curve over the hero's steps
    and its predicted final eval loss (made up here: the test is where the snapshots are written)."""
    import pandas as pd

    folder.mkdir(parents=True)
    steps = np.arange(0, total_steps + 1, 8)
    loss = 2.0 + 3.0 * (steps + 10.0) ** -0.3
    pd.DataFrame({"step": steps, "loss": loss, "lower": loss - 0.1, "upper": loss + 0.1}).to_csv(
        folder / "hero_curve.csv", index=False)
    (folder / "prediction.json").write_text(json.dumps({"hero": {"predicted_final_loss": float(loss[-1])}}))
    return folder


def _wandb_history(root: Path, run_id: str) -> list[dict]:
    """History rows of every offline W&B run file of ``run_id`` under the ladder's W&B folder."""
    return [row for f in sorted(root.glob(f"wandb/wandb/offline-run-*/run-{run_id}.wandb"))
            for row in read_wandb_history(f)]


@pytest.mark.slow
def test_a_member_killed_mid_run_restarts_the_gang_from_its_checkpoint(two_nodes, one_process, tmp_path):
    from functools import partial

    import ray

    from ladder.dag.stages import placed
    from ladder.dag.step_fns import run_callbacks
    from ladder.dag.train_steps import run_data
    from ladder.trainers.builtin.gang import train_gang
    from ladder.wandb.log import WandbCallback, run_id

    spec = _hero(tmp_path)
    rung = placed(spec).rung("hero")
    out = tmp_path / "smoke" / "hero"
    predict = _prediction(tmp_path / "smoke" / "predict", rung.steps)
    # The callbacks the executor's hero step gives its gang (ladder.dag.step_fns._gang_step).
    wandb = WandbCallback(root=tmp_path, ladder="smoke", step_name="hero", mode="offline", job_type="hero", salt="g")
    callbacks = partial(run_callbacks, rung, {"role": "hero"}, str(out), {"predict": str(predict)}, [wandb])
    starts: list[list[tuple[int, str]]] = []
    killed = threading.Event()

    def kill_after_first_checkpoint(pid: int) -> None:
        manifest = out / "checkpoints" / str(FIRST_CHECKPOINT) / "ladder_manifest.json"
        while not manifest.exists() and not killed.wait(0.05):
            pass
        if not killed.is_set():
            os.kill(pid, signal.SIGKILL)
            killed.set()

    def on_start(actors):
        where = ray.get([a.where.remote() for a in actors])
        starts.append(where)
        if len(starts) == 1:
            threading.Thread(target=kill_after_first_checkpoint, args=(where[1][0],), daemon=True).start()

    result = train_gang(rung, run_data(spec, "hero"), out, max_steps=STEPS, on_start=on_start,
                        callbacks=callbacks)
    killed.set()
    assert result["status"] == "SUCCESS" and result["steps"] == STEPS, result
    assert len(starts) == 2, starts  # the gang started again, whole, after the kill
    assert len({node for _, node in starts[0]}) == 2, starts  # one process on each Ray node
    _same(_losses(out), one_process)
    # The live forecast ran in the first process: a snapshot at an eval during training (the run goes on
    # to step 456), anchored on that eval's loss, made once though the gang started twice.
    evals = {r["step"]: r["eval_loss"] for r in map(json.loads, (out / "eval.jsonl").read_text().splitlines())}
    snapshots = [json.loads(line) for line in (out / "forecasts.jsonl").read_text().splitlines()]
    at = [s["at_step"] for s in snapshots]
    assert at and len(set(at)) == len(at) and all(a in evals and a < rung.steps for a in at), (at, sorted(evals))
    assert all(s["observed_eval_loss"] == pytest.approx(evals[s["at_step"]]) for s in snapshots)
    assert all((out / "forecasts" / f"{a}.csv").exists() for a in at)
    assert not list((out / "gang").rglob("forecasts*"))  # the other process has none of the run's callbacks
    # W&B logged the hero's training from the first process, to the last step, and its evals after the
    # restart (what the killed gang's W&B service had not yet written went with it: W&B mirrors, the
    # run's own files above are the record).
    rows = _wandb_history(tmp_path / "smoke", run_id("smoke", "hero", "g"))
    assert max(r["_step"] for r in rows if "train/loss" in r) == STEPS, rows[-3:]
    logged = {r["_step"] for r in rows if "eval_loss" in r}
    assert {s for s in evals if FIRST_CHECKPOINT < s <= STEPS} <= logged <= set(evals), (logged, sorted(evals))


def _within_hang_guard(fn):
    """``fn()`` (a gang's run), failing the test when it has not returned within the hang guard: members that
    disagree on the step they stop at wait forever in a collective."""
    box: dict = {}

    def run() -> None:
        try:
            box["value"] = fn()
        except BaseException as exc:  # re-raised in the test's thread below
            box["error"] = exc

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    thread.join(HANG_S)
    assert not thread.is_alive(), f"the gang has not returned after {HANG_S:.0f} s (the hang guard)"
    if "error" in box:
        raise box["error"]
    return box["value"]


@pytest.mark.slow
def test_a_stop_request_checkpoints_every_member_at_one_step_and_a_rerun_resumes_to_the_same_losses(
        two_nodes, one_process, tmp_path):
    from ladder.dag.stages import placed
    from ladder.dag.train_steps import run_data
    from ladder.trainers.builtin.gang import Watch, train_gang

    spec = _hero(tmp_path)
    rung, data = placed(spec).rung("hero"), run_data(spec, "hero")
    out = tmp_path / "smoke" / "hero"
    rows: list[dict] = []
    # The stop is asked for before the gang starts: the caller's first poll writes the stop file while
    # the members are still starting (their start and first compile outlast a poll many times over), so
    # they stop at the first chunk end where they look, whatever the machine's speed. A stop asked for on
    # the first progress row raced the members (it could land at the first chunk end or after the last).
    watch = Watch(every=POLL_S, on_progress=rows.append, should_stop=lambda: True)
    result = _within_hang_guard(lambda: train_gang(rung, data, out, max_steps=STEPS, watch=watch))
    at = result.get("steps")
    assert result["status"] == "INTERRUPTED" and 0 < at < STEPS, result
    assert (out / "checkpoints" / str(at) / "ladder_manifest.json").exists()  # the stop's, every shard written
    # Both members trained to that step and no further (each logs every 10th step).
    assert max(_losses(out)) == max(_losses(out / "gang" / "process-1")) == at - at % 10, (at, max(_losses(out)))
    assert not (out / "result.json").exists()

    stopped_rows = list(rows)
    rows.clear()
    result = _within_hang_guard(lambda: train_gang(rung, data, out, max_steps=STEPS,
                                                   watch=Watch(every=POLL_S, on_progress=rows.append)))
    assert result["status"] == "SUCCESS" and result["steps"] == STEPS, result
    losses = _losses(out)
    _same(losses, one_process)
    # The first process's progress reached the caller: its logged steps in order, each with that step's
    # loss, the first before the stop, the last the run's last (always written).
    got = stopped_rows + rows
    steps = [r["step"] for r in got]
    assert steps == sorted(set(steps)) and steps[0] <= at < steps[-1] == STEPS, steps
    assert all(r["loss"] == losses[r["step"]] and r["total_steps"] == STEPS for r in got), got
    # a rate once a gang has timed a chunk past its compile (the first chunk of each start has none)
    assert got[-1]["tokens_per_s"] > 0 and all(r["tokens_per_s"] is None or r["tokens_per_s"] > 0 for r in got), got
    assert all(r["step"] <= at for r in stopped_rows) and all(r["step"] > at for r in rows), (stopped_rows, rows)


def _ask_to_stop(root: Path) -> None:
    """What a stopping driver does (ladder.executor.stop): the running step's stop file for its run."""
    from ladder.executor.context import STOP_PREFIX

    def running():
        for status in root.glob("smoke/hero-*/.status"):
            got = json.loads(status.read_text())  # written whole (a rename)
            if got.get("status") == "RUNNING":
                return status.parent, got["run_id"]
        return None

    folder, run_id = wait_for(running, "the gang's step to run")
    (folder / f"{STOP_PREFIX}{run_id}").write_text("stop\n")


@pytest.mark.slow
def test_the_executor_runs_a_gang_as_one_step_with_one_result(two_nodes, tmp_path):
    import ray

    from ladder.dag.stages import placed
    from ladder.dag.train_steps import task_resources, training_step
    from ladder.executor import Executor
    from ladder.spec.load import load_spec

    spec = load_spec(SMOKE, ["hero.resources.processes=2", "hero.tokens=24576", f"root={tmp_path}"])
    hero = placed(spec).rung("hero")
    step = training_step(spec, hero, "rung")
    assert task_resources(hero)["cpus"] == 0  # the gang's placement group holds the CPUs, not the step
    # The step polls its gang at its heartbeat: the fault tests' driver heartbeat, as POLL_S.
    executor = Executor(str(tmp_path), spec.name, address=two_nodes.address, heartbeat=POLL_S)
    # Stopped as soon as it runs (its gang not yet started): every member stops at its first check, a
    # checkpoint before the run's end, and the step ends as an interrupted one does.
    asking = threading.Thread(target=_ask_to_stop, args=(tmp_path,), daemon=True)
    asking.start()
    summary = executor.run([step])
    asking.join(HANG_S)
    assert summary.statuses == {"hero": "FAILED"}, summary.statuses
    [folder] = list(tmp_path.glob("smoke/hero-*"))
    status = json.loads((folder / ".status").read_text())
    assert status["error"].startswith("interrupted: the driver stopped (hero checkpointed at step "), status
    stopped = int(status["error"].rsplit(" ", 1)[1].rstrip(")"))
    assert 0 < stopped < 24 and (folder / "checkpoints" / str(stopped) / "ladder_manifest.json").exists(), stopped
    assert not (folder / "result.json").exists()

    summary = executor.run([step])  # the same command again: resumed from the stop's checkpoint
    assert summary.statuses == {"hero": "SUCCESS"}, summary.statuses
    got = json.loads((folder / "result.json").read_text())
    assert got["processes"] == 2 and got["devices"] == 2 and got["steps"] == 24, got
    logged = [json.loads(line)["step"] for line in (folder / "metrics.jsonl").read_text().splitlines()]
    assert logged == [10, 20, 24], logged  # no logged step lost or repeated by the stop and the rerun
    # the gang's first process's progress reached the step's own progress.json, to its last step
    progress = json.loads((folder / "progress.json").read_text())
    assert progress["step"] == progress["total_steps"] == 24 and progress["loss"] == _losses(folder)[24], progress
    # the step gave its gang's first process the W&B callback a one-process step has (offline here)
    rows = [r for f in tmp_path.glob("smoke/wandb/wandb/offline-run-*/run-*.wandb") for r in read_wandb_history(f)]
    assert max((r["_step"] for r in rows if "train/loss" in r), default=None) == 24, rows[-3:]
    groups = ray.util.placement_group_table().values()
    assert groups and all(pg["state"] == "REMOVED" for pg in groups)  # the gang's CPUs are given back
