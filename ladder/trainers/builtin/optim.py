"""AdamW (optax) with clipping, a weight-decay mask, LR groups, and learning-rate schedules.

The learning rate is computed on the host for every step (:func:`lr_schedule`, a float64 numpy
array) and passed into the jitted step; the optax chain (clip -> Adam -> decoupled weight decay)
produces a direction that the step scales by ``-lr * group_multiplier``. Keeping the schedule out of
the optimizer state makes WSD cooldown branches (:func:`branch_schedule`) trivial and exact.

Groups (by parameter name): ``norm`` (RMSNorm scales: no weight decay, ``norm_lr_mult``),
``router`` (router weights: no decay, ``router_lr_mult``), ``embed`` (embedding and untied head:
decayed, ``embed_lr_mult``), ``matrix`` (everything else: decayed, LR x1). The router bias is not a
parameter at all (no gradient, no decay, updated by the balancing rule).
"""

from __future__ import annotations

import math

import numpy as np
import optax

from ladder.spec import OptimSpec, RungSpec, ScheduleSpec


def param_group(name: str) -> str:
    leaf = name.split(".")
    if "scale" in leaf[-1:] or any(p.endswith("norm") for p in leaf):
        return "norm"
    if leaf[-1] == "router":
        return "router"
    if leaf[0] in ("embed", "head"):
        return "embed"
    return "matrix"


def lr_multipliers(names, optim: OptimSpec) -> dict[str, float]:
    mult = {"norm": optim.norm_lr_mult, "router": optim.router_lr_mult, "embed": optim.embed_lr_mult, "matrix": 1.0}
    return {n: float(mult[param_group(n)]) for n in names}


def decay_mask(params: dict) -> dict[str, bool]:
    return {n: param_group(n) in ("matrix", "embed") for n in params}


def make_optimizer(optim: OptimSpec, params: dict) -> optax.GradientTransformation:
    """clip by global norm -> Adam moments -> decoupled weight decay (masked). LR applied by the step."""
    parts = []
    if optim.grad_clip and optim.grad_clip > 0:
        parts.append(optax.clip_by_global_norm(optim.grad_clip))
    parts.append(optax.scale_by_adam(b1=optim.b1, b2=optim.b2, eps=optim.eps))
    if optim.weight_decay:
        parts.append(optax.add_decayed_weights(optim.weight_decay, mask=decay_mask(params)))
    return optax.chain(*parts)


def warmup_steps(sched: ScheduleSpec, total: int) -> int:
    if sched.warmup_steps is not None:
        return min(int(sched.warmup_steps), total)
    return min(total, int(round(sched.warmup_frac * total)))


def _cooldown(frac: np.ndarray, shape: str) -> np.ndarray:
    """Multiplier from 1 (frac=0) to 0 (frac=1)."""
    frac = np.clip(frac, 0.0, 1.0)
    if shape == "linear":
        return 1.0 - frac
    if shape == "1-sqrt":
        return 1.0 - np.sqrt(frac)
    if shape == "cosine":
        return 0.5 * (1.0 + np.cos(math.pi * frac))
    raise ValueError(f"schedule.cooldown_shape: {shape!r} is not one of linear, 1-sqrt, cosine")


def lr_schedule(rung: RungSpec, total_steps: int | None = None) -> np.ndarray:
    """Learning rate of every optimizer step 0..S-1 (the lr used to take step s+1)."""
    s_total = total_steps if total_steps is not None else rung.steps
    sched, peak = rung.schedule, rung.lr
    floor = sched.final_lr_frac
    steps = np.arange(s_total, dtype=np.float64)
    w = warmup_steps(sched, s_total)
    warm = np.minimum(1.0, (steps + 1) / max(1, w)) if w else np.ones_like(steps)
    after = np.clip((steps - w + 1) / max(1, s_total - w), 0.0, 1.0)
    if sched.kind == "constant":
        mult = np.ones_like(steps)
    elif sched.kind == "cosine":
        mult = floor + (1 - floor) * _cooldown(after, "cosine")
    elif sched.kind == "linear":
        mult = floor + (1 - floor) * (1.0 - after)
    elif sched.kind == "wsd":
        decay = int(round(sched.decay_frac * s_total))
        start = s_total - decay
        frac = (steps - start + 1) / max(1, decay)
        mult = np.where(steps < start, 1.0, floor + (1 - floor) * _cooldown(frac, sched.cooldown_shape))
    else:
        raise ValueError(f"schedule.kind: {sched.kind!r} is not one of cosine, linear, constant, wsd")
    return peak * np.where(steps < w, warm, mult)


def branch_points(rung: RungSpec, total_steps: int | None = None) -> list[dict]:
    """WSD cooldown branches: for each fraction f, the run of f * tokens as WSD would train it.

    The branch leaves the main run's stable phase at ``start = round((1 - decay_frac) * f * S)`` and
    cools down for ``end - start`` steps (``decay_frac`` of the branch's budget ``f * S``), so its end
    point is what a WSD run of ``f * tokens`` would reach (same warmup as the main run).
    """
    s_total = total_steps if total_steps is not None else rung.steps
    sched = rung.schedule
    if sched.kind != "wsd" or not sched.branch_fracs:
        return []
    main_start = s_total - int(round(sched.decay_frac * s_total))
    w = warmup_steps(sched, s_total)
    out = []
    for f in sorted(set(sched.branch_fracs)):
        end = int(round(f * s_total))
        start = int(round((1.0 - sched.decay_frac) * end))
        if end >= s_total or start <= w or start > main_start or end <= start:
            continue
        out.append({"frac": float(f), "start": start, "end": end})
    return out


def branch_schedule(rung: RungSpec, start: int, end: int) -> np.ndarray:
    """Learning rates for branch steps start..end-1: the peak cooled to the floor with the run's shape."""
    sched = rung.schedule
    frac = (np.arange(start, end, dtype=np.float64) - start + 1) / max(1, end - start)
    floor = sched.final_lr_frac
    return rung.lr * (floor + (1 - floor) * _cooldown(frac, sched.cooldown_shape))
