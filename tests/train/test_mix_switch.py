"""A data-mix switch mid-run (ladder.trainers.builtin.sampling.SwitchedSampler): the draws before it are
the unswitched run's, the draws after follow the new weights, and each domain's windows carry on
through the switch (every draw number once: no window read twice within an epoch). A hero declaring
the switch trains it at its fraction, a ladder's data.switch_at replays it on every run, and a run
without one keeps its step address."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import numpy as np
import pytest

from ladder.trainers.builtin.sampling import BLOCK, Sampler, SwitchedSampler

TINY = str(Path(__file__).resolve().parents[2] / "experiments" / "tiny.py")
N_WINDOWS = [50_000, 9_000, 7_000]


def test_the_switched_draws_follow_each_mixture_and_carry_each_domains_windows_on():
    before = Sampler(7, np.array([0.5, 0.25, 0.25]), N_WINDOWS)
    after = Sampler(7, np.array([0.7, 0.3, 0.0]), N_WINDOWS)
    g0, n = 3 * BLOCK + 1234, 8 * BLOCK
    switched = SwitchedSampler(before, after, g0)
    g = np.arange(n)
    dom, k = switched.draws(g)
    d0, k0 = before.draws(g[:g0])
    assert np.array_equal(dom[:g0], d0) and np.array_equal(k[:g0], k0)  # the run up to the switch is unchanged
    # after it, whole blocks of the new mixture: its weights exactly (largest remainders), domain 2 never
    tail = dom[g0:g0 + 4 * BLOCK]
    assert [int((tail == d).sum()) for d in range(3)] == [4 * c for c in after.counts] and after.counts[2] == 0
    for d in range(3):  # each domain's draw numbers are 0, 1, 2, ... once each, across the switch
        assert np.array_equal(np.sort(k[dom == d]), np.arange(int((dom == d).sum())))
    drawn = [int((dom == d).sum()) for d in range(3)]
    assert switched.epochs(n) == pytest.approx([c / w for c, w in zip(drawn, N_WINDOWS, strict=True)], rel=1e-12)
    assert switched.epochs(g0 - 10) == before.epochs(g0 - 10)
    # one batch at a time reads the same draws (a resumed run reads the same windows)
    again = np.concatenate([switched.draws(np.arange(s, min(s + 37, n)))[1] for s in range(0, n, 37)])
    assert np.array_equal(again, k)


def test_a_hero_trains_its_declared_switch_and_a_replay_reaches_every_run():
    from ladder.dag.stages import build_steps
    from ladder.spec import RunChange, load_spec

    base = load_spec(TINY)
    mix = {"code": 0.7, "bible_web": 0.15, "bible_kjv": 0.15}
    step = round(0.28 * base.hero.steps)
    switched_hero = dataclasses.replace(base, hero=dataclasses.replace(
        base.hero, changes=(RunChange(step, "data mix", weights=mix),)))
    configs = {s.name: s.config for s in build_steps(switched_hero)}
    before = {s.name: s.config for s in build_steps(base)}
    assert configs["hero"]["data"]["switch_at"] == pytest.approx(step / base.hero.steps)
    assert configs["hero"]["data"]["switch_weights"] == mix
    assert configs["rung_1"] == before["rung_1"]  # the rungs do not switch
    replay = load_spec(TINY, ["data.switch_at=0.28", f"data.switch_weights={mix!r}"])
    assert {s.config["data"]["switch_at"] for s in build_steps(replay) if s.name.startswith(("rung_", "hero"))} == {0.28}
    # a recorded change without weights trains nothing new: the hero keeps its address
    noted = dataclasses.replace(base, hero=dataclasses.replace(base.hero, changes=(RunChange(step, "lr"),)))
    from ladder.dag.stages import plan_ladder

    paths = {e.name: e.path for e in plan_ladder(base)}
    assert {e.name: e.path for e in plan_ladder(noted)}["hero"] == paths["hero"]
    assert {e.name: e.path for e in plan_ladder(switched_hero)}["hero"] != paths["hero"]


def test_a_switch_naming_an_unknown_domain_is_one_line():
    from ladder.spec import SpecError, load_spec

    with pytest.raises(SpecError) as info:
        load_spec(TINY, ["data.switch_at=0.3", "data.switch_weights={'cod': 1.0}"])
    assert info.value.problems == ["data.switch_weights: 'cod' is not a domain of data.domains (code, bible_web, bible_kjv)"]
    with pytest.raises(SpecError, match="data.switch_at: 1.5 must be a fraction"):
        load_spec(TINY, ["data.switch_at=1.5"])


def test_tiny_switch_reuses_tinys_rungs_and_replays_its_heros_switch():
    from ladder.dag.stages import plan_ladder
    from ladder.spec import load_spec

    switch = str(Path(TINY).with_name("tiny_switch.py"))
    a, tiny, b = load_spec(switch), load_spec(TINY), load_spec(switch, variant="replay")
    paths_a, paths_tiny = ({e.name: e.path for e in plan_ladder(s)} for s in (a, tiny))
    assert all(paths_a[r.name] == paths_tiny[r.name] for r in tiny.rungs)  # A's rungs are tiny's, reused
    assert paths_a["predict"] == paths_tiny["predict"] and paths_a["hero"] != paths_tiny["hero"]
    (change,) = a.hero.changes
    assert b.name == "tiny+replay" and b.data.switch_at == pytest.approx(change.step / a.hero.steps)
    assert dict(b.data.switch_weights) == dict(change.weights)
