"""The executor on a real local Ray with real files: skip, rerun, lineage, failures, Blocked, plan, provenance."""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time

import exec_stepfns
from exec_ladders import count_runs, ladder_steps

from ladder.executor import Executor, Step, expand_force
from ladder.executor.lease import beat, read_state, try_claim, write_final


def ex_for(root, **kw):
    return Executor(str(root), "lad", lease_timeout=kw.pop("lease_timeout", 5.0), heartbeat=kw.pop("heartbeat", 0.5), **kw)


def read(path):
    with open(path) as f:
        return json.load(f)


def test_runs_ladder_then_skips_success(ray_local, tmp_path, log):
    ex = ex_for(tmp_path / "runs")
    rt = {"log": log, "force_gate": True}
    s = ex.run(ladder_steps(), runtime=rt)
    assert s.ok, s.statuses
    assert s.ran == ["rung_1", "rung_2", "fit", "gate", "hero", "report"]
    assert count_runs(log) == dict.fromkeys(s.ran, 1)
    nodes = ex.graph(ladder_steps())
    fit = nodes["fit"]
    # outputs: result.json (the returned dict), the dep values actually read, .status SUCCESS
    assert read(os.path.join(fit.url, "result.json"))["value"] == 3.0
    assert read(os.path.join(fit.url, "value.json"))["inputs"] == {"rung_1": 1.0, "rung_2": 2.0}
    st = read(os.path.join(fit.url, ".status"))
    assert st["status"] == "SUCCESS" and st["end"] >= st["start"]
    # step.json provenance
    prov = read(os.path.join(fit.url, "step.json"))
    assert prov["reason"] == "new" and prov["status"] == "SUCCESS"
    assert prov["config"]["law"] == "compute" and prov["hashed_config"].get("notes") is None
    assert {d["step"]: d["path"] for d in prov["deps"]} == {"rung_1": nodes["rung_1"].url, "rung_2": nodes["rung_2"].url}
    assert prov["dep_run_ids"] == {"rung_1": s.steps["rung_1"].run_id, "rung_2": s.steps["rung_2"].run_id}
    assert "ray" in prov["packages"] and "numpy" in prov["packages"]
    assert prov["host"] and prov["end"] >= prov["start"] and prov["run_id"] == s.steps["fit"].run_id
    assert prov["git"] is None or len(prov["git"]["commit"]) == 40
    # second submit: nothing runs, everything is skipped
    again = ex.run(ladder_steps(), runtime=rt)
    assert again.ok and again.ran == [] and len(again.skipped) == 6
    assert count_runs(log) == dict.fromkeys(s.ran, 1)
    # status: every step SUCCESS with its path and the loss its progress reported last
    rows = {r["name"]: r for r in ex.status(ladder_steps())}
    assert all(r["status"] == "SUCCESS" and r["next"] == "skip" and r["step"] == n for n, r in rows.items())
    assert rows["rung_1"]["loss"] == 0.25 and rows["rung_1"]["path"] == nodes["rung_1"].url
    assert rows["rung_1"]["progress"]["step"] == 4 and rows["rung_1"]["progress"]["total_steps"] == 4


def test_rerun_refreshes_data_dependents_only(ray_local, tmp_path, log):
    ex = ex_for(tmp_path / "runs")
    rt = {"log": log, "force_gate": True}
    assert ex.run(ladder_steps(), runtime=rt).ok
    before = count_runs(log)
    s = ex.run(ladder_steps(), force=expand_force(ladder_steps(), ["rung_2"]), runtime=rt)
    assert s.ok
    assert set(s.ran) == {"rung_2", "fit", "gate", "report"}  # the hero only waits on the gate
    after = count_runs(log)
    assert {k: after[k] - before[k] for k in after} == {"rung_1": 0, "rung_2": 1, "fit": 1, "gate": 1,
                                                         "hero": 0, "report": 1}
    assert s.steps["rung_2"].reason == "forced"


def test_lineage_refreshes_dependents_after_a_driver_stopped_between_rung_and_fit(ray_local, tmp_path, log):
    ex = ex_for(tmp_path / "runs")
    rt = {"log": log, "force_gate": True}
    steps = ladder_steps()
    assert ex.run(steps, runtime=rt).ok
    # A driver forces rung_1 and "dies" before reaching the fit: here, it only ever submits the rungs.
    assert ex.run(steps[:2], force={"rung_1"}, runtime=rt).ran == ["rung_1"]
    plan = {e.name: e for e in ex.plan(steps)}
    assert (plan["fit"].action, plan["fit"].reason) == ("run", "dependency refreshed: rung_1")
    assert plan["rung_1"].action == "skip" and plan["hero"].action == "skip"
    s = ex.run(steps, runtime=rt)  # the next plain submit refreshes what read the old rung_1
    assert s.ok and set(s.ran) == {"fit", "gate", "report"}
    assert s.steps["fit"].reason == "dependency refreshed: rung_1"
    prov = read(os.path.join(ex.graph(steps)["fit"].url, "step.json"))
    assert prov["reason"] == "dependency refreshed: rung_1"
    assert count_runs(log)["hero"] == 1


def test_failure_propagates_and_dependents_never_start(ray_local, tmp_path, log):
    ex = ex_for(tmp_path / "runs")
    steps = ladder_steps()
    s = ex.run(steps, runtime={"log": log, "fail": ["rung_2"], "force_gate": True})
    assert not s.ok
    assert s.statuses == {"rung_1": "SUCCESS", "rung_2": "FAILED", "fit": "DEP_FAILED", "gate": "DEP_FAILED",
                          "hero": "DEP_FAILED", "report": "DEP_FAILED"}
    assert set(s.failed) == {"rung_2", "fit", "gate", "hero", "report"}
    assert count_runs(log) == {"rung_1": 1, "rung_2": 1}  # no dependent ever started
    nodes = ex.graph(steps)
    st = read(os.path.join(nodes["rung_2"].url, ".status"))
    assert st["status"] == "FAILED" and "rung_2 failed on purpose" in st["error"]
    assert "RuntimeError" in open(os.path.join(nodes["rung_2"].url, "error.txt")).read()
    assert read(os.path.join(nodes["fit"].url, ".status"))["status"] == "DEP_FAILED"
    plan = {e.name: e for e in ex.plan(steps)}
    assert plan["rung_1"].action == "skip"
    assert plan["rung_2"].action == "run" and plan["rung_2"].reason.startswith("failed before: RuntimeError")
    assert plan["fit"].action == "run" and "dependency failed" in plan["fit"].reason
    s = ex.run(steps, runtime={"log": log, "force_gate": True})  # fixed: the rest runs, rung_1 does not
    assert s.ok and s.ran == ["rung_2", "fit", "gate", "hero", "report"]


def test_worker_crash_is_retried_then_failed(ray_local, tmp_path, log):
    ex = ex_for(tmp_path / "runs")
    steps = [Step("boom", exec_stepfns.crash, {}, resources={"cpus": 1, "max_retries": 1}),
             Step("after", exec_stepfns.work, {}, deps=("boom",))]
    s = ex.run(steps, runtime={"log": log})
    assert s.statuses == {"boom": "FAILED", "after": "DEP_FAILED"}
    assert count_runs(log) == {"boom": 2}  # one try plus max_retries=1
    assert s.steps["boom"].error


def test_blocked_propagates_and_a_forced_gate_releases_it(ray_local, tmp_path, log):
    ex = ex_for(tmp_path / "runs")
    steps = ladder_steps()
    s = ex.run(steps, runtime={"log": log})
    assert s.statuses == {"rung_1": "SUCCESS", "rung_2": "SUCCESS", "fit": "SUCCESS", "gate": "BLOCKED",
                          "hero": "BLOCKED", "report": "SUCCESS"}  # report reads whatever exists
    assert s.blocked == ["gate", "hero"] and s.failed == [] and not s.ok
    assert "hero" not in count_runs(log)
    gate = read(os.path.join(ex.graph(steps)["gate"].url, ".status"))
    assert gate["reasons"] == ["backtest error 5.0% exceeds 2.0%", "interval too wide"]
    plan = {e.name: e for e in ex.plan(steps)}
    assert plan["gate"].action == "blocked" and "backtest error" in plan["gate"].reason
    assert plan["hero"].action == "blocked" and plan["hero"].reason == "waits on blocked gate"
    s = ex.run(steps, runtime={"log": log, "force_gate": True})
    assert s.ok and s.ran == ["gate", "hero", "report"]  # report refreshes: the hero now has a result


def test_plan_shows_run_skip_wait_with_reasons(ray_local, tmp_path, log):
    ex = ex_for(tmp_path / "runs")
    steps = ladder_steps(gate_pass=True)
    plan = ex.plan(steps)
    assert [(e.action, e.reason) for e in plan] == [("run", "new")] * 6
    assert plan[0].flops == 1e12 and plan[2].deps == ["rung_1", "rung_2"] and plan[0].status is None
    assert plan[0].path == ex.graph(steps)["rung_1"].url and len(plan[0].hash) == 12
    assert ex.run(steps, runtime={"log": log}).ok
    assert {e.action for e in ex.plan(steps)} == {"skip"}
    forced = {e.name: (e.action, e.reason) for e in ex.plan(steps, force={"hero"})}
    assert forced["hero"] == ("run", "forced") and forced["report"] == ("run", "dependency refreshed: hero")
    assert forced["fit"][0] == "skip"
    # another driver holds rung_2 right now: wait for it; its data dependents will refresh
    d = ex.graph(steps)["rung_2"].dir
    assert try_claim(ex.store, d, read_state(ex.store, d), run_id="other", reason="forced", owner="elsewhere:9:z")
    plan = {e.name: e for e in ex.plan(steps)}
    assert plan["rung_2"].action == "wait" and "elsewhere:9:z" in plan["rung_2"].reason
    assert plan["fit"].action == "run" and plan["fit"].reason == "dependency refreshed: rung_2"
    assert plan["hero"].action == "skip"


def test_waits_for_a_live_owner_and_uses_its_result(ray_local, tmp_path, log):
    ex = ex_for(tmp_path / "runs", lease_timeout=2.0, heartbeat=0.3)
    steps = ladder_steps(gate_pass=True)
    d = ex.graph(steps)["rung_1"].dir
    ex.store.makedirs(d)
    assert try_claim(ex.store, d, read_state(ex.store, d), run_id="other-run", reason="new", owner="other:1:a",
                     heartbeat=0.3)

    def other_driver():  # heartbeats past the lease timeout, then commits a result
        for _ in range(12):
            time.sleep(0.3)
            beat(ex.store, d, "other-run")
        with open(os.path.join(d, "value.json"), "w") as f:
            json.dump({"value": 10.0}, f)
        write_final(ex.store, d, "other-run", "SUCCESS", lineage={})

    t = threading.Thread(target=other_driver)
    t.start()
    s = ex.run(steps, runtime={"log": log})
    t.join()
    assert s.ok
    assert s.steps["rung_1"].action == "waited" and s.steps["rung_1"].run_id == "other-run"
    assert "rung_1" not in count_runs(log)  # never ran it itself
    assert read(os.path.join(ex.graph(steps)["fit"].url, "value.json"))["inputs"]["rung_1"] == 10.0


def test_stale_lease_is_taken_over(ray_local, tmp_path, log):
    ex = ex_for(tmp_path / "runs", lease_timeout=1.0, heartbeat=0.2)
    steps = ladder_steps(gate_pass=True)
    d = ex.graph(steps)["rung_1"].dir
    ex.store.makedirs(d)
    assert try_claim(ex.store, d, read_state(ex.store, d), run_id="dead-run", reason="new", owner="deadhost:1:x",
                     heartbeat=0.2)
    time.sleep(1.2)  # the dead owner never heartbeats
    plan = {e.name: e for e in ex.plan(steps)}
    assert plan["rung_1"].action == "run" and plan["rung_1"].reason.startswith("lease expired (owner deadhost:1:x")
    s = ex.run(steps, runtime={"log": log})
    assert s.ok and s.steps["rung_1"].action == "ran" and s.steps["rung_1"].run_id != "dead-run"
    assert count_runs(log)["rung_1"] == 1
    st = read_state(ex.store, d)
    assert st.gen == 2 and st.lease["previous_owner"] == "deadhost:1:x" and st.state == "SUCCESS"


def test_config_change_records_field_diff(ray_local, tmp_path, log):
    ex = ex_for(tmp_path / "runs")
    rt = {"log": log, "force_gate": True}
    old = ex.graph(ladder_steps())
    assert ex.run(ladder_steps(), runtime=rt).ok
    steps = ladder_steps(x1=1.5)
    plan = {e.name: e for e in ex.plan(steps)}
    assert plan["rung_1"].reason == "config changed: x 1.0 -> 1.5"
    assert plan["rung_1"].diff == {"x": [1.0, 1.5]}
    assert plan["fit"].reason == "dependency changed: rung_1"
    assert plan["rung_2"].action == "skip" and plan["hero"].action == "skip"
    s = ex.run(steps, runtime=rt)
    assert s.ok and set(s.ran) == {"rung_1", "fit", "gate", "report"}
    new = ex.graph(steps)
    prov = read(os.path.join(new["rung_1"].url, "step.json"))
    assert prov["config_diff"] == {"x": [1.0, 1.5]} and prov["reason"].startswith("config changed")
    assert prov["previous"]["path"] == old["rung_1"].url
    index = read(str(tmp_path / "runs" / "lad" / ".index" / "rung_1.json"))
    assert index["path"] == new["rung_1"].url and index["config"]["x"] == 1.5
    # the old directory is untouched: switching back is a skip
    assert [e.action for e in ex.plan(ladder_steps())][:2] == ["skip", "skip"]


def test_file_url_root_and_max_concurrent(ray_local, tmp_path, log):
    ex = Executor(f"file://{tmp_path}/runs", "lad", max_concurrent=1, lease_timeout=5, heartbeat=0.5)
    s = ex.run(ladder_steps(gate_pass=True), runtime={"log": log})
    assert s.ok and (tmp_path / "runs" / "lad").is_dir()
    starts = sorted((o.start, o.end) for o in s.steps.values())
    assert all(a[1] <= b[0] for a, b in zip(starts, starts[1:], strict=False))  # one at a time


def test_infeasible_resources_fail_with_one_line_on_a_local_ray(ray_local, tmp_path, log):
    ex = ex_for(tmp_path / "runs")
    steps = [Step("big", exec_stepfns.work, {}, resources={"cpus": 1, "gpus": 64}),
             Step("small", exec_stepfns.work, {})]
    s = ex.run(steps, runtime={"log": log})
    assert s.statuses == {"big": "FAILED", "small": "SUCCESS"}
    assert "needs 64 GPU" in s.steps["big"].error and "big" not in count_runs(log)


def test_progress_view_renders_running_steps(ray_local, tmp_path, log, capsys, monkeypatch):
    # stderr is captured, not a terminal: the view prints plain lines (every progress move, here)
    monkeypatch.setenv("LADDER_PROGRESS_INTERVAL", "0")
    ex = ex_for(tmp_path / "runs", show_progress=True)
    s = ex.run(ladder_steps(gate_pass=True)[:2], runtime={"log": log, "sleep": {"rung_1": 1.0, "rung_2": 1.0}})
    assert s.ok
    err = capsys.readouterr().err
    assert "tokens/s" in err and "2/2 done" in err and "rung_1: started" in err
    assert "rung_1: SUCCESS after" in err and "loss 0.2500" in err  # the last progress it reported


def test_plan_on_an_fsspec_url(tmp_path):
    from ladder.executor.lease import write_final as final

    ex = Executor(f"memory://plan-{time.time_ns()}/runs", "lad", lease_timeout=5, heartbeat=1)
    steps = ladder_steps()
    assert [e.action for e in ex.plan(steps)] == ["run"] * 6
    d = ex.graph(steps)["rung_1"].dir
    ex.store.makedirs(d)
    assert try_claim(ex.store, d, read_state(ex.store, d), run_id="r", reason="new")
    final(ex.store, d, "r", "SUCCESS", lineage={})
    plan = {e.name: e for e in ex.plan(steps)}
    assert plan["rung_1"].action == "skip" and plan["rung_1"].path.startswith("memory://")
    assert {r["name"]: r["status"] for r in ex.status(steps)}["rung_1"] == "SUCCESS"


def test_a_sizes_second_seed_starts_after_every_first_one(ray_local, tmp_path, log):
    """Largest first, but a step sharing a warm_key with an earlier one waits for the first of each
    key, so it finds the compile cache its twin filled."""
    w = exec_stepfns.work
    steps = [Step(f"r{d}" + ("_s1" if s else ""), w, {"x": float(d + s)}, flops=float(d), warm_key=f"d{d}")
             for s in (0, 1) for d in (1, 2, 3)]
    ex = Executor(str(tmp_path / "runs"), "lad", max_concurrent=1, lease_timeout=5, heartbeat=0.5)
    s = ex.run(steps, runtime={"log": log})
    assert s.ok, s.statuses
    order = [n for _, n in sorted((o.start, n) for n, o in s.steps.items())]
    assert order == ["r3", "r2", "r1", "r3_s1", "r2_s1", "r1_s1"]
    # without keys: largest first, spec order between equals (the twins side by side)
    plain = [dataclasses.replace(st, warm_key="", config={**st.config, "x": st.config["x"] + 10}) for st in steps]
    s2 = Executor(str(tmp_path / "runs2"), "lad", max_concurrent=1, lease_timeout=5, heartbeat=0.5).run(
        plain, runtime={"log": log})
    order2 = [n for _, n in sorted((o.start, n) for n, o in s2.steps.items())]
    assert order2 == ["r3", "r3_s1", "r2", "r2_s1", "r1", "r1_s1"]
