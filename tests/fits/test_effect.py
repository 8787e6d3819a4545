"""The effect of a change between two ladders (fits.effect, fits.effect_trend) on synthetic ladders whose
effect is known: per-size multipliers against a hand computation on the fitted law, and the verdict
rule's branches (shrinks, holds, grows, a cost, no effect). Pure numbers, no ladder, a second or two each."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from fits.compute import fit_compute, refit_compute
from fits.effect import size_effects
from fits.effect_trend import analyse, fit_trend, slope_word
from fits.errors import InputError

E, A, ALPHA = 1.0, 40.0, 0.1
BUDGETS = np.geomspace(6e10, 2.5e12, 5)  # the default ladder's rungs span about this much compute
HERO = 1.1e13


def law(c):
    return E + A * np.asarray(c, dtype=float) ** -ALPHA


def pair(multiplier, *, seeds=2, luck=0.004, pair_luck=0.001, seed=0, flops_b=None):
    """Two ladders of five sizes, `seeds` runs each: A on the law, B on the law at multiplier(C) x C,
    each run with its seed's luck (shared by the pair of one seed, plus a small paired difference)."""
    rng = np.random.default_rng(seed)
    rows_a, rows_b = [], []
    for i, c in enumerate(BUDGETS):
        cb = c if flops_b is None else flops_b(c)
        for s in range(seeds):
            shared = math.exp(rng.normal(0.0, luck))
            rows_a.append({"size": f"rung_{i + 1}", "seed": s, "flops": c, "loss": float(law(c)) * shared})
            rows_b.append({"size": f"rung_{i + 1}", "seed": s, "flops": cb,
                           "loss": float(law(cb * multiplier(cb))) * shared * math.exp(rng.normal(0.0, pair_luck))})
    return pd.DataFrame(rows_a), pd.DataFrame(rows_b)


def test_per_size_multipliers_equal_a_hand_computation_on_the_fitted_law():
    # B spends 1.5x A's compute at each size, so its multiplier is not A's ratio of losses alone
    a, b = pair(lambda c: 1.25, flops_b=lambda c: 1.5 * c, seed=3)
    eff = size_effects(a, b, n_draws=40)
    p = fit_compute(a["flops"], a["loss"]).params
    assert eff.law == pytest.approx(p, rel=1e-12)
    for row in eff.table.itertuples():
        ra, rb = a[a["size"] == row.size], b[b["size"] == row.size]
        # B's loss read against A's at that size, on A's law at A's compute (A's residual cancels)
        target = (p["E"] + p["A"] * ra["flops"].mean() ** -p["alpha"]) * math.exp(
            np.log(rb["loss"]).mean() - np.log(ra["loss"]).mean())
        c_star = (p["A"] / (target - p["E"])) ** (1 / p["alpha"])  # where A's law reaches it
        assert math.exp(row.log_multiplier) == pytest.approx(c_star / rb["flops"].mean(), rel=1e-9)
        assert row.delta == pytest.approx(rb["loss"].mean() - ra["loss"].mean(), rel=1e-12)
        assert row.pairs == 2
    # without luck the fitted law is the true one, and the multiplier the synthetic 1.25 at every size
    a, b = pair(lambda c: 1.25, flops_b=lambda c: 1.5 * c, luck=0.0, pair_luck=0.0)
    exact = size_effects(a, b, n_draws=20)
    assert np.exp(exact.table["log_multiplier"].to_numpy()) == pytest.approx([1.25] * 5, rel=1e-4)


def test_a_ladder_against_itself_is_exactly_one_at_every_size():
    a, _ = pair(lambda c: 1.0, seed=1)
    doc = analyse(a, a, hero_flops=(HERO, HERO), n_draws=40)
    assert [r["multiplier"] for r in doc["per_size"]] == pytest.approx([1.0] * 5, abs=1e-12)
    assert doc["trend"]["direction"] == "none" and doc["verdict"].startswith("B shows no effect")


def test_an_effect_that_shrinks_with_scale_is_called_shrinking():
    a, b = pair(lambda c: 1.3 * (c / 1e12) ** -0.08, seed=0)
    doc = analyse(a, b, hero_flops=(HERO, HERO), n_draws=60)
    t = doc["trend"]
    assert t["direction"] == "gain" and t["verdict"] == "shrinks" and t["upper"] < 0
    assert "shrinks with scale" in doc["verdict"]
    true_hero = 1.3 * (HERO / 1e12) ** -0.08
    hero = doc["at_hero"]
    assert hero["lower"] < true_hero < hero["upper"]
    assert hero["delta_lower"] < hero["delta"] < hero["delta_upper"] < 0
    assert set(hero) >= {"multiplier", "lower", "upper", "delta", "delta_lower", "delta_upper"}
    bt = doc["backtest"]
    assert bt["ok"] and bt["size"] == "rung_5" and bt["fit_on"] == ["rung_1", "rung_2", "rung_3", "rung_4"]
    assert bt["inside"]


def test_a_constant_effect_holds_and_is_shown_at_the_hero():
    a, b = pair(lambda c: 1.2, seed=2)
    doc = analyse(a, b, hero_flops=(HERO, HERO), n_draws=60)
    assert doc["trend"]["verdict"] == "holds" and doc["trend"]["direction"] == "gain"
    hero = doc["at_hero"]
    assert hero["shown"] == "shown" and hero["lower"] < 1.2 < hero["upper"]
    assert doc["verdict"] == f"B's gain holds at the hero: {hero['multiplier']:.2f}x [{hero['lower']:.2f}, {hero['upper']:.2f}]"
    assert doc["noise"]["mode"] == "paired"


def test_a_cost_that_grows_and_a_shrinking_gain_gone_at_the_hero():
    a, b = pair(lambda c: 0.85 * (c / 1e12) ** -0.08, seed=4)  # B worse, and more so with scale
    doc = analyse(a, b, hero_flops=(HERO, HERO), n_draws=60)
    assert doc["trend"]["direction"] == "cost" and doc["trend"]["verdict"] == "grows"
    a, b = pair(lambda c: 1.15 * (c / 6e10) ** -0.06, seed=5)  # gone by ~1e12
    doc = analyse(a, b, hero_flops=(HERO, HERO), n_draws=60)
    assert doc["verdict"].startswith("B's gain shrinks with scale and") and doc["at_hero"]["shown"] != "shown"


def test_heroes_measured_beside_the_band():
    a, b = pair(lambda c: 1.2, seed=2)
    heroes = (float(law(HERO)), HERO, float(law(HERO * 1.2)), HERO)
    doc = analyse(a, b, hero_flops=(HERO, HERO), heroes=heroes, n_draws=60)
    p = doc["law_a"]
    # B's hero loss read against A's hero, on A's fitted law at the hero's compute, as a size is
    target = (p["E"] + p["A"] * HERO ** -p["alpha"]) * heroes[2] / heroes[0]
    by_hand = (p["A"] / (target - p["E"])) ** (1 / p["alpha"]) / HERO
    assert doc["heroes"]["multiplier"] == pytest.approx(by_hand, rel=1e-9)
    assert doc["heroes"]["multiplier"] == pytest.approx(1.2, rel=0.05)  # the fitted law is near the true one
    assert doc["heroes"]["inside"] and doc["heroes"]["delta"] == pytest.approx(heroes[2] - heroes[0])


def test_unpaired_and_single_seed_ladders_take_their_noise_from_replicas_or_the_prior():
    a, b = pair(lambda c: 1.2, seed=6)
    doc = analyse(a, b.assign(seed=b["seed"] + 10), hero_flops=(HERO, HERO), n_draws=40)
    assert doc["noise"]["mode"] == "replicas" and doc["noise"]["sigma_pair"] is None
    # one seed at four sizes: two degrees of freedom about the trend, too few to measure: the prior
    a1, b1 = a[(a["seed"] == 0) & (a["size"] != "rung_3")], b[(b["seed"] == 0) & (b["size"] != "rung_3")]
    with pytest.raises(InputError, match="one run per size"):
        analyse(a1, b1, n_draws=40)
    doc = analyse(a1, b1, prior_a=0.01, prior_b=0.01, n_draws=40)
    assert doc["noise"]["mode"] == "prior" and "prior" in doc["noise"]["text"]
    assert doc["noise"]["dof"] is None and doc["trend"]["t_dof"] is None
    assert doc["at_hero"] is None and "no hero" in doc["verdict"]


# The default ladder's seven sizes at one seed each (experiments/tiny.py), and its hero.
TINY_FLOPS = np.array([2.904e10, 1.099e11, 2.303e11, 6.134e11, 1.056e12, 2.301e12, 3.531e12])
TINY_HERO = 1.678e13


def one_seed_pair(multiplier, *, seed, luck=0.007, pair_luck=0.002, sizes=TINY_FLOPS):
    """A and B at one seed a size, both trained at that seed (so paired): A on the law, B at multiplier(C) x C."""
    rng = np.random.default_rng(seed)
    rows_a, rows_b = [], []
    for i, c in enumerate(sizes):
        shared = rng.normal(0.0, luck)
        rows_a.append({"size": f"rung_{i + 1}", "seed": 0, "flops": c, "loss": float(law(c)) * math.exp(shared)})
        rows_b.append({"size": f"rung_{i + 1}", "seed": 0, "flops": c,
                       "loss": float(law(c * multiplier(c))) * math.exp(shared + rng.normal(0.0, pair_luck))})
    return pd.DataFrame(rows_a), pd.DataFrame(rows_b)


def test_one_seed_a_size_measures_the_paired_noise_on_the_sizes_scatter_about_the_trend():
    a, b = one_seed_pair(lambda c: 1.2, seed=11)
    doc = analyse(a, b, hero_flops=(TINY_HERO, TINY_HERO), n_draws=60)
    nz = doc["noise"]
    # the paired log differences' RMS about their line in log10 compute, over 7 - 2 degrees of freedom
    diff = np.log(b["loss"].to_numpy() / a["loss"].to_numpy())
    x = np.log10(b["flops"].to_numpy())
    resid = diff - np.polyval(np.polyfit(x, diff, 1), x)
    assert nz["mode"] == "paired" and nz["pair_source"] == "residuals" and nz["pair_dof"] == 5
    assert nz["sigma_pair"] == pytest.approx(math.sqrt(float(np.sum(resid ** 2)) / 5), rel=1e-12)
    # A's runs: their scatter about A's own compute law, 7 - 3 degrees of freedom
    p = doc["law_a"]
    resid_a = np.log(a["loss"].to_numpy() / (p["E"] + p["A"] * a["flops"].to_numpy() ** -p["alpha"]))
    assert nz["source_a"] == "residuals" and nz["dof_a"] == 4
    assert nz["sigma_a"] == pytest.approx(math.sqrt(float(np.sum(resid_a ** 2)) / 4), rel=1e-9)
    assert nz["sigma_b"] is None and nz["source_b"] == "paired" and "5 degrees of freedom" in nz["text"]
    # the band's quantile is Student's t at the measurement's five degrees of freedom
    assert doc["trend"]["t_dof"] == 5 and all(r["pairs"] == 1 for r in doc["per_size"])


def test_one_seed_a_size_a_constant_effect_holds_with_a_band_that_covers_it():
    a, b = one_seed_pair(lambda c: 1.2, seed=12)
    doc = analyse(a, b, hero_flops=(TINY_HERO, TINY_HERO), n_draws=60)
    hero = doc["at_hero"]
    assert doc["trend"]["verdict"] == "holds" and doc["trend"]["direction"] == "gain"
    assert hero["lower"] < 1.2 < hero["upper"] and hero["shown"] == "shown"
    assert doc["verdict"].startswith("B's gain holds at the hero")


def test_one_seed_a_size_a_shrinking_effect_shrinks():
    shrinking = lambda c: 1.3 * (c / 1e12) ** -0.08  # noqa: E731
    a, b = one_seed_pair(shrinking, seed=13)
    doc = analyse(a, b, hero_flops=(TINY_HERO, TINY_HERO), n_draws=60)
    assert doc["trend"]["verdict"] == "shrinks" and doc["trend"]["upper"] < 0
    assert "shrinks with scale" in doc["verdict"]
    assert doc["at_hero"]["lower"] < shrinking(TINY_HERO) < doc["at_hero"]["upper"]


def test_ladders_without_two_shared_sizes_are_refused_in_one_line():
    a, b = pair(lambda c: 1.2)
    with pytest.raises(InputError, match="share no size") as info:
        analyse(a, b.assign(size="other_" + b["size"]), n_draws=40)
    assert "\n" not in str(info.value)
    with pytest.raises(InputError, match="share one size"):
        analyse(a, b[b["size"] == "rung_3"], n_draws=40)


def test_the_verdict_rule_on_the_slope_interval():
    assert slope_word(0.01, 0.05, gain=True) == "grows" and slope_word(0.01, 0.05, gain=False) == "shrinks"
    assert slope_word(-0.05, -0.01, gain=True) == "shrinks" and slope_word(-0.05, -0.01, gain=False) == "grows"
    assert slope_word(-0.01, 0.01, gain=True) == "holds"


def test_the_trend_is_weighted_least_squares_with_its_redraws_covariance():
    x = np.array([0.0, 1.0, 2.0, 3.0])
    y = np.array([0.1, 0.3, 0.5, 0.7])
    rng = np.random.default_rng(0)
    draws = y + rng.normal(0.0, [0.01, 0.01, 0.02, 0.04], (500, 4))
    t = fit_trend(x, y, draws, 0.9)
    assert t["beta"][1] == pytest.approx(0.2, abs=1e-12)  # exact line: the slope whatever the weights
    w = 1 / draws.var(axis=0, ddof=1)
    assert t["centre"] == pytest.approx(float((w * x).sum() / w.sum()))
    assert t["chi2"] == pytest.approx(0.0, abs=1e-20) and t["scale"] == 1.0


def test_refit_compute_matches_a_fresh_fit_on_each_redraw():
    rng = np.random.default_rng(0)
    C = np.repeat(BUDGETS, 2)
    L = law(C) * np.exp(rng.normal(0.0, 0.004, C.size))
    base = fit_compute(C, L)
    draws = L * np.exp(rng.normal(0.0, 0.004, (12, C.size)))
    batch = refit_compute(base, C, draws)
    at = np.append(BUDGETS, HERO)
    # E is loosely pinned by five rungs (fits wander from ~0 to ~1.5 on redraws): the laws are compared
    # where they are used, at the rungs and the hero, and by their spread there
    refit = np.array([e + a * at ** -alpha for e, a, alpha in batch])
    fresh = np.array([fit_compute(C, d).model().predict(at) for d in draws])
    assert refit == pytest.approx(fresh, rel=5e-3)
    assert np.std(np.log(refit[:, -1])) == pytest.approx(np.std(np.log(fresh[:, -1])), rel=0.1)


def test_b_below_as_floor_is_capped_not_a_crash():
    a, _ = pair(lambda c: 1.0, seed=7)
    b = a.assign(loss=a["loss"] * 0.3)  # below A's fitted E at every size: A's law never gets there
    doc = analyse(a, b, hero_flops=(HERO, HERO), n_draws=20)
    assert all(r["capped"] and r["multiplier"] == pytest.approx(1e6) for r in doc["per_size"])
    assert doc["at_hero"]["multiplier"] == pytest.approx(1e6) and "1e+06x" in doc["verdict"]
