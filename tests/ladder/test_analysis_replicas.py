"""Replicas (the same size on other seeds): the backtest predicts a size's mean from sizes far enough
below it, and the bootstrap resamples sizes, never splitting a size's seeds."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest

from ladder.analysis import backtest_at_ratio, bootstrap_fits, fit_final_law, min_rungs, n_sizes
from ladder.spec import FitSpec

E, A, ALPHA = 0.7, 190.0, 0.19


def _points(noise: dict[tuple[int, int], float]) -> pd.DataFrame:
    rows = []
    for i, n in enumerate((8e3, 18e3, 32e3, 49e3, 71e3)):
        tokens = 50 * n
        flops = 6.5 * n * tokens
        for replica in (0, 1):
            loss = (E + A * flops ** -ALPHA) * (1 + noise.get((i, replica), 0.0))
            rows.append({"name": f"rung_{i + 1}" + (f"_r{replica}" if replica else ""), "size": f"{n:.0f}x{tokens:.0f}",
                         "kind": "final", "params": n, "tokens": tokens, "flops": flops, "loss": loss,
                         "flops_per_token": flops / tokens})
    return pd.DataFrame(rows)


def test_backtest_predicts_the_mean_of_the_largest_size_from_sizes_far_below():
    # Opposite errors on the two seeds of the largest size: their mean is the law's value.
    points = _points({(4, 0): 0.03, (4, 1): -0.03})
    fit = FitSpec(law="compute", bootstrap=0)
    bt = backtest_at_ratio(points, fit, ratio=4.0)
    assert bt["ok"]
    assert sorted(bt["predict_runs"]) == ["rung_5", "rung_5_r1"]
    assert bt["actual"] == pytest.approx(np.mean(bt["actual_runs"]))
    assert not set(bt["fit_on"]) & set(bt["predict_runs"])
    # rung_4 is only 1.9x below rung_5: too close for a 4x backtest
    assert {n.split("_r")[0] for n in bt["fit_on"]} == {"rung_1", "rung_2", "rung_3"}
    assert len(bt["fit_on"]) == 6
    assert abs(bt["relative_error"]) < 0.005, bt
    # three budgets for three free parameters: the backtest's law interpolates them, and says so
    assert bt["underdetermined"].startswith("3 compute budgets for 3 free parameters")
    assert backtest_at_ratio(points, FitSpec(law="compute", bootstrap=0, pin_E=0.5), ratio=4.0)["underdetermined"] is None
    # one seed alone would have missed by the noise
    single = backtest_at_ratio(points[~points["name"].str.endswith("_r1")], fit, ratio=4.0)
    assert single["relative_error"] < -0.02


def test_bootstrap_resamples_sizes_not_seeds():
    # Each size's two seeds straddle the law by +-3%: a resample of whole sizes always sees their
    # mean, so with E pinned every resample recovers the exponent; resampling single runs would not.
    points = _points({(i, r): (0.03 if r else -0.03) for i in range(5) for r in (0, 1)})
    fit = FitSpec(law="compute", bootstrap=0, pin_E=E)
    assert n_sizes(points) == 5
    base = fit_final_law(points, fit)
    assert base.params["alpha"] == pytest.approx(ALPHA, rel=0.01)
    samples = bootstrap_fits(points, fit, base, n=30, seed=1)
    assert len(samples) >= 20
    assert np.ptp([s["alpha"] for s in samples]) < 0.01 * ALPHA


def test_a_compute_refit_depends_on_the_multiset_of_sizes_alone():
    # What lets bootstrap_fits reuse a repeated multiset's refit: the same sizes drawn in another order
    # fit to the same bits, and so does the bootstrap with its reuse against one refit per resample.
    rng = np.random.default_rng(3)
    points = _points({(i, r): float(rng.normal(0, 0.01)) for i in range(5) for r in (0, 1)})
    fit = FitSpec(law="compute", bootstrap=0)
    by_size = {size: group for size, group in points.groupby("size", sort=False)}
    sizes = list(by_size)
    picks = [[sizes[0], sizes[2], sizes[0], sizes[4], sizes[3]], [sizes[4], sizes[0], sizes[3], sizes[0], sizes[2]],
             [sizes[3], sizes[0], sizes[0], sizes[2], sizes[4]]]
    fitted = [fit_final_law(pd.concat([by_size[p] for p in pick], ignore_index=True), fit, n_polish=1).params
              for pick in picks]
    assert fitted[0] == fitted[1] == fitted[2]
    base = fit_final_law(points, fit)
    reused = bootstrap_fits(points, fit, base, n=24, seed=2)
    gen = np.random.default_rng(2)
    refit = []
    for _ in range(24):
        pick = gen.choice(sizes, size=len(sizes), replace=True)
        if len(set(pick)) >= min_rungs(fit):
            refit.append(fit_final_law(pd.concat([by_size[p] for p in pick], ignore_index=True), fit, n_polish=1).params)
    assert reused == refit and len({tuple(sorted(s.items())) for s in reused}) < len(reused)


def test_seed_spread_is_the_noise_floor_of_sizes_with_replicas():
    from ladder.analysis import seed_spread

    points = _points({(0, 1): 0.02, (3, 1): 0.004})
    spread = seed_spread(points)
    assert spread["sizes"] == 5
    assert spread["max"] == pytest.approx(0.02 / 1.01, rel=1e-6)
    assert spread["median"] == pytest.approx(0.0)
    assert seed_spread(points[~points["name"].str.endswith("_r1")]) is None


def test_the_prior_seed_spread_is_the_olmo_reruns_measured():
    # The large-scale end of the prior (ladder/analysis/seeds.py) recomputed from the reference files:
    # each OLMo 1xC run against its rerun, final mean cross-entropy over the evals.
    from fits.reference import data_dir
    from ladder.analysis.seeds import PRIOR_POINTS

    diffs = []
    for size in ("190M", "370M", "760M", "1B", "3B"):
        runs = [pd.read_csv(data_dir() / "olmo_ladder" / f"{size}-1xC{tail}.csv") for tail in ("", "-rerun")]
        finals = [r[[c for c in r.columns if c.startswith("eval/") and "CrossEntropy" in c]].iloc[-1].mean() for r in runs]
        diffs.append(np.log(finals[0] / finals[1]))
    sigma = float(np.sqrt(np.mean(np.square(diffs)) / 2))
    assert sigma == pytest.approx(PRIOR_POINTS[1][1], rel=0.15)


def test_seed_noise_is_measured_on_replicas_else_a_stated_prior():
    from ladder.analysis.seeds import prior_sigma, seed_noise

    points = _points({(i, 1): 0.02 for i in range(5)})
    measured = seed_noise(points)
    # each size's pair differs by 2% in loss: pooled sigma of one run = |log 1.02| / sqrt 2
    assert measured["source"] == "replicas" and measured["replicated_sizes"] == 5
    assert measured["sigma"] == pytest.approx(np.log(1.02) / np.sqrt(2), rel=1e-6)
    single = seed_noise(points[~points["name"].str.endswith("_r1")])
    assert single["source"] == "prior" and "one seed per size" in single["text"]
    assert single["sigma"] == pytest.approx(prior_sigma(float(points["tokens"].max())))
    # the prior falls from tiny ladders to large ones, and is clamped outside its measurements
    assert prior_sigma(1e3) == prior_sigma(3.3e5) > prior_sigma(1e7) > prior_sigma(3.8e9) == prior_sigma(1e12)


def test_seed_noise_carried_through_the_fit_grows_with_extrapolation():
    from ladder.analysis.intervals import prediction_interval
    from ladder.analysis.seeds import propagate_final

    points = _points({})
    points = points[~points["name"].str.endswith("_r1")]
    fit = FitSpec(law="compute", bootstrap=0)
    base = fit_final_law(points, fit)
    c = float(points["flops"].max())
    near, far = propagate_final(points, fit, base, [(0, 0, c), (0, 0, 1000 * c)], sigma=0.01, n=24)
    assert 0.001 < near < far  # a few percent of luck on each rung moves a far extrapolation more
    lo0, hi0, _ = prediction_interval(2.0, np.empty(0), {"ok": False}, 3.0, 0.9)
    lo, hi, info = prediction_interval(2.0, np.empty(0), {"ok": False}, 3.0, 0.9,
                                       {"sigma": 0.01, "sigma_fit": float(far), "source": "prior"})
    assert lo0 == hi0 == 2.0 and lo < 2.0 < hi
    assert info["sigma_seed"] == 0.01 and info["seed_source"] == "prior" and "seed" in info["method"]


def test_an_exactly_determined_law_says_what_it_cannot_pin():
    from ladder.analysis.finals import exactly_determined

    points = _points({})
    three = points[points["name"].isin(["rung_1", "rung_2", "rung_3"])]
    text = exactly_determined(three, FitSpec(law="compute"))
    assert text and "3 free parameters" in text and "alpha" in text and "pin E" in text
    assert exactly_determined(three, FitSpec(law="compute", pin_E=0.7)) is None
    assert exactly_determined(points[~points["name"].str.endswith("_r1")], FitSpec(law="compute")) is None


def test_the_gate_says_one_seed_per_size_and_can_require_replicas():
    from ladder.analysis.gate import _seed_warnings

    doc = {"summary": {"seed_noise": {"sigma": 0.034, "source": "prior"}}}
    reasons: list[str] = []
    warnings, seeds = _seed_warnings(doc, None, {}, reasons)
    assert not reasons and len(warnings) == 1 and "one seed per size" in warnings[0] and "not acknowledged" in warnings[0]
    assert seeds["acknowledged"] is False
    warnings, seeds = _seed_warnings(doc, None, {"accept_single_seed": True}, reasons)
    assert "accepted" in warnings[0] and seeds["acknowledged"]
    warnings, _ = _seed_warnings(doc, None, {"require_replicas": True}, reasons)
    assert not warnings and len(reasons) == 1 and "requires replicas" in reasons[0]
    measured = {"summary": {"seed_noise": {"sigma": 0.01, "source": "replicas"}}}
    assert _seed_warnings(measured, None, {}, [])[0] == []


def test_with_replicas_the_interval_carries_the_backtests_miss_beyond_its_noise_and_not_the_bootstrap_twice():
    from ladder.analysis.intervals import prediction_interval

    boot = 2.0 * np.exp(np.random.default_rng(3).normal(0.0, 0.03, 200))
    noise = {"sigma": 0.02, "source": "replicas"}
    within = {"ok": True, "relative_error": -0.015, "decades": 0.6, "noise": noise}
    seed = {"sigma": 0.005, "sigma_fit": 0.012, "source": "replicas", "sigma_residual": 0.01}
    lo, hi, info = prediction_interval(2.0, boot, within, 0.6, 0.9, seed)
    # a miss inside its seed noise leaves the floor; the bootstrap is reported and not summed
    assert info["sigma_extrapolation"] == pytest.approx(0.005) and not info["bootstrap_in_sum"]
    assert info["sigma_bootstrap"] == pytest.approx(0.03, rel=0.2)
    assert math.log(hi / 2.0) == pytest.approx(info["z"] * math.sqrt(0.005 ** 2 + 0.005 ** 2 + 0.012 ** 2), rel=1e-9)
    # beyond its noise the excess is carried: sqrt(e^2 - s^2), scaled by distance
    beyond = {**within, "relative_error": math.expm1(-0.05)}
    _, _, info = prediction_interval(2.0, boot, beyond, 1.2, 0.9, seed)
    assert info["sigma_extrapolation"] == pytest.approx(math.sqrt(0.05 ** 2 - 0.02 ** 2) * 2.0, rel=1e-9)
    # with the spread a prior the band is a guess: the whole miss and the bootstrap, as before
    prior = {**seed, "source": "prior"}
    _, hi_prior, info = prediction_interval(2.0, boot, within, 0.6, 0.9, prior)
    assert info["bootstrap_in_sum"] and info["sigma_extrapolation"] == pytest.approx(abs(math.log(0.985)))
    assert hi_prior > hi


def test_the_residual_sigma_reads_the_sizes_scatter_about_the_law():
    from ladder.analysis.seeds import residual_sigma

    points = _points({})
    fit = FitSpec(law="compute", bootstrap=0)
    base = fit_final_law(points, fit)
    calm = residual_sigma(points, base)
    shaken = points.copy()
    first = shaken["name"].isin(["rung_2", "rung_2_r1"])
    shaken.loc[first, "loss"] *= 1.03  # one size's both seeds 3% high: the law cannot follow it
    assert residual_sigma(shaken, fit_final_law(shaken, fit)) > max(calm, 0.005)


def test_the_two_laws_disagreement_widens_the_interval_in_proportion_to_distance():
    """Where the whole-curve law and the final-loss law part at the hero, the rungs cannot say which
    is right: the interval carries their log ratio there, less of it nearer the rungs, none inside."""
    from ladder.analysis.intervals import model_sigma, prediction_interval, target_intervals
    from ladder.analysis.seeds import seed_noise

    boot = np.empty(0)
    backtest = {"ok": True, "relative_error": -0.004, "decades": 0.6, "noise": {"sigma": 0.02}}
    seed = {"sigma": 0.006, "sigma_fit": 0.012, "source": "replicas"}
    _, hi0, info0 = prediction_interval(2.0, boot, backtest, 0.63, 0.9, seed)
    _, hi, info = prediction_interval(2.0, boot, backtest, 0.63, 0.9, seed, model=0.02)
    base = math.log(hi0 / 2.0) / info0["z"]
    assert math.log(hi / 2.0) == pytest.approx(info["z"] * math.sqrt(base ** 2 + 0.02 ** 2), rel=1e-9)
    assert info["sigma_model"] == 0.02 and info0["sigma_model"] == 0.0 and "disagreement" in info["method"]
    assert model_sigma(1.30, None, 0.63) is None
    d = model_sigma(1.30, 1.30 * 1.02, 0.63)
    assert d == {"log_ratio": pytest.approx(math.log(1.02)), "decades": 0.63}

    points = _points({(i, 1): 0.01 * (-1) ** i for i in range(5)})
    fit = FitSpec(law="compute", bootstrap=0)
    result = fit_final_law(points, fit)
    largest = float(points["flops"].max())
    targets = [(1e5, 5e6, largest * 10 ** dec) for dec in (-0.5, 0.315, 0.63)]
    seeds = seed_noise(points)
    plain = target_intervals(points, fit, result, backtest, targets, boot, seeds, 0.9)
    wide = target_intervals(points, fit, result, backtest, targets, boot, seeds, 0.9, d)
    models = [info["sigma_model"] for *_, info in wide]
    assert models == pytest.approx([0.0, math.log(1.02) / 2, math.log(1.02)])
    assert wide[0][1:3] == plain[0][1:3]  # inside the rungs nothing changes
    assert wide[2][2] > plain[2][2] and wide[2][1] < plain[2][1] and wide[2][0] == plain[2][0]
    # fit.disagreement "report": the same distance is named beside the band and leaves it as without a curve law.
    beside = target_intervals(points, fit, result, backtest, targets, boot, seeds, 0.9, {**d, "in_band": False})
    assert [b[:3] for b in beside] == [p[:3] for p in plain]
    assert "2.0% at the hero" in beside[2][3]["method"] and "not in it" in beside[2][3]["method"]
    assert "not in it" not in beside[0][3]["method"]  # inside the rungs there is nothing to set aside
