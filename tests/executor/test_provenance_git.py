"""step.json records the code a step ran with: the worker's checkout when the step starts, not the
driver's as it was read at submit (a change made while a ladder runs would otherwise go unrecorded)."""

from __future__ import annotations

import json
import os

from ladder.executor.context import execute_step
from ladder.executor.lease import read_state, try_claim
from ladder.executor.provenance import read_git
from ladder.executor.store import Store


def test_a_step_records_the_checkout_it_ran_with_beside_the_drivers(tmp_path):
    store, d = Store(str(tmp_path)), str(tmp_path / "lad" / "fit-abc")
    os.makedirs(d)
    assert try_claim(store, d, read_state(store, d), run_id="r1", reason="new")
    driver = {"commit": "0" * 40, "dirty": False}  # what a driver read before the code under it changed
    payload = {"root": str(tmp_path), "dir": d, "url": d, "run_id": "r1", "name": "fit", "hash": "abc",
               "fn": "exec_stepfns:work", "config": {}, "dep_dirs": {}, "reason": "new", "runtime": {},
               "ladder": "lad", "heartbeat": 0.5, "lineage": {}, "provenance": {"name": "fit", "git": driver}}
    assert execute_step(payload)["status"] == "SUCCESS"
    prov = json.loads((tmp_path / "lad" / "fit-abc" / "step.json").read_text())
    here = read_git()
    if here is None:  # not run from a git checkout: the driver's record is all there is
        assert prov["git"] == driver and "driver_git" not in prov
        return
    assert prov["git"] == here and prov["driver_git"] == driver
    # where they agree, nothing is added
    d2 = str(tmp_path / "lad" / "fit-def")
    os.makedirs(d2)
    assert try_claim(store, d2, read_state(store, d2), run_id="r2", reason="new")
    execute_step({**payload, "dir": d2, "url": d2, "run_id": "r2", "hash": "def", "provenance": {"name": "fit", "git": here}})
    prov = json.loads((tmp_path / "lad" / "fit-def" / "step.json").read_text())
    assert prov["git"] == here and "driver_git" not in prov
