"""Live forecast bands for a followed hero, calibrated by horizon (how far past the snapshot a point is).

A snapshot at fraction a forecasts the point at fraction g > a; its horizon is h = ln(g / a). The
band's log sigma at h is the largest of three measured errors at that horizon, with the hero's own
scatter about the refit added:

  rungs   every rung snapshot backtest (a larger rung seen up to a', refitted with smaller rungs,
          scored on its later points) at every a' on a 5% grid, pooled by horizon: RMS per horizon
          bin of the error per sqrt(decade) of the pair's extrapolation (DECADE_POWER), never falling
          as h grows (running max), extrapolated in proportion to h past the longest horizon
          measured; at the hero, times sqrt(the hero's decades past the largest rung);
  own     the hero's own earlier snapshots scored on the points that came after them, the same way
          (held past the longest horizon measured): a live forecast may never be more confident than
          it has been right;
  prior   the rungs-only band's sigma at g, scaled to the horizon by the same linear-in-decades rule
          the prior band uses from the largest rung to the hero (log10(g / a) / decades).

Why per sqrt(decade): the longest rung pair (d768 + d1024 -> d2048 on Marin's rungs, 45x) misses most
at its early snapshots, where the scale extrapolation dominates, and a profile pooled without its
distance held 63% of its points. Powers 0, 0.5 and 1 were compared leave-one-out on the rung pairs
(each pair's band from the other pairs only; `python -m bench follow` prints the table): 0.5 put the
pooled coverage closest to the claimed level, 1 (the prior band's own rule) left the shorter pairs
below it.

The earlier rule calibrated the band on rung snapshots at the hero's own a only (a short horizon
for late snapshots) and shrank it as the hero's points accrued; on the 535B hero's hidden points
after step 108,000 those bands held 23-60% at 90% (issue 47).

A declared change (hero.changes) is carried as follows: until CHANGE_POINTS points after it are in,
the forecast past it keeps the snapshot's centre but its band is at least the rungs-only band (the
one band that held on the 535B hero's points after its mix switch: 100%, where the refits held
23-60%); from then on the refit uses only the hero's points after the change (re-anchored there),
with the horizon band above. Where rungs replay the change (a variant of the ladder switching at the same
fraction) and have finished, the effect they measured is carried past it instead of the widened band
(ladder.analysis.change_effect).
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

SNAP_GRID = np.round(np.arange(0.05, 0.951, 0.05), 2)
# Horizon bins (natural log of g / a): edges spaced so every bin holds rung pairs on Marin's 4 rungs.
H_EDGES = np.array([0.0, 0.05, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0])
CHANGE_POINTS = 3
DECADE_POWER = 0.5  # the rungs' snapshot error grows as decades ** this (chosen leave-one-out on the rung pairs)


def _refit(points: pd.DataFrame, fit_fn, total: float, seen: pd.DataFrame, at: float):
    from fits.matched_progress_forecast import _refit_with_target

    return _refit_with_target(points, fit_fn, total, seen, at)


def horizon_profile(h: np.ndarray, err: np.ndarray, min_count: int = 3) -> dict:
    """RMS |log error| per horizon bin, as a running max over h (a band never narrows further ahead)."""
    rows = []
    for lo, hi in zip(H_EDGES[:-1], H_EDGES[1:], strict=True):
        sel = (h > lo) & (h <= hi)
        if sel.sum() >= min_count:
            rows.append({"h_lo": float(lo), "h_hi": float(hi), "n": int(sel.sum()),
                         "rms": float(np.sqrt(np.mean(err[sel] ** 2)))})
    run = 0.0
    for r in rows:
        run = max(run, r["rms"])
        r["sigma"] = run
    return {"bins": rows, "n": int(h.size)}


def profile_sigma(profile: dict | None, h: np.ndarray, extrapolate: bool = True) -> np.ndarray:
    """The profile's sigma at horizons h: the bin's running max; past the last bin, in proportion to h
    (extrapolate) or held there."""
    out = np.zeros_like(h, dtype=float)
    bins = (profile or {}).get("bins") or []
    if not bins:
        return out
    for r in bins:
        out = np.where((h > r["h_lo"]) & (h <= r["h_hi"]), r["sigma"], out)
    first, last = bins[0], bins[-1]
    out = np.where((h > 0) & (h <= first["h_lo"]), first["sigma"], out)
    # between measured bins (a bin too thin to count) the next lower bin's sigma holds
    for r in bins:
        out = np.where((h > r["h_hi"]) & (out == 0), r["sigma"], out)
    return np.where(h > last["h_hi"], last["sigma"] * (h / last["h_hi"] if extrapolate else 1.0), out)


def rung_horizon_errors(points: pd.DataFrame, fit_fn, pairs: list[tuple[list[str], str]]) -> pd.DataFrame:
    """Every rung snapshot backtest's later points: pair, at, frac, horizon h, log error (predicted / actual)."""
    rows = []
    for train, target in pairs:
        tp = points[points["run"] == target].sort_values("frac")
        total = float(tp["total_flops"].iloc[0])
        decades = math.log10(total / float(points[points["run"].isin(train)]["total_flops"].max()))
        for at in SNAP_GRID:
            later = tp[tp["frac"] > at + 1e-9]
            if later.empty or (tp["frac"] <= at + 1e-9).sum() < 1:
                continue
            try:
                res, _ = _refit(points[points["run"].isin(train)], fit_fn, total, tp[["frac", "loss"]], float(at))
            except (ValueError, np.linalg.LinAlgError):
                continue
            f = later["frac"].to_numpy(float)
            e = np.log(res.model().predict(f, total * f)) - np.log(later["loss"].to_numpy(float))
            rows += [{"predict": target, "fit_on": ",".join(train), "decades": decades, "at": float(at), "frac": float(g),
                      "h": math.log(g / at), "log_error": float(x)} for g, x in zip(f, e, strict=True)]
    return pd.DataFrame(rows, columns=["predict", "fit_on", "decades", "at", "frac", "h", "log_error"])


def rung_errors_profile(errs: pd.DataFrame, power: float = DECADE_POWER) -> dict:
    """The horizon profile of rung snapshot errors per decade ** power of each pair's extrapolation; profile_sigma
    of it times decades ** power is the error expected that far past the largest rung (decade_power says which)."""
    scale = np.maximum(errs["decades"].to_numpy(float), 1e-3) ** power
    prof = horizon_profile(errs["h"].to_numpy(float), np.abs(errs["log_error"].to_numpy(float)) / scale)
    prof["decade_power"] = power
    return prof


def rungs_sigma(profile: dict | None, h: np.ndarray, decades: float) -> np.ndarray:
    """The rungs' part of a band at horizons h, `decades` past the largest rung (a profile without decade_power,
    written before it, is per pair as measured)."""
    power = float((profile or {}).get("decade_power") or 0.0)
    return profile_sigma(profile, h) * max(decades, 1e-3) ** power


def own_track(snapshots: list[dict], hero: pd.DataFrame) -> pd.DataFrame:
    """The hero's earlier snapshots against its points after each: at, frac, h, log error.

    snapshots: [{"at_frac", "curve": DataFrame(frac, loss)}]; hero: frac, loss."""
    rows = []
    for s in snapshots:
        at, curve = float(s["at_frac"]), s["curve"]
        later = hero[hero["frac"] > at + 1e-12]
        if later.empty:
            continue
        f = later["frac"].to_numpy(float)
        e = np.log(np.interp(f, curve["frac"], curve["loss"])) - np.log(later["loss"].to_numpy(float))
        rows += [{"at": at, "frac": float(g), "h": math.log(g / at), "log_error": float(x)}
                 for g, x in zip(f, e, strict=True)]
    return pd.DataFrame(rows, columns=["at", "frac", "h", "log_error"])


def live_sigma(fracs: np.ndarray, at: float, prior_sigma: np.ndarray, decades: float, rungs: dict | None,
               own: dict | None, noise: float, prior_scaled: bool = True) -> tuple[np.ndarray, dict]:
    """The snapshot's log sigma at each of `fracs` past `at` (noise alone at or before it) and its parts.

    prior_scaled: whether the prior band scaled to the horizon is a part (the law's own extrapolation
    band; a centre that is not the law, ladder.analysis.shape_centre, leaves it out)."""
    h = np.log(np.maximum(fracs / at, 1.0))
    sig_rungs = rungs_sigma(rungs, h, decades)
    # the hero's own record is held past its longest horizon: scaling a short-horizon miss (one bad eval point)
    # out to the end of the run blew a snapshot's band up to +-100%; the rungs' part grows with h there
    sig_own = profile_sigma(own, h, extrapolate=False)
    sig_prior = prior_sigma * np.log10(np.maximum(fracs / at, 1.0)) / max(decades, 1e-3) * float(prior_scaled)
    ahead = np.sqrt(np.maximum.reduce([sig_rungs, sig_own, sig_prior]) ** 2 + noise ** 2)
    # the rungs-only band bounds the rungs' part; the hero's own record may widen past it
    ahead = np.maximum(np.minimum(ahead, np.maximum(prior_sigma, noise)), sig_own)
    # never narrower than the centre's own error measured on the rungs at that horizon (not extrapolated past
    # the longest horizon measured: there the prior band's bound above holds)
    power = float((rungs or {}).get("decade_power") or 0.0)
    ahead = np.maximum(ahead, profile_sigma(rungs, h, extrapolate=False) * max(decades, 1e-3) ** power)
    sigma = np.where(fracs > at + 1e-12, ahead, noise)
    return sigma, {"sigma_rungs": sig_rungs, "sigma_own": sig_own, "sigma_prior_scaled": sig_prior}
