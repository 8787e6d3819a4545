"""The effect of a change, per size: two ladders, A (the baseline recipe) and B (the changed one), read
at each size both trained.

A ladder is a table of its runs' finals: ``size`` (the key two ladders share, e.g. a rung's name),
``seed`` (runs of one seed in both ladders saw the same data in the same order), ``flops`` and
``loss``. At each size both have:

- delta: B's mean final loss minus A's (negative: B is better);
- the compute-equivalent multiplier: the compute at which A's fitted compute law L(C) = E + A C^-alpha
  reaches B's loss, over B's compute (above 1: B reaches its loss on less compute than A would need).
  B's loss is read against A's at the same size: the target is A's law at A's compute times B's loss
  over A's, so A's own luck at that size (its residual about its law) cancels, and A against itself
  is exactly 1.

Bands come from the runs' seeds, redrawn (a parametric bootstrap, ``n_draws`` times): every size of A
moves by its seed luck, N(0, sigma_A^2 / its runs) in log loss, and A's law is refitted on each redraw
(fits.compute.refit_compute); B's size moves with A's where the two share seeds (paired: the same data
order, so B's luck is A's plus the paired difference's own, sigma_pair^2 / its pairs), else on its own,
N(0, sigma_B^2 / its runs). Each sigma is measured on replicas, else (one seed a size) on the sizes'
scatter, else is the caller's prior: fits.effect_noise states the rule, and ``Noise.text`` says which.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fits.effect_noise import Noise, noise, paired_differences
from fits.errors import InputError

# Above a millionfold (B's loss at or below A's fitted floor E) the multiplier says only "A's law
# never gets there": it is capped, and the entry flagged.
LOG_MULT_CAP = math.log(1e6)
COLUMNS = ("size", "seed", "flops", "loss")


@dataclass(frozen=True)
class SizeEffects:
    """The per-size effects (``table``, one row per shared size, smallest compute first) and their
    redraws, (n_draws, sizes) each: what the trend is fitted on."""

    table: pd.DataFrame
    log_mult_draws: np.ndarray
    delta_draws: np.ndarray
    law: dict  # A's compute law (E, A, alpha) fitted on all of A's runs
    noise: Noise


def check_runs(frame: pd.DataFrame, which: str) -> pd.DataFrame:
    """A ladder's runs as a table of size, seed, flops, loss, or InputError naming what is wrong."""
    missing = [c for c in COLUMNS if c not in frame.columns]
    if missing:
        raise InputError(f"ladder {which}: missing column(s) {', '.join(missing)}; give size, seed, flops and loss per run")
    out = frame[list(COLUMNS)].copy()
    for col in ("flops", "loss"):
        v = out[col].to_numpy(float)
        if not np.all(np.isfinite(v) & (v > 0)):
            raise InputError(f"ladder {which}: {col} must be finite and positive on every run")
    out["size"] = out["size"].astype(str)
    return out


def log_multiplier(E, A, alpha, loss, flops) -> np.ndarray:
    """log(C_A(loss) / flops): C_A(L) = (A / (L - E))^(1 / alpha) is the compute at which the law
    E + A C^-alpha reaches L; capped at +-LOG_MULT_CAP (L at or below E: A's law never reaches it)."""
    E, A, alpha, loss = (np.asarray(v, dtype=float) for v in (E, A, alpha, loss))
    gap = loss - E
    with np.errstate(divide="ignore", invalid="ignore"):
        log_c = np.where(gap > 0, (np.log(A) - np.log(np.where(gap > 0, gap, 1.0))) / alpha, np.inf)
    return np.clip(log_c - np.log(flops), -LOG_MULT_CAP, LOG_MULT_CAP)


def law_loss(E, A, alpha, flops) -> np.ndarray:
    return np.asarray(E) + np.asarray(A) * np.asarray(flops, dtype=float) ** -np.asarray(alpha)


def shared_sizes(a: pd.DataFrame, b: pd.DataFrame) -> list[str]:
    """The sizes both ladders ran, smallest B compute first; InputError when there is none."""
    shared = set(a["size"]) & set(b["size"])
    if not shared:
        raise InputError(f"the two ladders share no size (A: {', '.join(sorted(set(a['size'])))}; "
                         f"B: {', '.join(sorted(set(b['size'])))}); compare ladders whose rungs overlap")
    flops_b = b.groupby("size")["flops"].mean()
    return sorted(shared, key=lambda s: float(flops_b[s]))


def size_effects(a: pd.DataFrame, b: pd.DataFrame, *, prior_a: float | None = None, prior_b: float | None = None,
                 pin_E: float | None = None, n_draws: int = 200, seed: int = 0) -> SizeEffects:
    """The per-size effects of B against A, with ``n_draws`` redraws of the seeds' luck."""
    from fits.compute import fit_compute, refit_compute

    a, b = check_runs(a, "A"), check_runs(b, "B")
    sizes = shared_sizes(a, b)
    try:
        base = fit_compute(a["flops"].to_numpy(float), a["loss"].to_numpy(float), pin_E=pin_E)
    except ValueError as exc:
        raise InputError(f"ladder A: its compute law cannot be fitted ({exc})") from exc
    law = base.params

    def fit_b() -> dict:
        try:
            return fit_compute(b["flops"].to_numpy(float), b["loss"].to_numpy(float), pin_E=pin_E).params
        except ValueError as exc:
            raise InputError(f"ladder B: its compute law cannot be fitted ({exc})") from exc

    nz = noise(a, b, sizes, law, prior_a, prior_b, fit_b=fit_b)
    rng = np.random.default_rng(seed)

    # A's luck, one draw per size shared by its runs; A's law refitted on every redraw.
    a_sizes = sorted(set(a["size"]))
    runs_a = a.groupby("size")["loss"].count()
    eps_a = rng.normal(size=(n_draws, len(a_sizes))) * np.array([nz.sigma_a / math.sqrt(runs_a[s]) for s in a_sizes])
    col = {s: i for i, s in enumerate(a_sizes)}
    shifts = eps_a[:, [col[s] for s in a["size"]]]
    params = refit_compute(base, a["flops"].to_numpy(float), a["loss"].to_numpy(float) * np.exp(shifts))
    E_k, A_k, alpha_k = params[:, 0], params[:, 1], params[:, 2]

    pairs = paired_differences(a, b)
    rows, log_mult_draws, delta_draws = [], [], []
    for s in sizes:
        ra, rb = a[a["size"] == s], b[b["size"] == s]
        seeds = sorted(set(pairs.loc[pairs["size"] == s, "seed"])) if nz.sigma_pair is not None else []
        if seeds:  # paired: the difference is taken over the shared seeds only
            ra, rb = ra[ra["seed"].isin(seeds)], rb[rb["seed"].isin(seeds)]
        la, lb = ra["loss"].to_numpy(float), rb["loss"].to_numpy(float)
        flops_a, flops_b = float(ra["flops"].mean()), float(rb["flops"].mean())
        diff = float(np.mean(np.log(lb)) - np.mean(np.log(la)))
        target = diff + math.log(float(law_loss(law["E"], law["A"], law["alpha"], flops_a)))
        log_mult = float(log_multiplier(law["E"], law["A"], law["alpha"], math.exp(target), flops_b))
        e_a = eps_a[:, col[s]]
        if seeds:
            eta = rng.normal(size=n_draws) * nz.sigma_pair / math.sqrt(len(seeds))
        else:
            eta = rng.normal(size=n_draws) * nz.sigma_b / math.sqrt(len(lb)) - e_a
        target_k = diff + eta + np.log(law_loss(E_k, A_k, alpha_k, flops_a))
        log_mult_draws.append(log_multiplier(E_k, A_k, alpha_k, np.exp(target_k), flops_b))
        delta_draws.append(lb.mean() * np.exp(e_a + eta) - la.mean() * np.exp(e_a))
        rows.append({"size": s, "flops_a": flops_a, "flops_b": flops_b, "loss_a": float(la.mean()),
                     "loss_b": float(lb.mean()), "runs_a": int(len(la)), "runs_b": int(len(lb)), "pairs": len(seeds),
                     "delta": float(lb.mean() - la.mean()), "log_multiplier": log_mult,
                     "capped": abs(log_mult) >= LOG_MULT_CAP})
    return SizeEffects(pd.DataFrame(rows), np.array(log_mult_draws).T, np.array(delta_draws).T, law, nz)


def hero_effect(law: dict, loss_a: float, flops_a: float, loss_b: float, flops_b: float) -> dict:
    """The effect measured on two heroes, read as a size is (A's hero is the pair of B's)."""
    target = math.log(loss_b / loss_a) + math.log(float(law_loss(law["E"], law["A"], law["alpha"], flops_a)))
    log_mult = float(log_multiplier(law["E"], law["A"], law["alpha"], math.exp(target), flops_b))
    return {"loss_a": loss_a, "loss_b": loss_b, "flops_a": flops_a, "flops_b": flops_b,
            "delta": loss_b - loss_a, "multiplier": math.exp(log_mult)}
