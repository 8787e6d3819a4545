"""Write a realistic sample ladder root (for the dashboard's tests, its benchmark and a demo).

The rung and hero loss curves are real published training curves when the reference data is at
hand (Luo et al. 2025, multi-power law: 25M/100M/400M models under cosine schedules; the
project's copy in fits/reference_data, or $LADDER_REFERENCE_DATA), else a multi-power-shaped
synthetic curve. The fit is a real least-squares fit of L(C) = E + A C^-alpha to the rungs' final losses
with a bootstrap band; the hero's predicted curve is the largest rung's curve shape stretched to
the hero's length and placed on the law's prediction. MoE health metrics are synthetic (aux-free
balancing dynamics with one recorded loss/router-bias spike in the hero).

Usage: ``python -m bench.sample DIR`` then ``ladder dashboard --root DIR``.
"""

from __future__ import annotations

import hashlib
import json
import math
import sys
import time
from pathlib import Path

import numpy as np

from ladder.outputs import layout

TOKENS_PER_STEP = 512 * 1024  # the curves' batch (0.5M tokens) as an assumption for C = 6 N D
RUNGS = (("rung_1", "25M", 25e6, "cosine_24000"), ("rung_2", "25M", 25e6, "cosine_72000"),
         ("rung_3", "100M", 100e6, "cosine_24000"), ("rung_4", "400M", 400e6, "cosine_24000"))
HERO = ("hero", "400M", 400e6, "cosine_72000")
N_LAYERS = 4
N_EXPERTS = 8


def reference_dir() -> Path | None:
    from fits import reference

    d = reference.data_dir()
    return d if (d / "multipower_curves").is_dir() else None


def load_curve(size: str, schedule: str, ref: Path | None) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(step, lr, loss) of a published curve, else a synthetic multi-power-shaped one."""
    if ref is not None:
        p = ref / "multipower_curves" / size / f"{schedule}.csv"
        if p.exists():
            a = np.genfromtxt(p, delimiter=",", names=True)
            return a["step"].astype(float), a["lr"].astype(float), a["loss"].astype(float)
    total = int(schedule.split("_")[-1])
    step = np.linspace(total / 100, total, 150)
    lr = 3e-4 * 0.5 * (1 + np.cos(np.pi * step / total))
    n = {"25M": 25e6, "100M": 100e6, "400M": 400e6}[size]
    floor = 1.8 + 420 / n**0.34
    loss = floor + 2.2 * (step / 1000) ** -0.45 - 0.15 * (1 - lr / 3e-4)
    return step, lr, loss


def _write_jsonl(path: Path, rows, partial_tail: str | None = None) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    with path.open("w") as fh:
        for r in rows:
            fh.write(json.dumps(r, default=layout._json_default) + "\n")
        if partial_tail:
            fh.write(partial_tail)


PINNED_E = 1.7  # irreducible loss pinned, as Marin does when few rungs constrain it


def _fit_compute(C: np.ndarray, L: np.ndarray):
    """L(C) = E + A C^-alpha with E pinned: least squares of log(L - E) against log C."""
    y = np.log(np.maximum(L - PINNED_E, 1e-6))
    x = np.log(C)
    slope, intercept = np.polyfit(x, y, 1)
    resid = y - (intercept + slope * x)
    return {"E": PINNED_E, "A": float(math.exp(intercept)), "alpha": float(-slope)}, float((resid**2).sum())


def _law(p, C):
    return p["E"] + p["A"] * np.asarray(C, dtype=float) ** -p["alpha"]


def write_sample_root(root: str | Path, name: str = "demo", hero_frac: float = 0.6, seed: int = 0,
                      half_written: bool = True) -> Path:
    """Write ladder ``name`` under ``root`` with the hero ``hero_frac`` of the way through."""
    rng = np.random.default_rng(seed)
    ref = reference_dir()
    ld = Path(root) / name
    (ld / ".index").mkdir(parents=True, exist_ok=True)
    now = time.time()
    dirs: dict[str, Path] = {}

    def step_dir(step: str, deps: list[str], config: dict) -> Path:
        h = hashlib.sha1(f"{name}/{step}/{seed}".encode()).hexdigest()[:8]
        d = ld / f"{step}-{h}"
        d.mkdir(parents=True, exist_ok=True)
        dirs[step] = d
        layout.write_json_atomic(ld / ".index" / f"{step}.json", {"step": step, "dir": d.name, "hash": h})
        layout.write_json_atomic(d / layout.STEP_JSON, {
            "name": step, "hash": h, "config": config, "deps": {k: str(dirs[k]) for k in deps},
            "reason": "new", "host": "sample", "start": now - 3600})
        return d

    def status(d: Path, st: str, start: float, end: float | None = None) -> None:
        layout.write_json_atomic(d / layout.STATUS, {"status": st, "start": start, "end": end,
                                                     "owner": "sample", "heartbeat": now})

    finals = []
    spike_step = None
    for rung_name, size, n, sched in (*RUNGS, HERO):
        is_hero = rung_name == "hero"
        step, lr, loss = load_curve(size, sched, ref)
        fpt = 6.0 * n
        cfg = {"model": size, "params_active": n, "schedule": sched, "tokens_per_step": TOKENS_PER_STEP}
        if is_hero:
            continue
        d = step_dir(rung_name, [], cfg)
        rows, evals = _train_rows(step, lr, loss, fpt, rng, spike_at=None)
        _write_jsonl(d / layout.METRICS, rows)
        _write_jsonl(d / layout.EVAL, evals)
        _write_jsonl(d / layout.EVENTS, [])
        tokens = step[-1] * TOKENS_PER_STEP
        final = float(evals[-1]["eval_loss"])
        finals.append((rung_name, n, tokens, fpt * tokens, final))
        layout.write_json_atomic(d / layout.PROGRESS, {"step": int(step[-1]), "total_steps": int(step[-1]),
                                                        "tokens": tokens, "loss": float(loss[-1]),
                                                        "tokens_per_s": 2.1e6, "eta_s": 0})
        layout.write_json_atomic(d / layout.RESULT, {"status": "SUCCESS", "final_eval_loss": final,
                                                      "final_train_loss": float(loss[-1]), "params_active": n,
                                                      "tokens": tokens, "flops": fpt * tokens})
        status(d, "SUCCESS", now - 3600, now - 1800)

    # fit: compute law on the rungs' final eval losses, bootstrap over rungs for the band
    import pandas as pd

    C = np.array([f[3] for f in finals])
    L = np.array([f[4] for f in finals])
    params, cost = _fit_compute(C, L)
    samples = {"E": [], "A": [], "alpha": []}
    fitted = _law(params, C)
    rel = L / fitted - 1
    for _ in range(60):  # residual bootstrap, with a floor on the noise so the band is never zero
        noise = rng.choice(rel, len(C)) + rng.normal(0, 0.004, len(C))
        p, _c = _fit_compute(C, fitted * (1 + noise))
        for k in samples:
            samples[k].append(p[k])
    ci = {k: [float(np.percentile(v, 5)), float(np.percentile(v, 95))] for k, v in samples.items()}
    held = finals[-1]
    p_bt, _ = _fit_compute(C[:-1], L[:-1]) if len(C) > 3 else (params, 0)
    bt_pred = float(_law(p_bt, held[3]))
    d_fit = step_dir("fit", [f[0] for f in finals], {"law": "compute", "bootstrap": 60, "level": 0.9})
    law = {"law": "compute", "params": params, "objective": cost, "n_points": len(C), "n_starts": 1,
           "converged": True, "diagnostics": {}, "config": {"pin_E": PINNED_E}, "samples": samples, "ci": ci,
           "calibration": None, "format_version": 1}
    layout.write_json_atomic(d_fit / layout.FIT, {
        "summary": {"law": "compute", "params": params, "n_points": len(C), "n_rungs": len(C), "level": 0.9,
                    "bootstrap": len(samples["E"]), "fit_on": [f[0] for f in finals], "excluded": []},
        "law": law,
        "backtest": {"ok": True, "fit_on": [f[0] for f in finals[:-1]], "predict": held[0], "predicted": bt_pred,
                     "actual": held[4], "relative_error": bt_pred / held[4] - 1, "compute_ratio": held[3] / C[-2],
                     "decades": math.log10(held[3] / C[-2]), "law": "compute"}})
    grid = np.geomspace(C.min() / 2, 2 * 6.0 * HERO[2] * 72000 * TOKENS_PER_STEP, 60)
    boot = np.array([_law({k: samples[k][i] for k in samples}, grid) for i in range(len(samples["E"]))])
    layout.write_csv_atomic(d_fit / "law_curve.csv", pd.DataFrame({
        "flops": grid, "loss": _law(params, grid), "lower": np.percentile(boot, 5, axis=0),
        "upper": np.percentile(boot, 95, axis=0)}))
    runs = pd.DataFrame([{"name": f[0], "kind": "final", "params": f[1], "tokens": f[2], "flops": f[3], "loss": f[4]}
                         for f in finals])
    layout.write_csv_atomic(d_fit / layout.RUNS_CSV, runs)
    status(d_fit, "SUCCESS", now - 1790, now - 1780)

    # predict: the hero's final loss from the law, its curve from the largest rung's shape
    h_step, h_lr, h_loss = load_curve(HERO[1], HERO[3], ref)
    r_step, _r_lr, r_loss = load_curve(RUNGS[-1][1], RUNGS[-1][3], ref)
    fpt_h = 6.0 * HERO[2]
    total_steps = int(h_step[-1])
    hero_C = fpt_h * total_steps * TOKENS_PER_STEP
    pred_final = float(_law(params, hero_C))
    band_s = np.array([_law({k: samples[k][i] for k in samples}, hero_C) for i in range(len(samples["E"]))])
    lo_f, hi_f = float(np.percentile(band_s, 5)), float(np.percentile(band_s, 95))
    frac = h_step / h_step[-1]
    shape = np.interp(frac, r_step / r_step[-1], r_loss) - r_loss[-1]
    pred_curve = pred_final + shape * (h_loss[0] - pred_final) / max(shape[0], 1e-9) * 0.97
    width = np.maximum(hi_f - lo_f, 0.01 * pred_final) * (0.6 + 0.4 * frac) + 0.5 * (1 - frac) ** 3
    d_pred = step_dir("predict", ["fit"], {"target": "hero"})
    known = frac >= r_step[0] / r_step[-1]  # the rung's curve says nothing before its first point
    hero_curve = pd.DataFrame({"step": h_step.astype(int), "tokens": h_step * TOKENS_PER_STEP,
                               "flops": h_step * TOKENS_PER_STEP * fpt_h, "lr": h_lr, "loss": pred_curve,
                               "lower": pred_curve - width / 2, "upper": pred_curve + width / 2})[known]
    layout.write_csv_atomic(d_pred / layout.HERO_CURVE, hero_curve)
    targets = pd.DataFrame([
        {"name": "hero", "params": HERO[2], "tokens": hero_C / fpt_h, "flops": hero_C, "loss": pred_final,
         "lower": lo_f, "upper": hi_f},
        {"name": "1.6B-x10", "params": 1.6e9, "tokens": 3.2e10, "flops": 6 * 1.6e9 * 3.2e10,
         "loss": float(_law(params, 6 * 1.6e9 * 3.2e10)),
         "lower": float(np.percentile([_law({k: samples[k][i] for k in samples}, 3.07e20) for i in range(len(band_s))], 5)),
         "upper": float(np.percentile([_law({k: samples[k][i] for k in samples}, 3.07e20) for i in range(len(band_s))], 95))},
    ])
    layout.write_csv_atomic(d_pred / layout.TARGETS_CSV, targets)
    layout.write_json_atomic(d_pred / layout.PREDICTION, {
        "law": "compute", "level": 0.9, "fit_on": [f[0] for f in finals],
        "hero": {"name": "hero", "predicted_final_loss": pred_final, "lower": lo_f, "upper": hi_f, "level": 0.9,
                 "law": "compute", "params": HERO[2], "tokens": hero_C / fpt_h, "flops": hero_C},
        "targets": targets.iloc[1:].to_dict("records")})
    status(d_pred, "SUCCESS", now - 1770, now - 1760)

    d_gate = step_dir("gate", ["fit", "predict"], {})
    layout.write_json_atomic(d_gate / layout.GATE, {
        "passed": True, "overridden": False,
        "reasons": [f"backtest error {abs(bt_pred - held[4]) / held[4]:.3%} <= 2%",
                    f"interval width {(hi_f - lo_f) / pred_final:.3%} <= 10%"]})
    status(d_gate, "SUCCESS", now - 1750, now - 1750)

    # hero: hero_frac of the way, one recorded spike, forecast snapshots, a half-written last line
    d_hero = step_dir("hero", ["gate", "predict"], {"model": HERO[1], "schedule": HERO[3]})
    keep = h_step <= hero_frac * total_steps
    spike_step = float(h_step[keep][len(h_step[keep]) // 3])
    rows, evals = _train_rows(h_step[keep], h_lr[keep], h_loss[keep], fpt_h, rng, spike_at=spike_step)
    tail = '{"step": 999999, "loss": 3.1, "tok' if half_written else None
    _write_jsonl(d_hero / layout.METRICS, rows, partial_tail=tail)
    _write_jsonl(d_hero / layout.EVAL, evals, partial_tail='{"step": 99' if half_written else None)
    _write_jsonl(d_hero / layout.EVENTS, [
        {"step": spike_step, "event": "spike", "metric": "loss", "size": 1.12, "z": 9.4},
        {"step": spike_step, "event": "spike", "metric": "router_bias_norm", "size": 2.4, "z": 12.0},
        {"step": spike_step + 128, "event": "spike", "metric": "grad_norm", "size": 3.1, "z": 7.7}])
    forecasts = []
    (d_hero / layout.FORECAST_DIR).mkdir(exist_ok=True)
    for q in (0.15, 0.3, 0.45, 0.6):
        if q > hero_frac + 1e-9:
            break
        at = int(h_step[np.searchsorted(h_step, q * total_steps)])
        i = int(np.searchsorted(h_step, at))
        ratio = h_loss[i] / pred_curve[i]
        curve = pred_curve * (1 + (ratio - 1) * (0.3 + 0.7 * (frac >= frac[i])))
        w = width * (1 - 0.5 * q)
        snap = pd.DataFrame({"step": h_step.astype(int), "tokens": h_step * TOKENS_PER_STEP, "loss": curve,
                             "lower": curve - w / 2, "upper": curve + w / 2})[known]
        layout.write_csv_atomic(d_hero / layout.FORECAST_DIR / f"{at}.csv", snap)
        forecasts.append({"at_step": at, "predicted_final": float(curve[-1]),
                          "lower": float(curve[-1] - w[-1] / 2), "upper": float(curve[-1] + w[-1] / 2)})
    _write_jsonl(d_hero / layout.FORECASTS, forecasts)
    last = rows[-1]
    layout.write_json_atomic(d_hero / layout.PROGRESS, {
        "step": last["step"], "total_steps": total_steps, "tokens": last["tokens"], "loss": last["loss"],
        "tokens_per_s": 1.9e6, "eta_s": (total_steps - last["step"]) * TOKENS_PER_STEP / 1.9e6})
    status(d_hero, "RUNNING", now - 1700)
    return ld


def _train_rows(step, lr, loss, fpt, rng, spike_at):
    """metrics.jsonl and eval.jsonl rows built around a real loss curve."""
    rows, evals = [], []
    n = len(step)
    bias = np.zeros(N_LAYERS)
    prev = 0.0
    eval_every = max(1, n // 10)
    for i in range(n):
        s = float(step[i])
        tokens = s * TOKENS_PER_STEP
        ls = float(loss[i])
        spike = 0.0
        if spike_at is not None and s >= spike_at:
            spike = 0.31 * math.exp(-(s - spike_at) / 300.0)
        ls += spike
        growth = np.sqrt(s / 1000.0) * 0.35 * (1 + 0.15 * np.arange(N_LAYERS))
        bias = growth * (1 + 0.01 * rng.normal(size=N_LAYERS)) + (spike * 8 if spike else 0) * (np.arange(N_LAYERS) == N_LAYERS - 1)
        imbalance = 1.05 + 1.6 * math.exp(-s / 1500.0) + 0.03 * abs(rng.normal()) + spike * 4
        row = {"step": int(s), "tokens": tokens, "flops": fpt * tokens, "loss": ls, "lr": float(lr[i]),
               "grad_norm": 0.25 + 0.6 * math.exp(-s / 3000.0) + 0.02 * abs(rng.normal()) + spike * 10,
               "param_norm": 80 + 12 * math.log1p(s / 1000.0), "update_norm": float(lr[i]) * 300,
               **{f"router_bias_norm_l{j}": float(bias[j]) for j in range(N_LAYERS)},
               "expert_load_max_over_mean": imbalance,
               "drop_rate": max(0.0, 0.04 * math.exp(-s / 2000.0) + 0.002 * rng.normal()) + spike * 0.2,
               "routing_entropy": math.log(N_EXPERTS) - 0.35 * math.exp(-s / 2500.0) - spike,
               "tokens_per_s": 2.0e6 * (1 + 0.02 * rng.normal()), "mfu": 0.38,
               "wall_s": s * 0.26}
        prev = ls
        rows.append(row)
        # an eval lands on the spike too: the hero is scored on its eval points, so the sample's exit is one
        if i % eval_every == eval_every - 1 or i == n - 1 or (spike_at is not None and s == spike_at):
            el = prev + 0.03 + spike  # the held-out loss jumps at least as far as the train loss in a spike
            evals.append({"step": int(s), "tokens": tokens, "flops": fpt * tokens, "eval_loss": el,
                          "eval_loss/code": el * 0.82, "eval_loss/prose": el * 1.12,
                          "bpb/code": el * 0.82 / math.log(2) / 3.6, "bpb/prose": el * 1.12 / math.log(2) / 4.1,
                          "bpb": el / math.log(2) / 3.8})
    return rows, evals


if __name__ == "__main__":
    if len(sys.argv) != 2:
        print("usage: python -m bench.sample DIR", file=sys.stderr)
        sys.exit(2)
    print(write_sample_root(sys.argv[1]))
