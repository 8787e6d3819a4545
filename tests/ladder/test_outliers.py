"""A replica far outside the seed spread of the other sizes is named, with the hero's forecast without it."""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
import pytest
from test_analysis_replicas import ALPHA, A, E
from test_analysis_replicas import _points as replica_points

from ladder.analysis.outliers import describe_outlier, outlier_reason, replica_outlier
from ladder.spec import FitSpec


def _points(log_offsets: dict[tuple[int, int], float]) -> pd.DataFrame:
    """test_analysis_replicas' five sizes, two seeds each, on its known law, each run moved by its log offset."""
    return replica_points({k: math.expm1(v) for k, v in log_offsets.items()})


# every pair 0.3-0.6% apart, as on the tiny ladder's calm sizes
CALM = {(0, 1): 0.003, (1, 1): -0.004, (2, 1): 0.005, (3, 1): -0.006, (4, 1): 0.004}


def test_a_pair_far_beyond_the_others_spread_is_flagged_and_its_odd_run_named():
    # rung_5's first seed 3.5% above the law (seed 20's rung_3 2.9%, its pair 3.3% apart): 8x the others' spread
    out = replica_outlier(_points({**CALM, (4, 0): 0.035, (4, 1): 0.0}))
    assert out["runs"] == ["rung_5", "rung_5_r1"] and out["sizes_tested"] == 5
    assert out["spread"] == pytest.approx(0.035) and out["ratio"] > 5 and out["p_family"] < 0.01
    points = _points({**CALM, (4, 0): 0.035, (4, 1): 0.0})
    fit = FitSpec(law="compute", bootstrap=0)
    hero = (1.5e5, 50 * 1.5e5, 6.5 * 1.5e5 * 50 * 1.5e5)
    from ladder.analysis.finals import fit_final_law, law_predict

    with_it = law_predict(fit_final_law(points, fit), *hero)
    full = describe_outlier(points, fit, out, hero, predicted=with_it)
    assert full["odd_run"] == "rung_5" and full["odd_from_law"] == pytest.approx(0.035, abs=0.004)
    # without the odd run the forecast moves back toward the known law's
    truth = E + A * hero[2] ** -ALPHA
    assert abs(full["hero_without"] / truth - 1) < abs(with_it / truth - 1) / 2, (full["hero_without"], with_it, truth)
    assert full["hero_with"] == with_it
    line = outlier_reason(full, ["rung_1", "rung_2", "rung_3", "rung_4", "rung_5"])
    assert "rung_5 and rung_5_r1 differ by 3.5%" in line and "rung_5 is likely a bad run" in line
    assert "--set 'rungs[4].seed=N'" in line and "--force" in line


def test_calm_replicas_and_too_few_sizes_are_not_flagged():
    out = replica_outlier(_points(CALM))
    assert out["p_family"] > 0.05  # the largest pair, 0.6%, is within the others' spread
    # a draw of normal seed noise is flagged about 1% of the time at 0.01 (Bonferroni is conservative)
    rng = np.random.default_rng(0)
    flagged = [replica_outlier(_points({(i, r): rng.normal(0, 0.007) for i in range(5) for r in (0, 1)}))["p_family"] < 0.01
               for _ in range(400)]
    assert np.mean(flagged) < 0.03
    two_sizes = _points(CALM)
    two_sizes = two_sizes[~two_sizes["name"].isin(["rung_1_r1", "rung_2_r1", "rung_3_r1"])]
    assert replica_outlier(two_sizes) is None  # the others' spread needs two replicated sizes behind it


def _gate(tmp_path, outlier: dict | None, level: float | None) -> dict:
    import json

    from ladder.analysis.gate import gate_ladder

    fit_dir, out = tmp_path / "fit", tmp_path / "gate"
    fit_dir.mkdir(parents=True)
    out.mkdir()
    backtest = {"ok": True, "relative_error": 0.001, "compute_ratio": 4.1, "decades": 0.61}
    (fit_dir / "fit.json").write_text(json.dumps({"backtest": backtest, "hero_ratio": 4.3,
                                                  "summary": {"replica_outlier": outlier}}))
    # a gate from before the field has no key: no replica check, as it ran then
    gate = {"max_backtest_error": 0.02, "max_interval_width": 0.15,
            **({"replica_outlier_level": level} if level is not None else {})}
    config = {"gate": gate, "rungs": ["rung_1", "rung_2", "rung_3", "rung_4", "rung_5"], "advisory": True}
    return gate_ladder(config, {"fit": str(fit_dir)}, str(out))


def test_the_gate_blocks_below_its_level_and_warns_above_it(tmp_path):
    from ladder.analysis.finals import fit_final_law, law_predict

    points = _points({**CALM, (4, 0): 0.035, (4, 1): 0.0})
    fit = FitSpec(law="compute", bootstrap=0)
    hero = (1.5e5, 50 * 1.5e5, 6.5 * 1.5e5 * 50 * 1.5e5)
    full = describe_outlier(points, fit, replica_outlier(points), hero, law_predict(fit_final_law(points, fit), *hero))
    def said(verdict, key):
        return [line for line in verdict[key] if "is likely a bad run" in line]

    blocked = _gate(tmp_path / "blocked", full, 0.01)  # (no prediction here: the gate's other reason, not ours)
    assert len(said(blocked, "reasons")) == 1 and "rung_5 is likely a bad run" in said(blocked, "reasons")[0]
    off = _gate(tmp_path / "off", full, 0.0)
    assert not said(off, "reasons") and len(said(off, "warnings")) == 1
    old = _gate(tmp_path / "old", full, None)
    assert not said(old, "reasons") and len(said(old, "warnings")) == 1
    verdict = _gate(tmp_path / "milder", {**full, "p_family": 0.03}, 0.01)
    assert not said(verdict, "reasons") and "p = 0.030" in said(verdict, "warnings")[0]
    # an outlier the fit did not describe (p above the describing level) says nothing
    calm = _gate(tmp_path / "calm", replica_outlier(_points(CALM)), 0.01)
    assert not said(calm, "reasons") and not said(calm, "warnings")
