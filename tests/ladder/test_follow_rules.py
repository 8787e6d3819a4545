"""`ladder follow`'s rules on their own, no ladder: stitching restarts, point and stall alerts, the forecast's
move, the horizon profile of the band, and the training-metric envelopes and spikes across restarts."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest


def test_stitch_and_alert_rules():
    from ladder.analysis import follow_alerts
    from ladder.analysis.follow_bands import horizon_profile, profile_sigma
    from ladder.analysis.follow_source import Source, stitch

    a = pd.DataFrame({"step": [1, 2, 3, 4], "tokens": [1, 2, 3, 4], "loss": [4.0, 3.0, 2.9, 2.8]})
    b = pd.DataFrame({"step": [3, 5], "tokens": [3, 5], "loss": [2.5, 2.4]})
    assert stitch([a, b])["loss"].tolist() == [4.0, 3.0, 2.5, 2.4]
    assert Source("wandb", "e/p/r1,r2").runs == ["e/p/r1", "e/p/r2"]
    curve = pd.DataFrame({"step": [0, 10], "loss": [2.0, 2.0], "lower": [1.9, 1.9], "upper": [2.1, 2.1]})
    state: dict = {}
    pts = pd.DataFrame({"step": [1, 2, 3, 4, 5, 6], "tokens": [0] * 6, "loss": [2.2, 2.3, 2.0, 1.8, 1.7, 2.2]})
    ev = follow_alerts.score_points(pts, curve, state, None)
    assert [(e["step"], e["side"]) for e in ev] == [(1, "above"), (4, "below"), (6, "above")]
    assert [len(follow_alerts.stall(state, False, 3, 6)) for _ in range(5)] == [0, 0, 1, 0, 0]
    assert follow_alerts.stall(state, True, 3, 7) == [] and state["stall_polls"] == 0
    s1 = {"at_step": 1, "predicted_final": 2.0, "lower": 1.94, "upper": 2.06}
    assert follow_alerts.forecast_move(s1, state, None) == []
    assert follow_alerts.forecast_move({**s1, "predicted_final": 2.009}, state, None) == []  # < a third of 3%
    moved = follow_alerts.forecast_move({**s1, "predicted_final": 2.03}, state, None)
    assert len(moved) == 1 and moved[0]["relative_move"] == pytest.approx(0.015)
    prof = horizon_profile(np.array([0.04, 0.04, 0.04, 0.3, 0.3, 0.3]), np.array([0.02, 0.02, 0.02, 0.01, 0.01, 0.01]))
    sig = profile_sigma(prof, np.array([0.01, 0.3, 0.35, 0.7]))
    assert sig[0] == pytest.approx(0.02) and sig[1] == pytest.approx(0.02)  # never narrower further ahead
    assert sig[3] == pytest.approx(0.02 * 0.7 / 0.35)  # past the last bin: in proportion to the horizon
    assert math.isfinite(sig.sum())


def test_metric_envelope_and_spike_alerts_once_and_across_restarts():
    from ladder.analysis.follow_metrics import envelope_events, metric_rows, spike_events

    env = pd.DataFrame({"frac_lo": [0.0, 0.5], "frac_hi": [0.5, 1.0], "centre": [1.0, 0.8], "lower": [0.5, 0.4],
                        "upper": [2.0, 1.6], "rungs": [4, 4]})
    grad = [1.0] * 30 + [3.0, 3.0, 1.0, 0.3, 1.0] + [1.0] * 10
    records = [{"_step": 10 * (i + 1), "grad_norm": g, "train/loss": 3.0 - 0.01 * i} for i, g in enumerate(grad)]
    rows = metric_rows(records, 500)
    assert list(rows.columns[:3]) == ["step", "frac", "grad_norm"] and "loss" in rows
    state: dict = {}
    first, second = rows.iloc[:20], rows.iloc[20:]
    ev = envelope_events(first, {"grad_norm": env}, state) + envelope_events(second, {"grad_norm": env}, state)
    assert [(e["step"], e["side"]) for e in ev] == [(310, "above"), (340, "below")]  # two excursions, one alert each
    spikes = spike_events(first, state)
    json.dumps(state)  # the detector's history is carried in the (JSON) follow state
    spikes += spike_events(second, state)
    assert [(e["metric"], e["step"]) for e in spikes] == [("grad_norm", 310)]  # the second 3.0 is in the history now
    # a long eval export has no training metrics: its `loss` is the eval metric
    assert metric_rows([{"step": 1, "metric": "eval/x", "loss": 2.0}], 100).empty
