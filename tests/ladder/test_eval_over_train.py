"""The whole-curve law's map from train to eval loss: a trend of the eval/train ratio in compute."""

from __future__ import annotations

import json
import math

import numpy as np
import pandas as pd
import pytest

from ladder.analysis.curves import eval_over_train, eval_over_train_trend, ratio_at
from ladder.outputs import layout


def _runs(tmp_path, sizes: dict[str, float], ratio) -> tuple[pd.DataFrame, dict[str, str]]:
    """Rungs whose metrics end at a train loss of 2.0 and whose eval loss is 2.0 x ratio(C), two seeds a size."""
    rows, dirs = [], {}
    for size, flops in sizes.items():
        for seed, wobble in ((0, math.exp(0.002)), (1, math.exp(-0.002))):
            name = f"{size}_r{seed}"
            run = tmp_path / name
            run.mkdir()
            with open(run / layout.METRICS, "w") as f:
                for step in range(1, 101):
                    f.write(json.dumps({"step": step, "tokens": step * 128, "lr": 1e-3, "loss": 2.0}) + "\n")
            dirs[name] = str(run)
            rows.append({"name": name, "size": size, "kind": "final", "flops": flops, "loss": 2.0 * ratio(flops) * wobble})
    return pd.DataFrame(rows), dirs


def test_the_trend_recovers_a_ratio_growing_with_compute_and_carries_it_past_the_rungs(tmp_path):
    sizes = {"d16": 6e10, "d24": 2.3e11, "d32": 6.1e11, "d48": 2.5e12}
    points, dirs = _runs(tmp_path, sizes, lambda c: math.exp(0.006 * math.log(c / 1e11)))
    trend = eval_over_train_trend(points, eval_over_train(points, dirs))
    assert trend["sizes"] == 4
    assert trend["slope_per_log_flops"] == pytest.approx(0.006, abs=1e-4)
    hero = 1.1e13
    assert ratio_at(trend, hero) == pytest.approx(math.exp(0.006 * math.log(hero / 1e11)), rel=1e-4)
    # The rungs' mean ratio, what the map was before, falls short of the hero's ratio by the trend.
    mean = float(np.mean(points["loss"] / 2.0))
    assert mean < ratio_at(trend, hero) - 0.01


def test_a_flat_ratio_stays_flat_and_a_subset_of_names_fits_only_those(tmp_path):
    sizes = {"d16": 6e10, "d24": 2.3e11, "d32": 6.1e11}
    points, dirs = _runs(tmp_path, sizes, lambda c: 1.02)
    trend = eval_over_train_trend(points, eval_over_train(points, dirs))
    assert trend["slope_per_log_flops"] == pytest.approx(0.0, abs=1e-9)
    assert ratio_at(trend, 1e14) == pytest.approx(1.02, rel=1e-6)
    one = eval_over_train_trend(points, eval_over_train(points, dirs), names=["d24_r0", "d24_r1"])
    assert one["sizes"] == 1 and one["slope_per_log_flops"] == 0.0
    assert ratio_at(one, 1e14) == pytest.approx(1.02, rel=1e-6)
