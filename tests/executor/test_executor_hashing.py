"""Hashes, directories, graph checks and expand_force: no Ray needed."""

from __future__ import annotations

import exec_stepfns
import pytest
from exec_ladders import ladder_steps

from ladder.executor import Dep, Executor, Step, config_diff, expand_force


def hashes(tmp_path, steps):
    return {n: node.hash for n, node in Executor(str(tmp_path), "t").graph(steps).items()}


def test_config_changes_the_hash_and_propagates_through_data_deps(tmp_path):
    base = hashes(tmp_path, ladder_steps())
    changed = hashes(tmp_path, ladder_steps(x1=1.5))
    assert changed["rung_1"] != base["rung_1"]
    assert changed["rung_2"] == base["rung_2"]
    # fit reads rung_1 (data dep): its hash moves; so do gate and report through data deps ...
    assert changed["fit"] != base["fit"]
    assert changed["gate"] != base["gate"]
    assert changed["report"] != base["report"]
    # ... but the hero only waits for the gate (order-only): its hash stays
    assert changed["hero"] == base["hero"]


def test_cosmetic_fields_and_descriptions_do_not_change_the_hash(tmp_path):
    base = hashes(tmp_path, ladder_steps())
    assert hashes(tmp_path, ladder_steps(fit_notes="a note that changes nothing")) == base
    w = exec_stepfns.work
    a = Step("s", w, {"x": 1, "model": {"d": 4, "description": "one"}, "resources": {"cpus": 1}})
    b = Step("s", w, {"x": 1, "model": {"d": 4, "description": "two"}, "resources": {"cpus": 8}, "wandb": {}},
             description="other words", resources={"cpus": 4})
    c = Step("s", w, {"x": 1, "model": {"d": 5}})
    assert hashes(tmp_path, [a]) == hashes(tmp_path, [b])
    assert hashes(tmp_path, [a]) != hashes(tmp_path, [c])
    # key order and tuple-vs-list are not changes either
    d = Step("s", w, {"model": {"d": 4}, "x": 1, "seq": (1, 2)})
    e = Step("s", w, {"x": 1, "seq": [1, 2], "model": {"d": 4}})
    assert hashes(tmp_path, [d]) == hashes(tmp_path, [e])


def test_function_name_and_dep_kind_enter_the_hash(tmp_path):
    w, g = exec_stepfns.work, exec_stepfns.gate
    assert hashes(tmp_path, [Step("s", w, {})]) != hashes(tmp_path, [Step("s", g, {})])
    # a callable and its "module:function" string hash alike
    assert hashes(tmp_path, [Step("s", w, {})]) == hashes(tmp_path, [Step("s", "exec_stepfns:work", {})])
    up1, up2 = Step("up", w, {"x": 1}), Step("up", w, {"x": 2})
    data1 = hashes(tmp_path, [up1, Step("down", w, {}, deps=(Dep("up"),))])["down"]
    data2 = hashes(tmp_path, [up2, Step("down", w, {}, deps=(Dep("up"),))])["down"]
    order1 = hashes(tmp_path, [up1, Step("down", w, {}, deps=(Dep("up", kind="order"),))])["down"]
    order2 = hashes(tmp_path, [up2, Step("down", w, {}, deps=(Dep("up", kind="order"),))])["down"]
    assert data1 != data2
    assert order1 == order2
    assert order1 == hashes(tmp_path, [Step("down", w, {})])["down"]


def test_out_dir_is_root_ladder_step_hash12(tmp_path):
    nodes = Executor(str(tmp_path), "my_ladder").graph(ladder_steps())
    node = nodes["fit"]
    assert node.url == str(tmp_path / "my_ladder" / f"fit-{node.hash[:12]}")
    assert len(node.hash) == 64
    memory = Executor("memory://bucket/runs", "l").graph(ladder_steps())
    url = memory["fit"].url  # memory:// normalises to memory:///bucket; gs:// keeps gs://bucket
    assert url.startswith("memory://") and url.endswith(f"/bucket/runs/l/fit-{node.hash[:12]}")


def test_graph_errors_name_the_problem(tmp_path):
    w = exec_stepfns.work
    ex = Executor(str(tmp_path), "t")
    with pytest.raises(ValueError, match="duplicate step name 'a'"):
        ex.graph([Step("a", w, {}), Step("a", w, {})])
    with pytest.raises(ValueError, match=r"steps\[a\].deps: unknown step 'nope'"):
        ex.graph([Step("a", w, {}, deps=(Dep("nope"),))])
    with pytest.raises(ValueError, match="dependency cycle"):
        ex.graph([Step("a", w, {}, deps=(Dep("b"),)), Step("b", w, {}, deps=(Dep("a"),))])
    with pytest.raises(ValueError, match="kind"):
        Dep("a", kind="soft")
    with pytest.raises(TypeError, match="not JSON-able"):
        ex.graph([Step("a", w, {"x": object()})])
    with pytest.raises(ValueError, match="unknown step"):
        ex.plan(ladder_steps(), force=["rung_9"])


def test_expand_force_follows_data_dependents_only():
    steps = ladder_steps()
    assert expand_force(steps, ["rung_2"]) == {"rung_2", "fit", "gate", "report"}  # not the hero
    assert expand_force(steps, ["hero"]) == {"hero", "report"}
    assert expand_force(steps, []) == set()
    with pytest.raises(ValueError, match="unknown step"):
        expand_force(steps, ["rung_9"])


def test_config_diff_is_field_level():
    old = {"lr": 0.1, "model": {"d": 4, "L": 2}, "tags": [1, 2]}
    new = {"lr": 0.2, "model": {"d": 4, "L": 3, "moe": True}, "tags": [1, 5]}
    assert config_diff(old, new) == {"lr": [0.1, 0.2], "model.L": [2, 3], "model.moe": ["<missing>", True],
                                     "tags[1]": [2, 5]}
    assert config_diff(old, old) == {}


def test_env_overrides_lease_defaults(tmp_path, monkeypatch):
    monkeypatch.setenv("LADDER_LEASE_TIMEOUT", "3")
    monkeypatch.setenv("LADDER_HEARTBEAT", "0.5")
    ex = Executor(str(tmp_path), "t")
    assert (ex.lease_timeout, ex.heartbeat) == (3.0, 0.5)
    ex = Executor(str(tmp_path), "t", lease_timeout=10, heartbeat=2)  # explicit arguments win
    assert (ex.lease_timeout, ex.heartbeat) == (10.0, 2.0)
    with pytest.raises(ValueError, match="heartbeat"):
        Executor(str(tmp_path), "t", lease_timeout=1, heartbeat=2)
