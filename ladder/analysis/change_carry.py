"""The pure part of carrying a hero's mid-run data-mix switch by its replayed rungs' effect
(ladder.analysis.change_effect measures it): whether a ladder replays a switch, the effect declared for a
change, and the forecast past the switch carried by it. No ladder is read here, so the live forecast
(ladder.analysis.follow_forecast) and `ladder compare` (ladder.analysis.effect) use it without importing either.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

REL_TOL = 0.02  # a replay's switch fraction may differ from the hero's by its step rounding


def replays(spec_b, change, hero_steps: int) -> bool:
    """Whether every run of ladder `spec_b` switches its mixture as `change` does, at the same fraction."""
    data = spec_b.data
    return bool(change.weights) and data.switch_at > 0 and dict(data.switch_weights) == dict(change.weights) \
        and math.isclose(data.switch_at, change.step / hero_steps, rel_tol=REL_TOL)


def effect_at(effects: tuple[dict, ...], step: int) -> dict | None:
    """The measured effect carried past the change at `step`, or None (none measured: the band widens)."""
    return next((e for e in effects if e["step"] == step and e.get("ok")), None)


# The share of the final's effect carried at each fraction is read off the replayed rungs' eval curves only
# where their mean final log ratio stands this many of its own standard errors clear of zero: a ratio of two
# noisy near-zero numbers says nothing of the shape.
SHAPE_MIN_T = 3.0
SHAPE_MAX = 2.0  # a transient overshoot is carried, a wild one is not


def ramp_shape(pairs: pd.DataFrame, at: float) -> list[list[float]] | None:
    """The effect's share of its final value along the run, [[frac, share], ...] from the switch (share 0) to
    the end (share 1), from the replayed rungs' eval points against the baseline's at the same steps
    (pairs: run, frac, log_ratio = log(L_B / L_A)): the mean over sizes at each eval fraction past the
    switch over the mean at the final eval. None where the rungs have no such points past the switch, or
    their final effect is not clear of its scatter (then the share grows in proportion to the run past it)."""
    if pairs.empty:
        return None
    snap = np.round(pairs["frac"].to_numpy(float) * 20) / 20  # the rungs' evals at the same fractions of their runs
    means = pairs.assign(snap=snap).groupby("snap")["log_ratio"].agg(["mean", "std", "count"])
    past = means[means.index > at + 1e-9]
    if past.empty or not math.isclose(float(past.index.max()), 1.0, abs_tol=0.026):
        return None
    final = past.iloc[-1]
    if final["count"] < 3 or not np.isfinite(final["std"]) or \
            abs(final["mean"]) < SHAPE_MIN_T * final["std"] / math.sqrt(final["count"]):
        return None
    share = np.clip(past["mean"].to_numpy(float) / final["mean"], 0.0, SHAPE_MAX)
    share[-1] = 1.0
    return [[float(at), 0.0]] + [[float(f), float(v)] for f, v in zip(past.index[:-1], share[:-1], strict=True)] + [[1.0, 1.0]]


def carry(fracs: np.ndarray, central: np.ndarray, sigma: np.ndarray, effect: dict) -> tuple[np.ndarray, np.ndarray]:
    """The forecast past the switch times the measured ratio, in the share of it the replayed rungs' curves
    show at each fraction (``effect["shape"]``), else in proportion to the run past the switch; its log sigma
    with the effect's in quadrature, in the same share."""
    at = effect["frac"]
    shape = effect.get("shape")
    if shape:
        xs, ys = np.array(shape, dtype=float).T
        share = np.where(fracs > at, np.interp(fracs, xs, ys), 0.0)
    else:
        share = np.clip((fracs - at) / max(1.0 - at, 1e-12), 0.0, 1.0)
    return central * np.exp(share * effect["log_ratio"]), np.hypot(sigma, share * effect["sigma"])
