"""A replica far outside the seed spread the other sizes measure: most likely a bad run, not luck.

Each replicated size's spread between its seeds is set against the pooled spread of every other
replicated size (an F test, a t test for a pair), and the smallest p value is multiplied by the number
of sizes tested (Bonferroni), so a ladder whose runs all follow one normal seed noise is blocked at
most `gate.replica_outlier_level` (0.01) of the time. The odd run of the flagged size is the one
farther from the law fitted without that size, and the hero's forecast without it is set beside the
shipped one. Nothing is dropped from the fit (a run can be unlucky): the gate holds the hero back and
names the run to look at, to retrain on another seed or to accept with --force. What it found on
the recorded draws is in experiments/tiny_record.md.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd
from scipy import stats

from ladder.analysis.seeds import size_spreads

DESCRIBE_BELOW = 0.05  # the fit describes the odd run (two refits) when the family-wise p is below this


def replica_outlier(points: pd.DataFrame) -> dict | None:
    """The replicated size whose seeds disagree most against the others' spread, with its family-wise p;
    None where fewer than three sizes have replicas."""
    ss, dof = size_spreads(points)
    replicated = list(dof.index)
    if len(replicated) < 3:  # the others' spread needs two sizes behind it
        return None
    tests = []
    for size in replicated:
        others = [s for s in replicated if s != size]
        dof_others = int(dof[others].sum())
        var_others = float(ss[others].sum()) / dof_others
        if var_others <= 0:
            continue
        f = (ss[size] / dof[size]) / var_others
        tests.append((float(stats.f.sf(f, int(dof[size]), dof_others)), size, math.sqrt(f), math.sqrt(var_others)))
    if not tests:
        return None
    p, size, ratio, sigma_others = min(tests)
    runs = points[(points["kind"] == "final") & (points["size"] == size)]
    return {"size": size, "runs": list(runs["name"]), "losses": [float(x) for x in runs["loss"]],
            "spread": float(np.log(runs["loss"].max() / runs["loss"].min())), "ratio": ratio,
            "sigma_others": sigma_others, "p": p, "p_family": min(1.0, p * len(tests)), "sizes_tested": len(tests)}


def describe_outlier(points: pd.DataFrame, fit, outlier: dict, hero_target: tuple[float, float, float] | None,
                     predicted: float | None) -> dict:
    """The odd run (farther from the law fitted without its size) and the hero's forecast without it."""
    from ladder.analysis.finals import fit_final_law, law_predict

    finals = points[points["kind"] == "final"]
    others = points[points["size"] != outlier["size"]]
    law = fit_final_law(others, fit)
    runs = finals[finals["size"] == outlier["size"]]
    off = {r.name: math.log(r.loss / law_predict(law, r.params, r.tokens, r.flops)) for r in runs.itertuples()}
    odd = max(off, key=lambda k: abs(off[k]))
    out = {**outlier, "odd_run": odd, "odd_from_law": math.expm1(off[odd])}
    if hero_target is not None and predicted is not None:
        kept = points[points["name"] != odd]
        out["hero_without"] = law_predict(fit_final_law(kept, fit), *hero_target)
        out["hero_with"] = predicted
    return out


def outlier_reason(outlier: dict, rung_names: list[str]) -> str:
    """The gate's line: which runs disagree, how far beyond the others' spread, which to look at, and what to do."""
    pair = " and ".join(outlier["runs"])
    line = (f"{pair} differ by {outlier['spread']:.1%}, {outlier['ratio']:.1f}x the seed spread of the other sizes "
            f"({outlier['sigma_others']:.2%} a run; p = {outlier['p_family']:.3f} over {outlier['sizes_tested']} sizes): "
            f"{outlier['odd_run']} is likely a bad run ({outlier['odd_from_law']:+.1%} from the law through the other sizes)")
    if outlier.get("hero_without") is not None:
        line += (f"; without it the hero is forecast at {outlier['hero_without']:.4f} against {outlier['hero_with']:.4f}")
    odd = outlier["odd_run"]
    where = f"rungs[{rung_names.index(odd)}]" if odd in rung_names else "its rung"
    return line + (f"; look at its curve, then train it on another seed (--set '{where}.seed=N') or pass --force "
                   "to train the hero on these rungs")
