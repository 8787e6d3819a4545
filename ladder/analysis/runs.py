"""Reading the rungs: each rung's final result and cooldown branches, and its train-loss curve."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd

from ladder.outputs import layout

DOMAIN_LOSS = "loss@"  # column prefix of a point's eval loss on one domain of the mixture
DOMAIN_WEIGHT = "weight@"  # column prefix of that domain's weight in the eval mixture


def collect_runs(rung_names: list[str], dep_dirs: dict[str, str]) -> tuple[pd.DataFrame, list[dict]]:
    """One row per fitted point: each rung's final result and each of its cooldown branches.

    Returns (runs, excluded): excluded lists rungs that did not finish, with their status.
    """
    rows, excluded = [], []
    for name in rung_names:
        d = dep_dirs.get(name)
        status = (layout.read_json(Path(d) / layout.STATUS, {}) or {}).get("status") if d else None
        result = layout.read_json(Path(d) / layout.RESULT, None) if d else None
        if not result or result.get("status") != "SUCCESS" or status not in (None, "SUCCESS"):
            excluded.append({"name": name, "status": (result or {}).get("status") or status or "MISSING",
                             "message": (result or {}).get("message")})
            continue
        if result.get("partial"):  # stopped short (an imported curve): its last point is no final loss
            excluded.append({"name": name, "status": "PARTIAL", "message": result.get("note")})
            continue
        # Runs of one size (replicas on other seeds) share a size key; the backtest and the bootstrap
        # treat a size as one unit, and the fit sees every run.
        base = {"name": name, "size": f"{float(result['params_active']):.0f}x{float(result['tokens']):.0f}",
                "params": float(result["params_active"]), "params_total": float(result["params_total"]),
                "flops_per_token": float(result["flops"]) / float(result["tokens"]), **domain_weights(d)}
        rows.append({**base, "kind": "final", "tokens": float(result["tokens"]), "flops": float(result["flops"]),
                     "loss": float(result["final_eval_loss"]), "train_loss": result.get("final_train_loss"),
                     "steps": result.get("steps"), **domain_losses(result)})
        for br in result.get("branches") or []:
            if br.get("final_eval_loss") is None:
                continue
            rows.append({**base, "kind": "branch", "tokens": float(br["tokens"]),
                         "flops": float(br["tokens"]) * base["flops_per_token"], "loss": float(br["final_eval_loss"]),
                         "train_loss": br.get("final_train_loss"), "steps": br.get("steps"), **domain_losses(br)})
    return pd.DataFrame(rows), excluded


def domain_losses(result: dict) -> dict[str, float]:
    """{"loss@<domain>": eval loss} of a result or branch record (empty for imported finals without them)."""
    return {DOMAIN_LOSS + d: float(v) for d, v in (result.get("final_eval_loss_by_domain") or {}).items()}


def domain_columns(points: pd.DataFrame) -> list[str]:
    return [c for c in points.columns if c.startswith(DOMAIN_LOSS)]


def domain_weights(run_dir: str | Path) -> dict[str, float]:
    """{"weight@<domain>": weight} of the eval mixture a run was scored on (its train_config.json)."""
    config = layout.read_json(Path(run_dir) / "train_config.json", None) or {}
    return {DOMAIN_WEIGHT + d["name"]: float(d["weight"]) for d in (config.get("data") or {}).get("domains") or ()}


def rung_curve(run_dir: str | Path) -> pd.DataFrame:
    """A rung's train-loss curve (step, tokens, lr, loss), one row per logged step.

    loss is the mean over each logged interval where the trainer recorded it (one step's loss on a
    tiny batch is ~10% noise), else the logged step's own loss.
    """
    m = layout.read_jsonl(Path(run_dir) / layout.METRICS)
    if m.empty:
        return m
    return interval_loss(m)[["step", "tokens", "lr", "loss"]].dropna().sort_values("step").drop_duplicates("step", keep="last")


def interval_loss(metrics: pd.DataFrame) -> pd.DataFrame:
    """Metrics rows with ``loss`` replaced by the logged interval's mean where the trainer wrote one."""
    if "loss_mean" not in metrics:
        return metrics
    return metrics.assign(loss=metrics["loss_mean"].fillna(metrics["loss"]))


def smooth(x: np.ndarray, window: int) -> np.ndarray:
    """Centred moving average with edge padding (per-batch train loss is noisy on tiny batches)."""
    if window <= 1 or len(x) == 0:
        return x
    kernel = np.ones(window) / window
    padded = np.concatenate([np.full(window // 2, x[0]), x, np.full(window - 1 - window // 2, x[-1])])
    return np.convolve(padded, kernel, mode="valid")


def tail_loss(loss) -> float:
    """A run's final train loss: the mean over its last 5% of logged steps (one small batch is noisy)."""
    loss = np.asarray(loss, dtype=float)
    return float(np.mean(loss[-max(3, len(loss) // 20):]))
