"""The effect's trend with scale, carried to a target (the hero), its verdict and its backtest.

The trend is a weighted least-squares line through the per-size effects (fits.effect) against
log10 compute: once for the log multiplier, once for delta, each size weighted by the inverse of its
redraws' variance. The line's parameter covariance is that of the same line fitted to every redraw
(the sizes' effects share A's law, so they move together: the redraws carry that), scaled up by the
residuals' chi^2 per degree of freedom when the sizes scatter about the line more than their seeds
explain (then the quantile is Student's t on n - 2 degrees of freedom, else the normal's). Where the
seed noise itself was measured on the sizes' scatter (one seed a size, fits.effect_noise), the quantile
is Student's t at that measurement's degrees of freedom: the band rests on a sigma known that well.

The verdict rule (tests/fits/test_effect.py checks each branch):
- direction: B's "gain" when the weighted mean log multiplier's ``level`` interval lies above 0, its
  "cost" when below, "none" when it contains 0 (the trend words then read as for a gain);
- trend: the slope of the log multiplier per decade of compute, with its ``level`` interval:
  above 0, the gain "grows" (a cost "shrinks"); below 0, the gain "shrinks" (a cost "grows");
  containing 0, it "holds";
- at the target: the multiplier's band excludes 1 on the direction's side: "shown"; contains 1:
  "not shown"; lies wholly on the other side: "reversed".
"""

from __future__ import annotations

import math

import numpy as np

from fits.effect import LOG_MULT_CAP, SizeEffects, hero_effect, law_loss, size_effects
from fits.errors import InputError

VARIANCE_FLOOR = 1e-14  # a size whose redraws do not move (A against itself) still gets a finite weight


def _exp(log_multiplier: float) -> float:
    """A multiplier from its log, capped as fits.effect caps them (a band far out can run past any float)."""
    return math.exp(min(max(float(log_multiplier), -LOG_MULT_CAP), LOG_MULT_CAP))


def fit_trend(x: np.ndarray, y: np.ndarray, draws: np.ndarray, level: float, noise_dof: int | None = None) -> dict:
    """The weighted line y = b0 + b1 (x - x_mean) with its covariance; x_mean is the weighted mean of x.
    ``noise_dof``: the degrees of freedom of the sigma the redraws carry, where it was measured on the sizes'
    scatter (fits.effect_noise): the quantile is then Student's t at them (or at n - 2, if fewer)."""
    from scipy import stats

    var = np.maximum(draws.var(axis=0, ddof=1), VARIANCE_FLOOR) if len(draws) > 1 else np.ones_like(y)
    w = 1.0 / var
    centre = float(np.sum(w * x) / np.sum(w))
    X = np.column_stack([np.ones_like(x), x - centre])
    P = np.linalg.solve(X.T @ (w[:, None] * X), (X * w[:, None]).T)  # (2, sizes): y -> (b0, b1)
    beta = P @ y
    cov = np.cov((draws @ P.T).T) if len(draws) > 2 else np.zeros((2, 2))
    resid = y - X @ beta
    chi2 = float(np.sum(w * resid ** 2))
    dof = len(x) - 2
    scale = max(1.0, chi2 / dof) if dof > 0 else 1.0
    t_dofs = [d for d in (noise_dof, dof if scale > 1.0 else None) if d]
    q = stats.t.ppf(0.5 + level / 2, min(t_dofs)) if t_dofs else stats.norm.ppf(0.5 + level / 2)
    return {"beta": beta, "cov": cov * scale, "centre": centre, "q": float(q), "chi2": chi2, "dof": dof,
            "scale": scale, "t_dof": min(t_dofs) if t_dofs else None}


def at(trend: dict, x: float) -> tuple[float, float, float]:
    """(value, lower, upper) of the trend line at x, its band from the line's covariance."""
    v = np.array([1.0, x - trend["centre"]])
    mean = float(v @ trend["beta"])
    sd = math.sqrt(max(float(v @ trend["cov"] @ v), 0.0))
    return mean, mean - trend["q"] * sd, mean + trend["q"] * sd


def slope_word(lower: float, upper: float, gain: bool) -> str:
    if lower > 0:
        return "grows" if gain else "shrinks"
    if upper < 0:
        return "shrinks" if gain else "grows"
    return "holds"


def hero_word(lower: float, upper: float, gain: bool) -> str:
    """Whether the log multiplier's band at the target shows B's effect: shown, not shown, or reversed."""
    if lower <= 0 <= upper:
        return "not shown"
    return "shown" if (lower > 0) == gain else "reversed"


def trends(effects: SizeEffects, level: float) -> tuple[dict, dict]:
    """(the log multiplier's trend, delta's trend) against log10 of B's compute."""
    x = np.log10(effects.table["flops_b"].to_numpy(float))
    dof = effects.noise.dof
    mult = fit_trend(x, effects.table["log_multiplier"].to_numpy(float), effects.log_mult_draws, level, dof)
    delta = fit_trend(x, effects.table["delta"].to_numpy(float), effects.delta_draws, level, dof)
    return mult, delta


def trend_doc(mult: dict, delta: dict) -> dict:
    mean, mean_sd = float(mult["beta"][0]), math.sqrt(max(float(mult["cov"][0, 0]), 0.0))
    mean_lo, mean_hi = mean - mult["q"] * mean_sd, mean + mult["q"] * mean_sd
    direction = "none" if mean_lo <= 0 <= mean_hi else "gain" if mean > 0 else "cost"
    slope, slope_sd = float(mult["beta"][1]), math.sqrt(max(float(mult["cov"][1, 1]), 0.0))
    lo, hi = slope - mult["q"] * slope_sd, slope + mult["q"] * slope_sd
    d_slope, d_sd = float(delta["beta"][1]), math.sqrt(max(float(delta["cov"][1, 1]), 0.0))
    return {"direction": direction, "verdict": slope_word(lo, hi, direction != "cost"),
            "log_multiplier_per_decade": slope, "lower": lo, "upper": hi, "mean_multiplier": _exp(mean),
            "mean_lower": _exp(mean_lo), "mean_upper": _exp(mean_hi), "centre_log10_flops": mult["centre"],
            "delta_per_decade": d_slope, "delta_lower": d_slope - delta["q"] * d_sd, "delta_upper": d_slope + delta["q"] * d_sd,
            "chi2": mult["chi2"], "dof": mult["dof"], "scale": mult["scale"], "t_dof": mult["t_dof"]}


def at_target(mult: dict, law: dict, flops_b: float, flops_a: float | None = None, pair_sigma: float = 0.0) -> dict:
    """The multiplier's trend at B's compute ``flops_b`` and the loss difference it implies on A's law:
    B's loss is A's law at the multiplier times B's compute, A's is A's law at ``flops_a`` (default the
    same compute); delta's band is the multiplier's band mapped the same way (delta falls as it rises).

    ``pair_lower``/``pair_upper`` (and ``pair_delta_*``) widen the band by one pair of runs' own seed
    luck, ``pair_sigma`` in log(L_B / L_A): where one measured pair of heroes should land. That luck
    moves the log multiplier L / (alpha (L - E)) times as much (A's law's slope at B's loss)."""
    m, m_lo, m_hi = at(mult, math.log10(flops_b))
    flops_a = flops_b if flops_a is None else flops_a
    loss_a = float(law_loss(law["E"], law["A"], law["alpha"], flops_a))

    def delta(log_m: float) -> float:
        return float(law_loss(law["E"], law["A"], law["alpha"], flops_b * _exp(log_m))) - loss_a

    q = mult["q"]
    loss_b = loss_a + delta(m)
    slope = loss_b / (law["alpha"] * (loss_b - law["E"])) if loss_b > law["E"] else math.inf
    sd = (m_hi - m) / q if q > 0 else 0.0
    sd_pair = math.hypot(sd, slope * pair_sigma) if pair_sigma > 0 else sd
    d_sd = (delta(m_lo) - delta(m_hi)) / (2 * q) if q > 0 else 0.0
    d_sd_pair = math.hypot(d_sd, loss_b * pair_sigma)
    return {"flops": flops_b, "multiplier": _exp(m), "lower": _exp(m_lo), "upper": _exp(m_hi),
            "delta": delta(m), "delta_lower": delta(m_hi), "delta_upper": delta(m_lo),
            "pair_lower": _exp(m - q * sd_pair), "pair_upper": _exp(m + q * sd_pair),
            "pair_delta_lower": delta(m) - q * d_sd_pair, "pair_delta_upper": delta(m) + q * d_sd_pair,
            "pair_sigma": pair_sigma}


def _x(v: float) -> str:
    return f"{v:.2f}" if v < 1000 else f"{v:.3g}"


def verdict(trend: dict, hero: dict | None, largest: dict) -> str:
    """One line: the direction, how it moves with scale, and whether the hero's band shows it."""
    word = trend["verdict"]
    band = f"{_x(hero['multiplier'])}x [{_x(hero['lower'])}, {_x(hero['upper'])}]" if hero else ""
    if trend["direction"] == "none":
        mean = f"{_x(trend['mean_multiplier'])}x [{_x(trend['mean_lower'])}, {_x(trend['mean_upper'])}]"
        moves = "" if word == "holds" else f", though its multiplier {word} with scale"
        where = f"; at the hero: {band}" if hero else "; no hero to carry it to"
        return f"B shows no effect across the ladder on average ({mean}){moves}{where}"
    what = f"B's {trend['direction']}"
    if hero is None:
        return (f"{what} {word} across the ladder ({_x(largest['multiplier'])}x at its largest shared size); "
                "no hero to carry it to")
    shown = hero_word(math.log(hero["lower"]), math.log(hero["upper"]), trend["direction"] == "gain")
    if shown == "shown":
        return f"{what} {word} at the hero: {band}" if word == "holds" else \
            f"{what} {word} with scale and is still shown at the hero: {band}"
    if shown == "reversed":
        return f"{what} {word} with scale and reverses at the hero: {band}"
    lead = f"{what} holds across the ladder but" if word == "holds" else f"{what} {word} with scale and"
    return f"{lead} is not shown at the hero: {band}"


def size_rows(effects: SizeEffects, level: float) -> list[dict]:
    lo_q, hi_q = 50 * (1 - level), 50 * (1 + level)
    rows = []
    for i, r in enumerate(effects.table.to_dict("records")):
        m, d = effects.log_mult_draws[:, i], effects.delta_draws[:, i]
        rows.append({**{k: v for k, v in r.items() if k != "log_multiplier"},
                     "multiplier": _exp(r["log_multiplier"]), "lower": _exp(np.percentile(m, lo_q)),
                     "upper": _exp(np.percentile(m, hi_q)), "delta_lower": float(np.percentile(d, lo_q)),
                     "delta_upper": float(np.percentile(d, hi_q))})
    return rows


def analyse(a, b, *, hero_flops: tuple[float, float] | None = None, heroes: tuple | None = None, prior_a: float | None = None,
            prior_b: float | None = None, pin_E: float | None = None, level: float = 0.9, n_draws: int = 200,
            seed: int = 0) -> dict:
    """The whole effect of B against A: per size, the trend, at the hero (``hero_flops``: B's hero's
    compute and A's), the backtest, the heroes' measured effect (``heroes`` = (loss_a, flops_a, loss_b, flops_b)
    when both were trained) and the verdict line."""
    kw = {"prior_a": prior_a, "prior_b": prior_b, "pin_E": pin_E, "n_draws": n_draws, "seed": seed}
    effects = size_effects(a, b, **kw)
    per_size = size_rows(effects, level)
    if len(per_size) < 2:
        raise InputError(f"the two ladders share one size ({per_size[0]['size']}): a trend with scale needs two; "
                         "compare ladders whose rungs overlap at two sizes or more")
    mult, delta = trends(effects, level)
    trend = trend_doc(mult, delta)
    flops = effects.table["flops_b"].to_numpy(float)
    grid = np.geomspace(flops.min(), max(flops.max(), hero_flops[0] if hero_flops else 0.0), 40)
    trend["curve"] = [{"flops": float(c), **dict(zip(("multiplier", "lower", "upper"),
                                                     (_exp(v) for v in at(mult, math.log10(c))), strict=True))}
                      for c in grid]
    nz = effects.noise
    pair_sigma = nz.sigma_pair if nz.sigma_pair is not None else math.hypot(nz.sigma_a, nz.sigma_b)
    hero = at_target(mult, effects.law, *hero_flops, pair_sigma=pair_sigma) if hero_flops else None
    if hero is not None:
        hero["shown"] = hero_word(math.log(hero["lower"]), math.log(hero["upper"]), trend["direction"] != "cost")
    doc = {"per_size": per_size, "trend": trend, "at_hero": hero, "noise": effects.noise.as_dict(),
           "law_a": effects.law, "level": level, "n_draws": n_draws,
           "backtest": backtest(a, b, effects, level, kw), "heroes": None}
    if heroes is not None:
        measured = hero_effect(effects.law, *heroes)
        if hero is not None:  # one pair of heroes carries its own seed luck: set against the pair band
            measured["inside"] = hero["pair_lower"] <= measured["multiplier"] <= hero["pair_upper"]
            measured["delta_inside"] = hero["pair_delta_lower"] <= measured["delta"] <= hero["pair_delta_upper"]
            measured["inside_effect_band"] = hero["lower"] <= measured["multiplier"] <= hero["upper"]
        doc["heroes"] = measured
    doc["verdict"] = verdict(trend, hero, per_size[-1])
    return doc


def backtest(a, b, effects: SizeEffects, level: float, kw: dict) -> dict:
    """The effect at the largest shared size predicted from the smaller ones alone (A's law refitted
    without the sizes at or above it), beside the effect measured there."""
    table = effects.table
    if len(table) < 3:
        return {"ok": False, "reason": f"{len(table)} shared sizes: the backtest needs 3 (2 to fit the trend, 1 to predict)"}
    last = table.iloc[-1]
    a_small = a[a["flops"] < last["flops_a"] * (1 - 1e-9)]
    b_small = b[b["size"].astype(str).isin(set(table["size"].iloc[:-1]))]
    try:
        small = size_effects(a_small, b_small, **kw)
    except (InputError, ValueError) as exc:
        return {"ok": False, "reason": f"the smaller sizes alone cannot be analysed ({exc})"}
    mult, _ = trends(small, level)
    nz = effects.noise  # the measured size's own luck: its pairs' (or runs') mean
    luck = (nz.sigma_pair / math.sqrt(last["pairs"]) if last["pairs"] else
            math.hypot(nz.sigma_a / math.sqrt(last["runs_a"]), nz.sigma_b / math.sqrt(last["runs_b"])))
    predicted = at_target(mult, small.law, float(last["flops_b"]), float(last["flops_a"]), pair_sigma=luck)
    measured = {"multiplier": _exp(float(last["log_multiplier"])), "delta": float(last["delta"])}
    return {"ok": True, "size": str(last["size"]), "fit_on": list(small.table["size"]), "predicted": predicted,
            "measured": measured,
            # the measured size carries its own seeds' luck: set against the band widened by it
            "inside": predicted["pair_lower"] <= measured["multiplier"] <= predicted["pair_upper"],
            "delta_inside": predicted["pair_delta_lower"] <= measured["delta"] <= predicted["pair_delta_upper"],
            "multiplier_error": predicted["multiplier"] / measured["multiplier"] - 1.0,
            "delta_error": predicted["delta"] - measured["delta"]}
