"""Training-dynamics envelopes: the rungs' grad norm, MoE drop rate and load imbalance, and router-bias
norm against the fraction of the run, extrapolated to the hero.

Rule (per metric, per tenth of the run): each rung's median log value over the steps in that tenth (for a
metric with a floor, the log of its excess over the floor: the load max/mean's over 1) is
regressed on log active parameters across the rungs (least squares); the hero's value is the line at
its size, with the regression's prediction interval (Student's t at n - 2 degrees of freedom, the
leverage of a point that far out) widened by the rungs' own per-step scatter within the tenth (a
single step of the hero scatters that much about its median). Tested by predicting the largest rung
from the smaller ones (backtest()), scored on its every logged step.

Sides. The MoE drop rate and the expert load's max/mean are bounded below (0 and 1) and lower is
healthier: a larger run that drops fewer tokens or balances better than its rungs is no excursion (on
fresh draws of the smoke rungs every step outside their two-sided envelope was below it). Their
envelope is an upper bound at the level (one-sided Student's t quantile), its lower edge the metric's
floor; the grad norm and the router-bias norm keep both sides (a collapse is news too).
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pandas as pd
from scipy.stats import t as student_t

from ladder.outputs import layout

METRICS = ("grad_norm", "drop_rate", "expert_load_max_over_mean", "router_bias_norm")
# upper-only envelopes and the floor that is their lower edge (the metric's smallest possible value)
UPPER_ONLY = {"drop_rate": 0.0, "expert_load_max_over_mean": 1.0}
BINS = np.linspace(0.0, 1.0, 11)


def metric_frame(rows: pd.DataFrame, total_steps: int) -> pd.DataFrame:
    """frac and each tracked metric, positive values only. router_bias_norm is the root mean square over
    layers of router_bias_norm_l*: a ladder whose depth grows with width has more layers at every size,
    and a norm over layers would grow with the square root of the depth, not with training."""
    if rows.empty or "step" not in rows:
        return pd.DataFrame()
    out = pd.DataFrame({"step": rows["step"].astype(int), "frac": rows["step"].to_numpy(float) / total_steps})
    layers = [c for c in rows.columns if c.startswith("router_bias_norm_l")]
    if layers:
        out["router_bias_norm"] = np.sqrt((rows[layers].astype(float) ** 2).mean(axis=1))
    for m in METRICS:
        if m in rows and m not in out:
            out[m] = rows[m].astype(float)
    return out


def rung_frames(dep_dirs: dict[str, str], runs: list[str]) -> list[tuple[str, float, pd.DataFrame]]:
    """(name, active params, metric_frame) of each rung trained here."""
    out = []
    for name in runs:
        d = dep_dirs.get(name)
        result = layout.read_json(Path(d) / layout.RESULT, None) if d else None
        if not result or not result.get("total_steps") or not result.get("params_active"):
            continue
        frame = metric_frame(layout.read_jsonl(Path(d) / layout.METRICS), int(result["total_steps"]))
        if not frame.empty:
            out.append((name, float(result["params_active"]), frame))
    return out


def envelope(rungs: list[tuple[str, float, pd.DataFrame]], size: float, metric: str, level: float) -> pd.DataFrame:
    """frac_lo, frac_hi, centre, lower, upper of `metric` for a run of `size` active params (empty when < 3 rungs)."""
    rows = []
    floor = UPPER_ONLY.get(metric, 0.0)  # regressed in log(value - floor): the centre never falls below it
    for lo, hi in zip(BINS[:-1], BINS[1:], strict=True):
        xs, ms, within = [], [], []
        for _, n, f in rungs:
            if metric not in f:
                continue
            v = f[(f["frac"] > lo) & (f["frac"] <= hi + 1e-12)][metric].to_numpy(float)
            v = np.log(v[v > floor] - floor)
            if v.size == 0:
                continue
            xs.append(math.log(n))
            ms.append(float(np.median(v)))
            within.append(float(np.var(v, ddof=1)) if v.size > 1 else 0.0)
        if len(xs) < 3:
            continue
        x, y = np.array(xs), np.array(ms)
        b, a = np.polyfit(x, y, 1)
        dof = len(x) - 2
        resid = y - (a + b * x)
        s2 = float(resid @ resid / dof) if dof > 0 else 0.0
        x0 = math.log(size)
        lev = 1.0 / len(x) + (x0 - x.mean()) ** 2 / float(((x - x.mean()) ** 2).sum())
        sigma = math.sqrt(s2 * (1 + lev) + float(np.mean(within)))
        one_sided = metric in UPPER_ONLY
        q = float(student_t(dof).ppf(level if one_sided else 0.5 + level / 2)) if dof > 0 else float("inf")
        centre = a + b * x0
        lower = floor if one_sided else floor + math.exp(centre - q * sigma)
        rows.append({"frac_lo": float(lo), "frac_hi": float(hi), "centre": floor + math.exp(centre),
                     "lower": lower, "upper": floor + math.exp(centre + q * sigma), "rungs": len(x)})
    return pd.DataFrame(rows)


def inside(frame: pd.DataFrame, env: pd.DataFrame, metric: str) -> pd.DataFrame:
    """Each logged step of `frame` against the envelope: frac, value, lower, centre, upper, inside (steps in a covered tenth).

    Vectorised (steps x tenths): the dashboard judges a live hero's every logged step at each poll."""
    if metric not in frame or env.empty or frame.empty:
        return pd.DataFrame()
    v = frame[metric].to_numpy(float)
    frac = frame["frac"].to_numpy(float)
    lo, hi = env["frac_lo"].to_numpy(float), env["frac_hi"].to_numpy(float) + 1e-12
    match = (lo[None, :] < frac[:, None]) & (frac[:, None] <= hi[None, :])
    keep = match.any(axis=1) & np.isfinite(v) & (v > 0)
    if not keep.any():
        return pd.DataFrame()
    row = match.argmax(axis=1)[keep]  # the first tenth that holds the step
    lower, upper = env["lower"].to_numpy(float)[row], env["upper"].to_numpy(float)[row]
    centre = env["centre"].to_numpy(float)[row]
    value = v[keep]
    return pd.DataFrame({"step": frame["step"].to_numpy()[keep].astype(int), "frac": frac[keep], "value": value,
                         "lower": lower, "centre": centre, "upper": upper, "inside": (lower <= value) & (value <= upper)})


def backtest(rungs: list[tuple[str, float, pd.DataFrame]], level: float) -> list[dict]:
    """The largest rung's every logged step against the envelope from the smaller rungs, per metric."""
    order = sorted(rungs, key=lambda r: r[1])
    if len(order) < 4:
        return []
    target, others = order[-1], order[:-1]
    out = []
    for metric in METRICS:
        env = envelope(others, target[1], metric, level)
        if env.empty:
            continue
        scored = inside(target[2], env, metric)
        if scored.empty:
            continue
        out.append({"metric": metric, "predict": target[0], "fit_on": [r[0] for r in others], "level": level,
                    "points": int(len(scored)), "inside": float(scored["inside"].mean()),
                    "below": float((scored["value"] < scored["lower"]).mean()),
                    "above": float((scored["value"] > scored["upper"]).mean()),
                    # an upper bound's width is its margin above the centre (its lower edge is the floor)
                    "mean_log_half_width": float(np.mean(np.log(scored["upper"] / scored["centre"])))})
    return out


def add_dynamics(report: dict, prediction: dict, dep_dirs: dict[str, str], config: dict) -> None:
    """report["dynamics"]: the envelopes' backtest on the largest rung, the hero against its envelopes and its
    spikes (the trainer's events.jsonl: loss, grad norm, router-bias norm), for rungs trained here."""
    rungs = rung_frames(dep_dirs, list(config.get("rungs") or []))
    if len(rungs) < 3:
        return
    level = float(config.get("level") or 0.9)
    out: dict = {"rule": "per tenth of the run: the rungs' median log value regressed on log active params, "
                         "t prediction interval (+) per-step scatter; drop rate and load max/mean: upper bound only",
                 "level": level, "backtests": backtest(rungs, level), "hero": [], "spikes": [], "charts": []}
    hero_dir = dep_dirs.get(config.get("hero") or "")
    result = layout.read_json(Path(hero_dir) / layout.RESULT, None) if hero_dir else None
    if result and result.get("params_active") and result.get("total_steps"):
        frame = metric_frame(layout.read_jsonl(Path(hero_dir) / layout.METRICS), int(result["total_steps"]))
        for metric in METRICS:
            env = envelope(rungs, float(result["params_active"]), metric, level)
            scored = inside(frame, env, metric) if not env.empty and metric in frame else pd.DataFrame()
            if not env.empty:
                out["charts"].append(_chart(metric, rungs, env, frame))
            if scored.empty:
                continue
            outside = scored[~scored["inside"]]
            out["hero"].append({"metric": metric, "points": int(len(scored)), "inside": float(scored["inside"].mean()),
                                "first_outside_step": int(outside["step"].iloc[0]) if not outside.empty else None})
        out["spikes"] = [e for e in layout.iter_jsonl(Path(hero_dir) / layout.EVENTS) if e.get("event") == "spike"]
    report["dynamics"] = out


def _series(frame: pd.DataFrame, metric: str) -> dict:
    rows = frame[frame[metric] > 0] if metric in frame else frame.iloc[:0]
    return {"step": [int(v) for v in rows["step"]], "frac": [float(v) for v in rows["frac"]],
            "value": [float(v) for v in rows[metric]]}


def _chart(metric: str, rungs: list[tuple[str, float, pd.DataFrame]], env: pd.DataFrame, hero: pd.DataFrame) -> dict:
    """What the report draws for one metric: each rung's trajectory by fraction of its run, the hero's
    envelope per tenth and the hero's own steps over it."""
    return {"metric": metric, "upper_only": metric in UPPER_ONLY,
            "envelope": env[["frac_lo", "frac_hi", "centre", "lower", "upper"]].to_dict("records"),
            "rungs": [{"name": name, **_series(f, metric)} for name, _, f in sorted(rungs, key=lambda r: r[1])],
            "hero": _series(hero, metric)}

