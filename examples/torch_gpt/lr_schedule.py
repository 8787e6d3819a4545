"""The learning rate of every optimizer step, from the contract's ``schedule`` and peak ``lr``: warmup, then
WSD (hold the peak, cool down over ``decay_frac`` of the run with a linear, 1-sqrt or cosine shape), cosine,
linear or constant, down to ``final_lr_frac`` of the peak. Standard library only; the same numbers as the
built-in trainer's schedule (tests/train/test_torch_gpt.py compares them step by step)."""

from __future__ import annotations

import math


def warmup_steps(schedule: dict, total: int) -> int:
    if schedule.get("warmup_steps") is not None:
        return min(int(schedule["warmup_steps"]), total)
    return min(total, int(round(float(schedule.get("warmup_frac", 0.0)) * total)))


def cooldown(frac: float, shape: str) -> float:
    """A multiplier from 1 (frac 0) to 0 (frac 1)."""
    frac = min(1.0, max(0.0, frac))
    if shape == "linear":
        return 1.0 - frac
    if shape == "1-sqrt":
        return 1.0 - math.sqrt(frac)
    if shape == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * frac))
    raise ValueError(f"schedule.cooldown_shape: {shape!r} is not one of linear, 1-sqrt, cosine")


def lr_at(step: int, total: int, peak: float, schedule: dict) -> float:
    """The learning rate that takes step ``step`` (0-based) to step + 1, of a run of ``total`` steps."""
    kind = schedule.get("kind", "wsd")
    floor = float(schedule.get("final_lr_frac", 0.0))
    w = warmup_steps(schedule, total)
    if step < w:
        return peak * min(1.0, (step + 1) / max(1, w))
    after = min(1.0, max(0.0, (step - w + 1) / max(1, total - w)))
    if kind == "constant":
        mult = 1.0
    elif kind == "cosine":
        mult = floor + (1 - floor) * cooldown(after, "cosine")
    elif kind == "linear":
        mult = floor + (1 - floor) * (1.0 - after)
    elif kind == "wsd":
        decay = int(round(float(schedule["decay_frac"]) * total))
        start = total - decay
        frac = (step - start + 1) / max(1, decay)
        mult = 1.0 if step < start else floor + (1 - floor) * cooldown(frac, schedule.get("cooldown_shape", "1-sqrt"))
    else:
        raise ValueError(f"schedule.kind: {kind!r} is not one of cosine, linear, constant, wsd")
    return peak * mult
