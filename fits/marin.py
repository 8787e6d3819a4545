"""Marin's forecast of its 535B hero, as its plotting script computes it (a named baseline).

At each g = 0.05, 0.10, ..., 1.00: fit ln(L - 1.5) = ln A - alpha ln C by least squares across the
rungs (Marin's lm_head-free compute, C = flops_per_step * steps * g), then predict the hero at its
own C(g). Each rung's loss at g is its eval point whose step snaps there (round(20 step / steps) / 20;
of two, the later). A rung that stopped early (d2048 at 80%) gets, past its last point, a linear fit
of its points from 0.60 to 0.80 plus 0.005: Marin's hand-set correction, kept here because it is
Marin's method, and used nowhere else. No interval: Marin published none.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from fits.matched_progress import per_fraction_fits

MARIN_E = 1.5
TAIL_FROM, TAIL_TO, TAIL_OFFSET = 0.60, 0.80, 0.005


def snap(step, steps, per: int = 20) -> np.ndarray:
    return np.round(per * np.asarray(step, float) / np.asarray(steps, float)) / per


def snapped_points(curves: pd.DataFrame, steps: dict[str, int]) -> pd.DataFrame:
    """One point per (run, 5% fraction): curves has run, step, loss; the later of two that snap together."""
    pts = curves.assign(total=curves["run"].map(steps))
    pts = pts.assign(frac_snap=np.round(snap(pts["step"], pts["total"]), 2))
    return pts.sort_values("step").drop_duplicates(["run", "frac_snap"], keep="last")


def marin_forecast(curves: pd.DataFrame, steps: dict[str, int], flops_per_step: dict[str, float],
                   hero_flops_per_step: float, hero_steps: int, hero_batch_tokens: int | None = None,
                   E: float = MARIN_E) -> pd.DataFrame:
    """Marin's per-5% hero prediction: frac, step, tokens, loss, flops, A, alpha, and how each rung entered.

    curves: run, step, loss (eval points); steps and flops_per_step by run (Marin's figures).
    """
    pts = snapped_points(curves, steps)
    grid = np.round(np.arange(1, 21) / 20, 2)
    rows, used = [], []
    for run, total in steps.items():
        mine = pts[pts["run"] == run]
        if mine.empty:
            continue
        last = float(mine["frac_snap"].max())
        tail = mine[(mine["frac_snap"] >= TAIL_FROM - 1e-9) & (mine["frac_snap"] <= TAIL_TO + 1e-9)]
        slope, icpt = np.polyfit(tail["frac_snap"], tail["loss"], 1) if len(tail) >= 2 else (np.nan, np.nan)
        for g in grid:
            hit = mine[np.isclose(mine["frac_snap"], g)]
            if len(hit):
                loss, how = float(hit["loss"].iloc[0]), "observed"
            elif g > last and np.isfinite(slope):
                loss, how = float(slope * g + icpt + TAIL_OFFSET), "extrapolated"
            else:
                continue
            used.append({"run": run, "frac": float(g), "flops": flops_per_step[run] * total * g, "loss": loss, "how": how})
    table = pd.DataFrame(used)
    fits_ = per_fraction_fits(table, E, grid="frac")
    for _, f in fits_.iterrows():
        g = f["frac"]
        c = hero_flops_per_step * hero_steps * g
        status = table[np.isclose(table["frac"], g)].set_index("run")["how"].to_dict()
        rows.append({"frac": g, "step": g * hero_steps,
                     "tokens": g * hero_steps * hero_batch_tokens if hero_batch_tokens else np.nan,
                     "loss": E + float(np.exp(f["log_A"] - f["alpha"] * np.log(c))), "flops": c,
                     "A": float(np.exp(f["log_A"])), "alpha": float(f["alpha"]),
                     "runs": ",".join(f"{k}:{v}" for k, v in status.items())})
    return pd.DataFrame(rows)


def reference_points(curves: pd.DataFrame, rungs: pd.DataFrame) -> pd.DataFrame:
    """Progress points (fits.matched_progress_choice.Axis) of the reference rung curves on Marin's compute.

    curves: the reference rung_curves.csv (rung, step, frac, frac_snap, loss); rungs: rungs.csv.
    """
    total = dict(zip(rungs["rung"], rungs["flops_per_step_marin"] * rungs["steps"], strict=True))
    pts = curves.rename(columns={"rung": "run"}).assign(total_flops=lambda f: f["run"].map(total))
    return pts.assign(flops=pts["total_flops"] * pts["frac"])[["run", "step", "frac", "frac_snap", "flops", "total_flops", "loss"]]
