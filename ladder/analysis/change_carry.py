"""The pure part of carrying a hero's mid-run data-mix switch by its replayed rungs' effect
(ladder.analysis.change_effect measures it): whether a ladder replays a switch, the effect declared for a
change, and the forecast past the switch carried by it. No ladder is read here, so the live forecast
(ladder.analysis.follow_forecast) and `ladder compare` (ladder.analysis.effect) use it without importing either.
"""

from __future__ import annotations

import math

import numpy as np

REL_TOL = 0.02  # a replay's switch fraction may differ from the hero's by its step rounding


def replays(spec_b, change, hero_steps: int) -> bool:
    """Whether every run of ladder `spec_b` switches its mixture as `change` does, at the same fraction."""
    data = spec_b.data
    return bool(change.weights) and data.switch_at > 0 and dict(data.switch_weights) == dict(change.weights) \
        and math.isclose(data.switch_at, change.step / hero_steps, rel_tol=REL_TOL)


def effect_at(effects: tuple[dict, ...], step: int) -> dict | None:
    """The measured effect carried past the change at `step`, or None (none measured: the band widens)."""
    return next((e for e in effects if e["step"] == step and e.get("ok")), None)


def carry(fracs: np.ndarray, central: np.ndarray, sigma: np.ndarray, effect: dict) -> tuple[np.ndarray, np.ndarray]:
    """The forecast past the switch times the measured ratio, in proportion to the run past it, and its log
    sigma with the effect's in quadrature (the same proportion)."""
    at = effect["frac"]
    share = np.clip((fracs - at) / max(1.0 - at, 1e-12), 0.0, 1.0)
    return central * np.exp(share * effect["log_ratio"]), np.hypot(sigma, share * effect["sigma"])
