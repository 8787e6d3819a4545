"""The backtest's seed-noise band: how far seed luck alone moves a backtest whose law is right, and the
gate saying when its threshold sits inside that band."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from ladder.analysis import backtest_at_ratio, fit_final_law
from ladder.analysis.backtests import backtest_noise, false_block
from ladder.analysis.gate import gate_ladder
from ladder.spec import FitSpec

E, A, ALPHA = 0.72, 119.0, 0.177  # the default ladder's law, seed 0 (16 runs)
ACTIVE = (8e3, 18e3, 32e3, 49e3, 71e3)
FIT = FitSpec(law="compute", bootstrap=0)


def _points(log_noise: np.ndarray, replicas: int = 2) -> pd.DataFrame:
    rows = []
    for i, n in enumerate(ACTIVE):
        tokens = 50 * n
        flops = 6.5 * n * tokens
        for r in range(replicas):
            rows.append({"name": f"rung_{i + 1}" + (f"_r{r}" if r else ""), "size": f"{n:.0f}x{tokens:.0f}", "kind": "final",
                         "params": n, "tokens": tokens, "flops": flops, "flops_per_token": flops / tokens,
                         "loss": (E + A * flops ** -ALPHA) * math.exp(log_noise[i * replicas + r])})
    return pd.DataFrame(rows)


def _band(points: pd.DataFrame, n: int = 64) -> tuple[dict, dict]:
    bt = backtest_at_ratio(points, FIT, ratio=4.0)
    return bt, backtest_noise(points, FIT, bt, fit_final_law(points, FIT), n=n)


def test_the_band_is_the_spread_of_backtests_of_ladders_redrawn_from_a_right_law():
    sigma = 0.008
    rng = np.random.default_rng(7)
    ladders = [_points(rng.normal(0.0, sigma, 10)) for _ in range(60)]
    errors = [math.log1p(backtest_at_ratio(p, FIT, ratio=4.0)["relative_error"]) for p in ladders]
    bt, noise = _band(ladders[0])
    assert noise["source"] == "replicas" and noise["draws"] >= 60
    # the seed sigma is the ladder's own measurement, not the one it was drawn with
    assert 0.4 * sigma < noise["sigma_run"] < 1.8 * sigma
    # 4x past three budgets fitted exactly, the luck is carried out far beyond one run's
    assert noise["sigma"] > 1.5 * sigma
    # both spreads are 60-64 draws (about 9% each); the band uses the redrawn ladder's own sigma
    empirical = float(np.std(errors, ddof=1))
    assert noise["sigma"] * sigma / noise["sigma_run"] == pytest.approx(empirical, rel=0.45)
    # five sizes of two seeds measure the sigma with 5 degrees of freedom: the band is t's 95% point (2.015)
    assert noise["dof"] == 5 and noise["quantile"] == pytest.approx(2.0150, rel=1e-4)
    assert noise["band"] == pytest.approx(math.expm1(2.0150 * noise["sigma"]), rel=1e-3)
    assert noise["within"] == (abs(math.log1p(bt["relative_error"])) <= 2.0150 * noise["sigma"])


def test_the_bands_quantile_narrows_as_replicas_measure_the_sigma_better_and_is_normal_for_a_prior():
    rng = np.random.default_rng(5)
    quantiles = {}
    for replicas in (2, 3, 5):
        bt, noise = _band(_points(rng.normal(0.0, 0.008, 5 * replicas), replicas=replicas), n=4)
        assert noise["dof"] == 5 * (replicas - 1)
        quantiles[replicas] = noise["quantile"]
        assert noise["band"] == pytest.approx(math.expm1(noise["quantile"] * noise["sigma"]), rel=1e-12)
        # the chance of a right law's miss beyond the band is the level's complement, whatever the dof
        assert false_block(noise, noise["band"]) == pytest.approx(0.10, abs=1e-9)
    assert quantiles[2] > quantiles[3] > quantiles[5] > 1.6449
    _, prior = _band(_points(rng.normal(0.0, 0.008, 5), replicas=1), n=4)
    assert prior["source"] == "prior" and prior["dof"] is None
    assert prior["quantile"] == pytest.approx(1.6449, rel=1e-4)


def test_the_band_grows_with_the_seed_spread_and_vanishes_without_it():
    base = np.random.default_rng(3).normal(0.0, 1.0, 10)
    _, quiet = _band(_points(0.002 * base), n=32)
    _, loud = _band(_points(0.01 * base), n=32)
    assert loud["sigma_run"] == pytest.approx(5 * quiet["sigma_run"], rel=1e-6)
    assert loud["sigma"] == pytest.approx(5 * quiet["sigma"], rel=0.35)
    _, none = _band(_points(np.zeros(10)), n=8)
    assert none["sigma_run"] == 0.0 and none["sigma"] < 1e-6
    assert false_block(quiet, 0.02) < false_block(loud, 0.02)


def _gate(tmp_path, backtest: dict, rule: str | None = None) -> dict:
    fit_dir, out = tmp_path / "fit", tmp_path / "gate"
    fit_dir.mkdir(parents=True)
    out.mkdir()
    (fit_dir / "fit.json").write_text(json.dumps({"backtest": backtest, "hero_ratio": 4.0, "summary": {}}))
    # a gate written before backtest_rule existed has no key: the threshold alone, as it ran then
    gate = {"max_backtest_error": 0.02, "max_interval_width": 0.15, **({"backtest_rule": rule} if rule else {})}
    config = {"gate": gate, "rungs": [], "advisory": True}
    return gate_ladder(config, {"fit": str(fit_dir)}, str(out))


def test_the_gate_says_when_its_threshold_is_inside_the_backtests_noise(tmp_path):
    rng = np.random.default_rng(11)
    bt, noise = _band(_points(rng.normal(0.0, 0.01, 10)))
    assert false_block(noise, 0.02) > 0.10
    missed = {**bt, "relative_error": -0.03, "noise": noise}
    verdict = _gate(tmp_path / "wide", missed)
    assert not verdict["passed"]
    reason = next(r for r in verdict["reasons"] if r.startswith("backtest error"))
    assert f"seed noise alone moves it {math.expm1(-math.log1p(noise['band'])):+.2%} to {noise['band']:+.2%}" in reason
    assert ("within that" in reason) == (math.log(0.97) ** 2 <= (noise["quantile"] * noise["sigma"]) ** 2)
    assert any("inside this backtest's seed noise" in w and f"{false_block(noise, 0.02):.0%}" in w
               for w in verdict["warnings"])
    # a narrow band: no warning, and without a band the reason is as before
    narrow = {**noise, "sigma": 0.002, "band": math.expm1(1.6449 * 0.002)}
    verdict = _gate(tmp_path / "narrow", {**bt, "relative_error": -0.03, "noise": narrow})
    assert not any("inside this backtest" in w for w in verdict["warnings"])
    verdict = _gate(tmp_path / "none", {**bt, "relative_error": -0.03, "noise": None})
    assert not any("seed noise" in r for r in verdict["reasons"])


def _backtest_reasons(verdict: dict) -> list[str]:
    return [r for r in verdict["reasons"] if r.startswith("backtest error")]


def test_the_noise_rule_passes_a_miss_inside_its_measured_band_and_blocks_one_beyond_it(tmp_path):
    rng = np.random.default_rng(11)
    bt, noise = _band(_points(rng.normal(0.0, 0.01, 10)))
    inside = math.expm1(-0.8 * math.log1p(noise["band"]))  # a miss of 0.8 bands, beyond the 2% threshold
    assert abs(inside) > 0.02
    within = {**noise, "within": True}
    verdict = _gate(tmp_path / "inside", {**bt, "relative_error": inside, "noise": within}, "noise")
    assert _backtest_reasons(verdict) == []
    assert any("within its seed-noise band" in w and "backtest_rule='threshold'" in w for w in verdict["warnings"])
    assert not any("inside this backtest's seed noise" in w for w in verdict["warnings"])
    # the same miss under the threshold rule, or with no key (an old gate), blocks as before
    for rule, where in (("threshold", "thr"), (None, "old")):
        verdict = _gate(tmp_path / where, {**bt, "relative_error": inside, "noise": within}, rule)
        assert len(_backtest_reasons(verdict)) == 1 and "(within that)" in _backtest_reasons(verdict)[0]
        assert not any("within its seed-noise band" in w for w in verdict["warnings"])
    # beyond the band the noise rule blocks, and says so
    beyond = math.expm1(-1.3 * math.log1p(noise["band"]))
    verdict = _gate(tmp_path / "beyond", {**bt, "relative_error": beyond, "noise": {**noise, "within": False}}, "noise")
    assert len(_backtest_reasons(verdict)) == 1 and "(beyond that)" in _backtest_reasons(verdict)[0]
    # a band from the prior (one seed per size) is not a measurement: the threshold decides
    prior = {**within, "source": "prior"}
    verdict = _gate(tmp_path / "prior", {**bt, "relative_error": inside, "noise": prior}, "noise")
    assert len(_backtest_reasons(verdict)) == 1
    # inside the threshold nothing is said under either rule
    verdict = _gate(tmp_path / "small", {**bt, "relative_error": 0.015, "noise": within}, "noise")
    assert _backtest_reasons(verdict) == [] and not any("seed-noise band" in w for w in verdict["warnings"])
