"""A followed hero's training metrics: each new logged step against the rungs' envelopes
(ladder.analysis.dynamics; alert once per excursion per metric) and spikes (the trainer's
SpikeDetector, its recent history kept in the follow state so a restart carries on)."""

from __future__ import annotations

import pandas as pd

from ladder.analysis.dynamics import METRICS, inside

SPIKE_METRICS = ("loss", "grad_norm", "router_bias_norm")
HISTORY = 50  # SpikeDetector's window


def envelope_events(rows: pd.DataFrame, envelopes: dict[str, pd.DataFrame], state: dict) -> list[dict]:
    """metric_envelope alerts for new metric rows (step, frac, <metric>...); once per excursion per metric."""
    events = []
    sides = state.setdefault("metric_excursion", {})
    for metric, env in envelopes.items():
        if metric not in rows or env.empty:
            continue
        for r in inside(rows, env, metric).itertuples():
            side = None if r.inside else ("above" if r.value > r.upper else "below")
            if side is not None and sides.get(metric) != side:
                events.append({"kind": "metric_envelope", "alert": True, "metric": metric, "step": int(r.step),
                               "value": float(r.value), "lower": float(r.lower), "upper": float(r.upper), "side": side,
                               "message": f"step {int(r.step)}: {metric} {r.value:.4g} {side} its envelope "
                                          f"[{r.lower:.4g}, {r.upper:.4g}]"})
            sides[metric] = side
    return events


def spike_events(rows: pd.DataFrame, state: dict) -> list[dict]:
    """spike alerts for new metric rows, with each metric's detector history carried in `state`."""
    from ladder.trainers.builtin.metrics import SpikeDetector

    events = []
    history = state.setdefault("spike_history", {})
    for metric in SPIKE_METRICS:
        if metric not in rows:
            continue
        det = SpikeDetector(metric, on_diff=(metric == "router_bias_norm"))
        past = history.get(metric) or {"hist": [], "prev": None}
        det.hist.extend(past["hist"])
        det.prev = past["prev"]
        for step, value in zip(rows["step"], rows[metric], strict=True):
            hit = det.update(int(step), float(value))
            if hit is not None:
                events.append({"kind": "spike", "alert": True, **{k: v for k, v in hit.items() if k != "event"},
                               "message": f"step {int(step)}: {metric} spiked to {float(value):.4g} "
                                          f"({hit.get('size', 0):.1f}x its recent mean)"})
        history[metric] = {"hist": list(det.hist)[-HISTORY:], "prev": det.prev}
    return events


def metric_rows(records: list[dict], total_steps: int) -> pd.DataFrame:
    """Rows of the source that carry a tracked metric or the train loss: step, frac and those columns."""
    from ladder.analysis.dynamics import metric_frame

    keep = [r for r in records if "step" in r or "_step" in r]
    if not keep:
        return pd.DataFrame()
    frame = pd.DataFrame(keep)
    if "step" not in frame:
        frame = frame.rename(columns={"_step": "step"})
    for alias in ("train/loss", "train_loss"):
        if alias in frame and "loss" not in frame:
            frame = frame.rename(columns={alias: "loss"})
    wanted = [c for c in frame.columns if c in METRICS or c.startswith("router_bias_norm_l") or c == "loss"]
    if not wanted or "metric" in frame:  # a long eval file: its `loss` is the eval metric, not the train loss
        return pd.DataFrame()
    frame = frame.dropna(subset=["step"]).sort_values("step")
    out = metric_frame(frame[["step", *wanted]].fillna(float("nan")), total_steps)
    if "loss" in frame:
        out["loss"] = frame["loss"].astype(float).to_numpy()
    cols = [c for c in out.columns if c not in ("step", "frac")]
    return out.dropna(subset=cols, how="all").reset_index(drop=True)
