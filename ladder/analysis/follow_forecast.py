"""A followed hero's forecast snapshot: the chosen curve law refitted with the hero's points so far, its
band by horizon (ladder.analysis.follow_bands), and declared changes carried (hero.changes): by the effect
rungs that replay the change measured (ladder.analysis.change_effect), else by the band-widening rule."""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pandas as pd

from ladder.analysis.change_carry import carry, effect_at
from ladder.analysis.follow_bands import (
    CHANGE_POINTS,
    horizon_profile,
    live_sigma,
    own_track,
    profile_sigma,
    rung_errors_profile,
    rung_horizon_errors,
)
from ladder.analysis.shape_centre import carried, largest_run, shape_errors, shape_profile
from ladder.outputs import layout


class NoForecast(ValueError):
    """The ladder has no rungs-only curve forecast to follow the hero against (one line for the user)."""


@dataclass(frozen=True)
class Context:
    """What every snapshot of one followed hero shares: the law, its rung points and the prior curve."""

    axis: object  # fits.matched_progress_choice.Axis
    fit_fn: object
    prior: pd.DataFrame  # step, tokens, frac, loss, lower, upper (rungs only)
    level: float
    decades: float
    total_steps: int
    batch_tokens: int
    # the declared changes' effects measured on rungs that replay them (ladder.analysis.change_effect), carried
    # into the forecast past each change in place of the band-widening rule; empty: none measured
    change_effects: tuple = ()

    @property
    def prior_sigma(self) -> np.ndarray:
        return np.log(self.prior["upper"].to_numpy(float) / self.prior["loss"].to_numpy(float)) / self.z

    @property
    def z(self) -> float:
        from scipy.stats import norm

        return float(norm.ppf(0.5 + self.level / 2))


def load_context(fit_dir: str | None, predict_dir: str | None, total_steps: int, batch_tokens: int,
                 dep_dirs: dict[str, str] | None = None, rungs: list[str] | None = None) -> Context:
    """The fit's chosen curve law on imported rung curves; for rungs trained here (no such law: they have
    whole train curves), the curve law chosen here by the same backtests on their eval points."""
    from fits.matched_progress_choice import CANDIDATES
    from ladder.analysis.curve_laws import POINTS_CSV, axes

    doc = layout.read_json(Path(fit_dir) / layout.FIT, {}) if fit_dir else {}
    progress = (doc or {}).get("progress") or {}
    curve_path = Path(predict_dir) / layout.HERO_CURVE if predict_dir else None
    pred = (layout.read_json(Path(predict_dir) / layout.PREDICTION, {}) or {}) if predict_dir else {}
    if curve_path is None or not curve_path.exists():
        raise NoForecast("the ladder has no forecast of the hero yet: run `ladder submit SPEC` first (with rungs "
                         "trained, or their eval curves imported with `ladder import-results`)")
    prior = pd.read_csv(curve_path)
    if "frac" not in prior:
        prior = prior.assign(frac=prior["step"] / total_steps)
    level = float(((pred.get("hero") or {}).get("level")) or 0.9)
    if progress.get("chosen"):
        points = pd.read_csv(Path(fit_dir) / POINTS_CSV)
        axis = next(a for a in axes(points, progress["hero_totals"]) if a.name == progress["chosen"]["axis"])
        return Context(axis=axis, fit_fn=CANDIDATES[progress["chosen"]["candidate"]], prior=prior, level=level,
                       decades=float(progress["forecast"]["decades"]), total_steps=total_steps, batch_tokens=batch_tokens)
    return _trained_context(prior, pred, level, total_steps, batch_tokens, dep_dirs or {}, rungs or [])


def _trained_context(prior: pd.DataFrame, pred: dict, level: float, total_steps: int, batch_tokens: int,
                     dep_dirs: dict[str, str], rungs: list[str]) -> Context:
    from fits.matched_progress_choice import CANDIDATES, choose, sizes
    from ladder.analysis.curve_laws import axes
    from ladder.analysis.domain_forecasts import trained_points

    hero_flops = (pred.get("hero") or {}).get("flops")
    points = trained_points(dep_dirs, rungs)
    if not hero_flops or points.empty or len(sizes(points, "total_ours")) < 3:
        raise NoForecast("the ladder has no curve forecast to follow against: it needs 3 or more rung sizes with eval "
                         "points (trained here, or imported with `ladder import-results`) and `ladder submit SPEC`")
    cands = axes(points, {"ours": float(hero_flops)})
    _, best = choose(cands)
    if best is None:
        raise NoForecast("no curve law could be backtested on the rungs' eval points; add rungs or evals")
    axis = next(a for a in cands if a.name == best["axis"])
    decades = math.log10(float(hero_flops) / float(axis.points["total_flops"].max()))
    return Context(axis=axis, fit_fn=CANDIDATES[best["candidate"]], prior=prior, level=level, decades=decades,
                   total_steps=total_steps, batch_tokens=batch_tokens)


def rung_profile(ctx: Context) -> dict:
    """The rungs' snapshot error by horizon (follow_bands), over every calibration pair; with the shape centre's
    (shape_centre) and the backtests that choose between the two centres (choose_centre)."""
    from fits.matched_progress_choice import below, calibration_pairs, sizes

    points = ctx.axis.points
    errs = rung_horizon_errors(points, ctx.fit_fn, calibration_pairs(points))
    prof = rung_errors_profile(errs)
    prof["hero_decades"] = ctx.decades  # how far past the largest rung the hero is: the profile's scale there
    prof["pairs"] = int(errs[["predict", "fit_on"]].drop_duplicates().shape[0]) if not errs.empty else 0
    shape_errs = shape_errors(points)
    prof["shape"] = shape_profile(shape_errs)
    # The choice is made on the one backtest made as the hero's forecast is: the largest rung forecast from the
    # others (the law refitted on all of them, the shape of the next largest). Pooled over every pair, the law's
    # backtests from two rungs understate what it does from all of them: on Marin's rungs the pooled profile
    # chose the shape, which then missed the 535B hero by far more than the law (experiments/follow_record.md).
    # With replicas, the largest size's every run from the smaller sizes (never from its own size's replica).
    groups = sizes(points)
    largest, smaller = groups[-1], below(groups, len(groups) - 1)
    law_last = errs[errs["predict"].isin(largest) & (errs["fit_on"] == ",".join(smaller))]
    shape_last = shape_errs[shape_errs["predict"].isin(largest)
                            & shape_errs["fit_on"].isin(groups[-2] if len(groups) > 1 else [])]
    first = float(points[points["run"] == largest_run(points)]["frac"].min())
    prof["choice"] = {name: horizon_profile(e["h"].to_numpy(float), np.abs(e["log_error"].to_numpy(float)))
                      for name, e in (("law", law_last), ("shape", shape_last))}
    prof["choice"]["shape_from_frac"] = first  # the largest rung's first point: before it its shape is not measured
    return prof


def choose_centre(rungs: dict, at: float) -> tuple[str, dict]:
    """The candidate centre with the smaller error at the final's horizon from `at` on the largest rung's
    backtest (rung_profile's "choice"): "law" (the refitted curve law) or "shape" (shape_centre). Chosen on
    the rungs only, never on the hero it forecasts; a profile cached before the shape rule has the law alone,
    and the shape is no candidate before the largest rung's first point (its shape there is not measured)."""
    choice = rungs.get("choice") or {}
    if at + 1e-9 < float(choice.get("shape_from_frac", math.inf)):
        return "law", {}
    h = np.array([math.log(1.0 / max(at, 1e-9))])
    errs = {name: float(profile_sigma(choice[name], h)[0]) for name in ("law", "shape") if (choice[name] or {}).get("bins")}
    return (min(errs, key=lambda k: errs[k]) if errs else "law"), errs


def snapshot(ctx: Context, hero: pd.DataFrame, at_step: int, earlier: list[dict], rungs: dict,
             changes: tuple = ()) -> tuple[pd.DataFrame, dict]:
    """The forecast at `at_step` from the hero's points up to it (hero: step, frac, loss).

    earlier: the hero's earlier snapshots [{at_frac, curve}], scored here on the points after them.
    Returns the curve (step, tokens, frac, loss, lower, upper) over the whole run and a summary. The one rule
    of every hero's live forecast: followed (ladder.analysis.follow), trained here (trained_live) and
    imported (ladder.analysis.snapshots replays it over the recorded points)."""
    at = at_step / ctx.total_steps
    seen = hero[hero["step"] <= at_step]
    change = _last_change(changes, at_step)  # the latest change the hero has passed
    after = seen[seen["step"] >= change.step] if change is not None else seen
    reanchored = change is not None and len(after) >= CHANGE_POINTS
    fit_on = after if reanchored else seen
    res, own_pts = _refit_points(ctx, fit_on, at)
    fracs = ctx.prior["frac"].to_numpy(float)
    central = res.model().predict(fracs, ctx.axis.target_flops * fracs)
    own_err = np.log(res.model().predict(own_pts["frac"], own_pts["flops"])) - np.log(own_pts["loss"].to_numpy(float))
    noise = float(np.sqrt(np.mean(own_err ** 2))) if own_err.size else 0.0
    centre_rule, centre_errors = choose_centre(rungs, at) if not seen.empty else ("law", {})
    profile = rungs
    if centre_rule == "shape":
        last = seen.sort_values("step").iloc[-1]
        central = carried(ctx.axis.points, largest_run(ctx.axis.points), float(last["frac"]), float(last["loss"]), fracs)
        profile = rungs["shape"]
    track = own_track([e for e in earlier if e["at_frac"] < at - 1e-12], seen[["frac", "loss"]])
    own = horizon_profile(track["h"].to_numpy(float), np.abs(track["log_error"].to_numpy(float)), min_count=2)
    sigma, parts = live_sigma(fracs, at, ctx.prior_sigma, ctx.decades, profile, own, noise, prior_scaled=centre_rule == "law")
    rule = ("horizon: max(rung snapshots, the hero's own record, the prior scaled) (+) own scatter" if centre_rule == "law"
            else "horizon: max(the shape's rung snapshots, the hero's own record) (+) own scatter")
    if own_pts.empty and centre_rule == "law":
        sigma, rule = ctx.prior_sigma, "no own points in the law's range yet: the prior band"
    if reanchored:
        rule += f"; re-anchored on the {len(after)} points after the change at step {change.step}"
    carried_effects = []
    for c in changes:  # a change not yet seen CHANGE_POINTS times: its replayed rungs' effect, else at least the prior band
        n_after = int((seen["step"] >= c.step).sum())
        if n_after >= CHANGE_POINTS:
            continue
        effect = effect_at(ctx.change_effects, c.step)
        if effect is not None:
            central, sigma = carry(fracs, central, sigma, effect)
            carried_effects.append({k: effect[k] for k in ("step", "variant", "ratio", "lower", "upper", "sigma")})
            rule += (f"; past the change at step {c.step} ({n_after} of {CHANGE_POINTS} points after it): its effect "
                     f"measured on the replayed rungs carried, {effect['text']}")
            continue
        sigma = np.where(fracs > c.step / ctx.total_steps, np.maximum(sigma, ctx.prior_sigma), sigma)
        rule += f"; past the change at step {c.step} ({n_after} of {CHANGE_POINTS} points after it): at least the prior band"
    lower, upper = central * np.exp(-ctx.z * sigma), central * np.exp(ctx.z * sigma)
    if at_step >= ctx.total_steps - 1 and not seen.empty:
        # the run is over (W&B steps are zero-based): its final eval is the answer, not a forecast
        final = float(seen["loss"].iloc[-1])
        central, lower, upper = (np.where(fracs >= at - 1e-12, final, a) for a in (central, lower, upper))
        rule = "the run's last eval point: its final"
    curve = pd.DataFrame({"step": ctx.prior["step"].to_numpy(float), "tokens": ctx.prior["step"].to_numpy(float) * ctx.batch_tokens,
                          "frac": fracs, "loss": central, "lower": lower, "upper": upper})
    summary = {"at_step": int(at_step), "at_frac": at, "n_points": int(len(own_pts)),
               "predicted_final": float(central[-1]), "lower": float(lower[-1]), "upper": float(upper[-1]),
               "sigma_own_points": noise, "band_rule": rule, "centre_rule": centre_rule,
               "centre_errors": centre_errors, "own_record_points": int(len(track)),
               "change": None if change is None else {"step": change.step, "what": change.what,
                                                      "reanchored": reanchored, "points_after": int(len(after))},
               "change_effects": carried_effects,
               "tokens": at_step * ctx.batch_tokens}
    summary["half_width"] = half_width(summary)
    return curve, summary


def _refit_points(ctx: Context, seen: pd.DataFrame, at: float):
    from fits.matched_progress_forecast import _refit_with_target

    return _refit_with_target(ctx.axis.points, ctx.fit_fn, ctx.axis.target_flops, seen[["frac", "loss"]], at)


def _last_change(changes: tuple, at_step: int):
    before = [c for c in changes if c.step <= at_step]
    return max(before, key=lambda c: c.step) if before else None


def half_width(summary: dict) -> float:
    """The final's band half-width, relative: what --alert-move defaults to a third of."""
    return (summary["upper"] - summary["lower"]) / 2 / summary["predicted_final"] if summary["predicted_final"] else math.nan
