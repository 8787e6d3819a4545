"""The IsoFLOP stage end to end: experiments/smoke_isoflop.py on real Ray, real JAX, real files.

One session fixture plans the ladder (before the sweep: sizes pending), submits it, plans it again
and reads `ladder report --json`; the tests below check what it found. Placement itself (a pure
function of the spec and the sweep's isoflop.json) and bad input are checked without training.
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from ladder.cli.main import main
from ladder.spec import load_spec

REPO = Path(__file__).resolve().parents[2]
SPEC = str(REPO / "experiments" / "smoke_isoflop.py")


@pytest.fixture(scope="session")
def isoflop_run(shared_ladder_outcome) -> dict:
    """Planned, submitted, planned again and reported once per session (tests/shared_ladders.py)."""
    from shared_ladders import build_isoflop

    # LADDER_ISOFLOP_ROOT reuses a finished run (local iteration): its "before" plan is then not before.
    reused = os.environ.get("LADDER_ISOFLOP_ROOT")
    run = build_isoflop(reused) if reused else shared_ladder_outcome("isoflop")
    return {**run, "fresh": not reused, "spec": dataclasses.replace(load_spec(SPEC), root=run["root"])}


def _steps(plan: dict) -> dict:
    return {s["step"]: s for s in plan["steps"]}


@pytest.mark.slow
def test_plan_says_size_from_isoflop_until_the_sweep_has_run(isoflop_run):
    before, after = _steps(isoflop_run["before"]), _steps(isoflop_run["after"])
    for name in ("rung_1", "rung_2", "rung_3", "rung_4", "hero"):
        assert "size from isoflop" not in after[name]["reason"]
        if isoflop_run["fresh"]:
            assert "size from isoflop" in before[name]["reason"], before[name]
    assert all(s["action"] == "skip" for s in after.values()), {k: s["reason"] for k, s in after.items()}
    if isoflop_run["fresh"]:  # placed runs moved to the hashes of their placed configs
        assert before["hero"]["hash"] != after["hero"]["hash"]


@pytest.mark.slow
def test_report_has_the_frontier_with_intervals(isoflop_run):
    iso = isoflop_run["report"]["isoflop"]
    budgets = iso["budgets"]
    assert len(budgets) == 2
    flops = [b["flops"] for b in budgets]
    assert flops == sorted(flops)
    assert [b["n_opt"] for b in budgets] == sorted(b["n_opt"] for b in budgets)  # N_opt grows with C
    for b in budgets:
        assert set(b) >= {"flops", "n_opt", "d_opt", "loss_opt"}
        assert b["d_opt"] * b["n_opt"] * 6 == pytest.approx(b["flops"], rel=1e-9)
        # As trained, a model this small spends more than 6N FLOPs per token: fewer tokens than C / 6N.
        assert b["trained_tokens_per_param"] == pytest.approx(b["tokens_opt"] / b["n_opt"])
        assert b["tokens_opt"] < b["d_opt"]
        assert 0 < b["loss_opt"] < math.log(256)  # below a uniform byte model
        for k in ("n_opt", "loss_opt"):
            lo, hi = b[f"{k}_lower"], b[f"{k}_upper"]
            assert lo is not None and hi is not None, iso["interval"]
            assert lo <= b[k] <= hi, (k, b)
    fit = iso["fit"]
    for k in ("a", "b"):
        p = fit[k]
        assert p["lower"] <= p["value"] <= p["upper"], (k, p)
    # a + b = 1: N_opt D_opt = C / 6 at every budget
    assert fit["a"]["value"] + fit["b"]["value"] == pytest.approx(1.0, abs=1e-9)
    assert fit["a"]["value"] > 0


@pytest.mark.slow
def test_rungs_and_hero_are_placed_from_the_fit(isoflop_run):
    from ladder.dag import isoflop, isoflop_place

    spec, rep = isoflop_run["spec"], isoflop_run["report"]
    doc = isoflop.read_doc(spec)
    assert doc is not None
    placed, reused = isoflop_place.place(spec, doc)
    best = {b["flops"]: b["best_run"] for b in rep["isoflop"]["budgets"]}
    # The rungs at the sweep's budgets are its best runs, copied: the same losses, no second training.
    assert reused == {"rung_3": best[4.5e10], "rung_4": best[9e10]}
    rungs = {r["name"]: r for r in rep["rungs"]}
    dirs = {name: Path(s["path"]) for name, s in _steps(isoflop_run["after"]).items()}
    for rung, sweep_run in reused.items():
        src = json.loads((dirs[sweep_run] / "result.json").read_text())
        assert rungs[rung]["final_eval_loss"] == src["final_eval_loss"]
    # Runs placed by the law: the family's model nearest N_opt(C), on tokens that spend C.
    for run in (placed.rung("rung_1"), placed.rung("rung_2"), placed.hero):
        target = isoflop_place.n_opt(doc, run.budget)
        gaps = [abs(math.log(m.params_active / target)) for m in spec.isoflop.family]
        assert abs(math.log(run.model.params_active / target)) == min(gaps)
        assert run.flops == pytest.approx(run.budget, rel=0.01)
        recorded = json.loads((dirs[run.name] / "step.json").read_text())["config"]["rung"]
        assert recorded["model"]["d_model"] == run.model.d_model and recorded["tokens"] == run.tokens
        assert recorded["placement"].startswith("isoflop: N_opt")


@pytest.mark.slow
def test_a_changed_frontier_places_the_runs_again(isoflop_run):
    """What rerunning a sweep run does to its dependents: the placement follows the new isoflop.json."""
    from ladder.dag import isoflop, isoflop_place, stages

    spec = isoflop_run["spec"]
    doc = isoflop.read_doc(spec)
    hero = isoflop_place.place(spec, doc)[0].hero
    bigger = json.loads(json.dumps(doc))
    bigger["fit"]["N0"]["value"] *= 8.0
    moved = isoflop_place.place(spec, bigger)[0].hero
    assert moved.model.params_active > hero.model.params_active
    assert moved.flops == pytest.approx(spec.hero.budget, rel=0.01)
    # The plan of the spec as it stands finds the placed hero done (its config is what was hashed).
    assert {e.name: e.action for e in stages.plan_ladder(spec)}["hero"] == "skip"


BAD = [
    (["isoflop.budgets=()"], "isoflop.budgets:"),
    (["isoflop.budgets[0].sizes=()"], "isoflop.budgets[0].sizes: no sizes"),
    (["isoflop.budgets[0].sizes=(8, 20, 24)"], "isoflop.budgets[0].sizes: d_model 20 not in isoflop.family"),
    (["isoflop.budgets[1].guess=20"], "isoflop.budgets[1].guess: d_model 20 not in isoflop.family"),
    (["isoflop.budgets[0].sizes=(8, 16)"], "isoflop.budgets[0].sizes: 2 distinct sizes"),
    (["isoflop.min_runs=2"], "isoflop.min_runs:"),
    (["isoflop=None"], "rungs[0].budget (and rungs[1], rungs[2], rungs[3], hero): declared by budget but the ladder has no isoflop"),
    (["hero.budget=-1"], "hero.budget:"),
]


@pytest.mark.parametrize("overrides,expected", BAD, ids=[b[1].split(":")[0] for b in BAD])
def test_bad_isoflop_input_is_one_line_and_exit_2(tmp_path, overrides, expected):
    args = ["plan", SPEC, "--root", str(tmp_path)]
    for o in overrides:
        args += ["--set", o]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and lines[0].startswith(f"error: {expected}"), result.output
    assert "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []  # nothing written


def test_an_lr_sweep_of_an_unplaced_budget_rung_is_one_line_and_exit_2(tmp_path):
    """Before the IsoFLOP sweep has run, a budget rung has no size, so no LR to multiply."""
    result = CliRunner().invoke(main, ["sweep", SPEC, "--rungs", "rung_1", "--dry-run", "--root", str(tmp_path)])
    assert result.exit_code == 2, result.output
    lines = [ln for ln in result.output.splitlines() if ln.strip()]
    assert len(lines) == 1 and "rung_1 is declared by budget" in lines[0], result.output
    assert "Traceback" not in result.output
    assert list(tmp_path.iterdir()) == []  # nothing written


@pytest.mark.slow
def test_an_lr_sweep_of_a_placed_budget_rung_multiplies_its_placed_lr(isoflop_run):
    from ladder.dag import isoflop
    from ladder.dag import sweep as sweep_lib

    spec = isoflop_run["spec"]
    placed, _ = isoflop.placed(spec)
    lr = placed.rung("rung_1").optim.lr
    assert isinstance(lr, float)
    result = CliRunner().invoke(main, ["sweep", SPEC, "--rungs", "rung_1", "--lr", "0.5,2", "--dry-run", "--json",
                                       "--root", isoflop_run["root"]])
    assert result.exit_code == 0, result.output
    names = [s["step"] for s in json.loads(result.output)["steps"]]
    assert names == ["rung_1-lr0.5", "rung_1-lr2", "sweep"], names
    runs = sweep_lib.sweep_runs(placed, ["rung_1"], [0.5, 2.0])
    assert [run.optim.lr for run, _ in runs] == [lr * 0.5, lr * 2.0]
    assert {run.model.d_model for run, _ in runs} == {placed.rung("rung_1").model.d_model}
