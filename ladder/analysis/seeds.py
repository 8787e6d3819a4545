"""Seed-to-seed spread: measured from replicas where the ladder has them, else a stated prior, and
carried into the hero's band.

One run of a size is one draw of its seed: the rungs the law is fitted on each carry their seed's
luck, and so will the hero. With replicas (a size trained on several seeds) that spread is
measured (pooled within-size standard deviation of log final loss). With one seed per size it is
unknown, and the band would silently assume it is zero; so it takes a prior instead, and says so.

The prior, in log loss (sigma of one run about its size's mean), measured on the replicas we have:
  - OLMo ladder 1xC runs and their reruns (fits/reference_data/olmo_ladder, 190M-3B, 3.8e9-6.0e10
    tokens): final mean-CE differences 0.11, 0.01, 0.03, 0.22, 0.00%: sigma = RMS(diff) / sqrt(2)
    = 0.08% (tests/ladder/test_analysis_replicas.py recomputes it from the files);
  - the smoke ladder (experiments/smoke.py) at seeds 0 and 5, 5e4-3.3e5 tokens: final eval losses
    differ by 0.16, 0.92, 6.0 and 7.5% at rung_1..rung_4 (the larger rungs leave a loss plateau
    near 3.2 at seed-dependent steps): sigma = 3.4%.
Between the two the prior is interpolated in log tokens of the largest rung (clamped outside).
Two measured sets are thin ground: a ladder that can afford it should train replicas
(RungSpec.replica), which replace the prior by a measurement.
"""

from __future__ import annotations

import math
from typing import Any

import numpy as np
import pandas as pd

# (tokens of the largest rung, sigma of one run's log final loss), measured as the docstring says
PRIOR_POINTS = ((3.3e5, 0.034), (3.8e9, 0.0008))
# Where the seed sigma is a measurement (the band and the gate treat it as one), not the prior.
MEASURED_SOURCES = ("replicas", "residuals")


def prior_sigma(tokens: float) -> float:
    """The prior seed sigma at a ladder whose largest rung trained `tokens` (log-log interpolation)."""
    (t0, s0), (t1, s1) = PRIOR_POINTS
    u = (math.log(max(tokens, 1.0)) - math.log(t0)) / (math.log(t1) - math.log(t0))
    u = min(max(u, 0.0), 1.0)
    return float(math.exp(math.log(s0) + u * (math.log(s1) - math.log(s0))))


def size_spreads(points: pd.DataFrame) -> tuple[pd.Series, pd.Series]:
    """(sum of squares of log final loss about its size's mean, degrees of freedom), one entry per size
    with replicas (more than one run)."""
    finals = points[points["kind"] == "final"]
    groups = pd.Series(np.log(finals["loss"].to_numpy(float))).groupby(finals["size"].to_numpy())
    ss = groups.apply(lambda g: float(((g - g.mean()) ** 2).sum()))
    dof = groups.count() - 1
    multi = dof[dof > 0].index
    return ss[multi], dof[multi]


def pooled_sigma(points: pd.DataFrame) -> tuple[float, int, int] | None:
    """(pooled within-size std of log final loss, sizes with replicas, runs in them); None without replicas."""
    ss, dof = size_spreads(points)
    if dof.empty:
        return None
    return math.sqrt(float(ss.sum()) / int(dof.sum())), int(len(dof)), int((dof + 1).sum())


# Residual degrees of freedom at which the sizes' scatter about the law stands in for replicas: with
# fewer, the scatter of three or four sizes says too little, and the stated prior is kept.
MIN_RESIDUAL_DOF = 3


def seed_noise(points: pd.DataFrame, result=None) -> dict[str, Any]:
    """The seed sigma the band carries and where it came from: replicas; else, with one seed per size and
    `result` (the final law fitted to every size) leaving at least MIN_RESIDUAL_DOF degrees of freedom,
    the sizes' scatter about that law (each size is one seed's draw, so the scatter is the seed spread
    plus any lack of fit: it can only overstate the noise); else the prior."""
    finals = points[points["kind"] == "final"]
    measured = pooled_sigma(points)
    if measured is not None:
        sigma, sizes, runs = measured
        # dof: the pooled sigma's degrees of freedom (runs minus sizes), which the gate's band quantile needs
        return {"sigma": sigma, "source": "replicas", "replicated_sizes": sizes, "replica_runs": runs, "dof": runs - sizes,
                "text": f"seed spread measured on {runs} runs of {sizes} replicated sizes: sigma {sigma:.2%} per run"}
    sizes = int(finals["size"].nunique()) if not finals.empty else 0
    dof = sizes - len(result.params) if result is not None else 0
    if dof >= MIN_RESIDUAL_DOF:
        sigma = residual_sigma(points, result)
        if sigma > 0:
            return {"sigma": sigma, "source": "residuals", "replicated_sizes": 0, "replica_runs": 0, "dof": dof,
                    "text": f"one seed per size: the seed spread measured as the {sizes} sizes' scatter about the law "
                            f"({dof} degrees of freedom; lack of fit counts as noise): sigma {sigma:.2%} per run"}
    tokens = float(finals["tokens"].max()) if not finals.empty else 1.0
    sigma = prior_sigma(tokens)
    return {"sigma": sigma, "source": "prior", "replicated_sizes": 0, "replica_runs": 0, "dof": None,
            "largest_rung_tokens": tokens,
            "text": f"one seed per size: the spread between seeds is unknown; the band assumes a prior of {sigma:.2%} per run "
                    "(measured replicas of the smoke and OLMo ladders, interpolated at the largest rung's tokens, "
                    "ladder/analysis/seeds.py); train replicas (RungSpec.replica) to measure it"}


def residual_sigma(points: pd.DataFrame, result) -> float:
    """One run's sigma implied by the size means' scatter about the fitted law (lack of fit counts as noise).

    Replicas measure the spread between seeds of one size; the sizes' own means may scatter about
    the law by more than that (a spread measured on few seeds, or a law that does not quite fit).
    The residuals over their degrees of freedom, scaled to one run, say how much.
    """
    from ladder.analysis.finals import law_predict

    finals = points[points["kind"] == "final"]
    if finals.empty:
        return 0.0
    fitted = np.array([law_predict(result, r.params, r.tokens, r.flops) for r in finals.itertuples()])
    logs = pd.DataFrame({"size": finals["size"].to_numpy(), "res": np.log(finals["loss"].to_numpy(float) / fitted)})
    means = logs.groupby("size")["res"].mean()
    dof = len(means) - len(result.params)
    if dof <= 0:
        return 0.0
    return float(math.sqrt(float((means ** 2).sum()) / dof * len(finals) / len(means)))


def size_shifts(points: pd.DataFrame, sigma: float, rng: np.random.Generator) -> np.ndarray:
    """One log-loss shift per point: each size's luck, N(0, sigma^2 / its runs), shared by its runs and branches."""
    finals = points[points["kind"] == "final"]
    runs = finals.groupby("size")["name"].count()
    draw = {size: rng.normal(0.0, sigma / math.sqrt(k)) for size, k in runs.items()}
    return np.array([draw.get(s, 0.0) for s in points["size"]])


def scale_losses(points: pd.DataFrame, factor: np.ndarray) -> pd.DataFrame:
    """The points with each row's mixture loss and every domain's loss multiplied by its factor.

    A run's luck moves its mixture loss and each domain's loss alike (the per-domain law fits those)."""
    from ladder.analysis.runs import domain_columns

    return points.assign(**{c: points[c].to_numpy(float) * factor for c in ["loss", *domain_columns(points)]})


def propagate_final(points: pd.DataFrame, fit, base, targets: list[tuple[float, float, float]], sigma: float,
                    n: int = 24, seed: int = 0) -> np.ndarray:
    """Std of the log prediction at each target when each size's loss moves by its seed luck (refit per draw).

    The spread a refit shows when every rung is drawn again on another seed: far from the rungs a
    few percent of luck on each moves the extrapolation more than the luck itself.
    """
    from ladder.analysis.finals import _bootstrap_starts, fit_final_law, law_predict

    if sigma <= 0 or not targets:
        return np.zeros(len(targets))
    rng = np.random.default_rng(seed)
    starts = _bootstrap_starts(base, fit)
    preds = []
    for _ in range(n):
        shifted = scale_losses(points, np.exp(size_shifts(points, sigma, rng)))
        try:
            res = fit_final_law(shifted, fit, starts=starts, n_polish=1)
        except ValueError:
            continue
        preds.append([law_predict(res, *t) for t in targets])
    arr = np.log(np.array(preds, dtype=float))
    arr = arr[np.all(np.isfinite(arr), axis=1)]
    if len(arr) < 3:
        return np.full(len(targets), sigma)
    return np.std(arr, axis=0, ddof=1)
