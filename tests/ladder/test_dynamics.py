"""Training-dynamics envelopes (ladder.analysis.dynamics): the drop rate and the load max/mean are upper
bounds (lower is healthier), the grad norm and the router-bias norm keep both sides; a followed hero's
metric alerts follow the same sides."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ladder.analysis.dynamics import UPPER_ONLY, envelope, inside
from ladder.analysis.follow_metrics import envelope_events

SIZES = (1e3, 2e3, 4e3, 8e3)
STEPS = 40


def _frame(size: float, seed: int, scale: float = 1.0) -> pd.DataFrame:
    """One run's logged steps: every metric a power of its size times per-step scatter (the same draw
    for every metric, so their envelopes differ only by their sides)."""
    rng = np.random.default_rng(seed)
    steps = np.arange(1, STEPS + 1)
    value = scale * 0.2 * (size / 1e3) ** -0.3 * np.exp(rng.normal(0, 0.05, STEPS))
    return pd.DataFrame({"step": steps, "frac": steps / STEPS, "grad_norm": value, "drop_rate": value,
                         "expert_load_max_over_mean": 1.0 + value, "router_bias_norm": value})


def _rungs() -> list[tuple[str, float, pd.DataFrame]]:
    return [(f"rung_{i}", n, _frame(n, i)) for i, n in enumerate(SIZES)]


def test_upper_only_metrics_have_their_floor_as_lower_edge_and_a_one_sided_upper():
    rungs, hero = _rungs(), 3e4
    both = envelope(rungs, hero, "grad_norm", 0.9)
    upper = envelope(rungs, hero, "drop_rate", 0.9)
    load = envelope(rungs, hero, "expert_load_max_over_mean", 0.9)
    assert len(both) == len(upper) == 10
    assert (upper["lower"] == UPPER_ONLY["drop_rate"]).all() and (load["lower"] == 1.0).all()
    assert (both["lower"] > 0).all() and (both["lower"] < both["centre"]).all()
    # the same values: the same centre, and a one-sided 90% bound below the two-sided 90% upper edge
    assert np.allclose(upper["centre"], both["centre"])
    assert (upper["upper"] > upper["centre"]).all() and (upper["upper"] < both["upper"]).all()


def test_a_run_far_below_its_envelope_is_outside_only_for_two_sided_metrics():
    rungs, hero = _rungs(), 3e4
    low = _frame(hero, 9, scale=0.01)  # a hundredth of the rungs' line: far below every envelope
    assert not inside(low, envelope(rungs, hero, "grad_norm", 0.9), "grad_norm")["inside"].any()
    assert not inside(low, envelope(rungs, hero, "router_bias_norm", 0.9), "router_bias_norm")["inside"].any()
    assert inside(low, envelope(rungs, hero, "drop_rate", 0.9), "drop_rate")["inside"].all()
    high = _frame(hero, 9, scale=100.0)
    assert not inside(high, envelope(rungs, hero, "drop_rate", 0.9), "drop_rate")["inside"].any()


def test_followed_drop_rate_alerts_above_its_bound_never_below():
    rungs, hero = _rungs(), 3e4
    envs = {"drop_rate": envelope(rungs, hero, "drop_rate", 0.9)}
    state: dict = {}
    assert envelope_events(_frame(hero, 9, scale=0.01), envs, state) == []
    events = envelope_events(_frame(hero, 9, scale=100.0), envs, state)
    assert [(e["metric"], e["side"], e["step"]) for e in events] == [("drop_rate", "above", 1)]


def test_the_load_envelope_follows_the_excess_over_its_floor_and_never_falls_below_it():
    """The rungs' load max/mean is 1 plus a power law of size: extrapolated a millionfold out, the centre is
    that power law's excess (the log of the value itself, regressed, fell below 1 there)."""
    rungs, hero = _rungs(), 1e9
    load = envelope(rungs, hero, "expert_load_max_over_mean", 0.9)
    want = 0.2 * (hero / 1e3) ** -0.3  # the rungs' excess at the hero's size, before their per-step scatter
    assert len(load) == 10 and (load["centre"] > 1.0).all() and (load["upper"] > load["centre"]).all()
    # the per-step scatter (5%, four steps a tenth) moves each tenth's medians and so its slope: within a
    # factor 2 at 125,000 times the largest rung's size
    assert np.allclose(np.log(load["centre"] - 1.0), np.log(want), atol=np.log(2.0)), (load["centre"] - 1, want)
