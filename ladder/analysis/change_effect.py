"""A hero's declared mid-run data-mix switch carried into its live forecast by the effect its replayed rungs
measured, where such rungs exist.

A change with weights (hero.changes: the hero trains the mixture `weights` from `step` on) is replayed on
rungs by a variant of the ladder whose every run switches at the same fraction of its steps to the same
weights (data.switch_at, data.switch_weights; experiments/tiny_switch.py's `replay`). When that variant's
rungs have finished (trained, or imported), `ladder compare` measures the switch's effect carried to the
hero's compute (fits.effect_trend): the switched hero's loss over the unswitched one's, as a ratio, with
the band one pair of heroes carries (the trend's band widened by a pair's own seed luck).

`ladder follow` then forecasts the hero past the change as the unswitched forecast times that ratio, its
log band the forecast's and the effect's in quadrature, in place of the band-widening rule (the centre
kept, the band at least the rungs-only band past the change); until, as before, CHANGE_POINTS of the hero's
own points after the change take over (ladder.analysis.follow_bands). The ratio is measured on the finals;
along the run it is taken in the share of its final value the replayed rungs' own eval curves show at each
fraction past the switch (B's eval loss over A's at the same steps, averaged over the sizes:
change_carry.ramp_shape), so the forecast is continuous at the switch and the measured effect at the end.
Where the rungs have no eval curves here (imported finals) or their final effect is not clear of its
scatter, the share grows in proportion to the run past the switch, (f - f_s) / (1 - f_s), and the effect's
text says which. Without finished replayed rungs nothing is carried and the band-widening rule stands;
`ladder follow` says which.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from ladder.analysis.change_carry import ramp_shape, replays


def replaying_variant(spec, change, load) -> str | None:
    """The first of the spec's variants (``load(name)`` -> its LadderSpec) that replays `change`, or None."""
    for name in sorted(spec.variants):
        if replays(load(name), change, spec.hero.steps):
            return name
    return None


def measured_effect(spec_a, spec_b, change, variant: str, level: float, n_draws: int) -> dict:
    """The switch's effect at A's hero from B's replayed rungs (ladder.analysis.effect), as the ratio the live
    forecast carries: ok False with the reason when B's rungs are unfinished or too few."""
    from scipy.stats import norm

    from fits.errors import InputError
    from ladder.analysis.effect import analyse_pair

    doc = {"step": change.step, "frac": change.step / spec_a.hero.steps, "variant": variant, "what": change.what}
    try:
        effect = analyse_pair(spec_a, spec_b, level=level, n_draws=n_draws)
    except InputError as exc:
        return {**doc, "ok": False, "reason": str(exc)}
    hero = effect["at_hero"]
    law = effect["law_a"]
    loss_a = law["E"] + law["A"] * float(hero["flops"]) ** -law["alpha"]
    ratio, lower, upper = ((loss_a + hero[k]) / loss_a for k in ("delta", "pair_delta_lower", "pair_delta_upper"))
    if min(ratio, lower, upper) <= 0:
        return {**doc, "ok": False, "reason": "the replayed rungs' effect at the hero puts its loss at or below zero"}
    # the effect's band as a log sigma at the forecast's level: carried at that level, it spans its own band
    sigma = math.log(upper / lower) / 2 / float(norm.ppf(0.5 + level / 2))
    shape = ramp_shape(curve_pairs(spec_a, spec_b), doc["frac"])
    along = ("its share along the run from the replayed rungs' eval curves" if shape else
             "in proportion to the run past the switch (the rungs' eval curves do not show its shape)")
    return {**doc, "ok": True, "ratio": ratio, "lower": lower, "upper": upper, "log_ratio": math.log(ratio),
            "sigma": sigma, "multiplier": hero["multiplier"], "noise": effect["noise"]["text"], "shape": shape,
            "text": f"x{ratio:.4f} [{lower:.4f}, {upper:.4f}] at the final from the rungs of {spec_b.name}, "
                    f"which replay it; {along}"}


def curve_pairs(spec_a, spec_b) -> pd.DataFrame:
    """The rungs trained here, B's eval points against A's at the same step (run, frac, log_ratio = log(L_B /
    L_A)); empty where either ladder's rungs have no eval curves here (imported finals, a remote root)."""
    from ladder.analysis.domain_forecasts import trained_points
    from ladder.dag import queries

    points = []
    for spec in (spec_a, spec_b):
        dirs = {k: v for k, v in queries.step_dirs(spec).items() if "://" not in v}
        points.append(trained_points(dirs, [r.name for r in spec.rungs]))
    pa, pb = points
    if pa.empty or pb.empty:
        return pd.DataFrame({"run": [], "frac": [], "log_ratio": []})
    both = pa.merge(pb, on=["run", "step"], suffixes=("_a", "_b"))
    return pd.DataFrame({"run": both["run"], "frac": both["frac_a"],
                         "log_ratio": np.log(both["loss_b"].to_numpy(float) / both["loss_a"].to_numpy(float))})


def carried_effects(spec, load, level: float, n_draws: int = 200) -> tuple[dict, ...]:
    """One entry per declared switch of the hero that a variant replays: its measured effect, or why not."""
    out = []
    for change in spec.hero.changes if spec.hero is not None else ():
        variant = replaying_variant(spec, change, load) if change.weights else None
        if variant is not None:
            out.append(measured_effect(spec, load(variant), change, variant, level, n_draws))
    return tuple(out)
