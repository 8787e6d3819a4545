"""A forced step retrains from nothing; a success clears what a failure left; step.json says who ran it.

Defects these pin (issue 19): a forced step kept its directory (same hash), so a step that resumes
from what its directory holds (the trainer) returned its old result: `ladder rerun` retrained
nothing. A failed attempt's error.txt survived a later success. step.json recorded the driver's
package versions, not those of the worker that ran the step.
"""

from __future__ import annotations

import json
import os

import exec_stepfns

from ladder.executor import Executor, Step
from ladder.executor.fresh import REPLACED_DIR


def read(path):
    with open(path) as f:
        return json.load(f)


def one_step(**config) -> list[Step]:
    return [Step("rung", exec_stepfns.resumable, config)]


def test_a_forced_step_starts_from_nothing_and_its_old_outputs_go_once_it_succeeds(ray_local, tmp_path, log):
    ex = Executor(str(tmp_path / "runs"), "lad", lease_timeout=5.0, heartbeat=0.5)
    steps = one_step()
    first = ex.run(steps, runtime={"log": log})
    assert first.ok
    d = ex.graph(steps)["rung"].url
    old = read(os.path.join(d, "result.json"))
    second = ex.run(steps, force={"rung"}, runtime={"log": log})
    assert second.ok and second.steps["rung"].reason == "forced"
    new = read(os.path.join(d, "result.json"))
    # The step found an empty directory (only step.json, which the executor writes before it starts) and
    # so produced a new result, instead of handing back the old one.
    assert new["found"] == ["step.json"], new
    assert new["run_id"] == second.steps["rung"].run_id != old["run_id"]
    assert read(os.path.join(d, "output.json"))["run_id"] == new["run_id"]
    assert not os.listdir(os.path.join(ex.base, REPLACED_DIR))  # dropped after the success
    assert read(os.path.join(d, "step.json"))["previous_outputs"] is None


def test_a_forced_step_that_fails_keeps_the_old_outputs_aside(ray_local, tmp_path, log):
    ex = Executor(str(tmp_path / "runs"), "lad", lease_timeout=5.0, heartbeat=0.5)
    steps = one_step()
    assert ex.run(steps, runtime={"log": log}).ok
    d = ex.graph(steps)["rung"].url
    old = read(os.path.join(d, "result.json"))
    failed = ex.run(steps, force={"rung"}, runtime={"log": log, "fail": ["rung"]})
    assert failed.steps["rung"].status == "FAILED"
    prov = read(os.path.join(d, "step.json"))
    aside = prov["previous_outputs"]
    assert aside and os.path.dirname(aside) == os.path.join(ex.base, REPLACED_DIR)
    assert read(os.path.join(aside, "result.json")) == old  # kept, whole, for the user
    assert not os.path.exists(os.path.join(d, "result.json"))
    assert "failed on purpose" in open(os.path.join(d, "error.txt")).read()
    # The next submit runs it again (failed before) and succeeds: error.txt is not left behind.
    again = ex.run(steps, runtime={"log": log})
    assert again.ok and again.steps["rung"].reason.startswith("failed before")
    assert not os.path.exists(os.path.join(d, "error.txt"))


def test_step_json_records_the_workers_environment(ray_local, tmp_path, log):
    ex = Executor(str(tmp_path / "runs"), "lad", lease_timeout=5.0, heartbeat=0.5)
    steps = one_step()
    assert ex.run(steps, runtime={"log": log}).ok
    d = ex.graph(steps)["rung"].url
    prov = read(os.path.join(d, "step.json"))
    worker = prov["worker"]
    assert worker["pid"] == read(os.path.join(d, "result.json"))["pid"] != os.getpid()
    assert worker["packages"]["ray"] and worker["python"]
    assert prov["driver_pid"] == os.getpid()  # the driver's own record stays beside it
