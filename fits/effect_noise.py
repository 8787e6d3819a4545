"""The seed noise an effect's bands carry (fits.effect): one run's sigma in log final loss for A's runs,
B's runs and a paired difference log(L_B / L_A), each measured where the ladders allow it, else a prior.

The rule, for each sigma in turn:

- replicas: a size trained at several seeds measures it directly: the pooled within-size standard
  deviation of log final loss (a paired difference's: of the paired log differences about their size's
  mean).
- residuals: one seed a size. Each size is then one draw of its seed, so the sizes' scatter about a
  smooth curve is the seed noise plus any lack of fit (it can only overstate the noise), the way
  ladder/analysis/seeds.py measures the loss sigma from the residuals about the law:
  - a ladder's runs: the RMS of their log residuals about its own compute law E + A C^-alpha, over
    sizes - 3 degrees of freedom;
  - a paired difference, where both ladders trained every shared size at one shared seed (the same
    data order and init, so most of the seed's luck cancels in the difference): the RMS of the
    per-size log differences about their least-squares line in log10 compute (the trend's shape),
    over sizes - 2 degrees of freedom (seven sizes: five).
  A sigma so measured has few degrees of freedom: the trend's band then takes Student's t quantile
  at them (``Noise.dof``). Used from MIN_RESIDUAL_DOF degrees of freedom on.
- prior: else the caller's prior (ladder/analysis/seeds.py's), and the output says so.

A paired ladder needs no sigma of B's runs of its own (B moves with A plus the paired difference):
then ``sigma_b`` is None unless B has replicas.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
import pandas as pd

from fits.errors import InputError

# With fewer residual degrees of freedom the scatter of so few sizes says too little, and the prior is
# kept: the threshold of ladder.analysis.seeds.MIN_RESIDUAL_DOF (fits never imports ladder).
MIN_RESIDUAL_DOF = 3


@dataclass(frozen=True)
class Sigma:
    """One sigma of log final loss, where it came from ("replicas" | "residuals" | "prior") and its
    degrees of freedom (None for a prior)."""

    value: float
    source: str
    dof: int | None


@dataclass(frozen=True)
class Noise:
    """The seed noise the bands carry: sigmas of one run's log final loss, and where they came from."""

    sigma_a: float
    sigma_b: float | None  # None: paired at every size, and B has no replicas (its own luck is not needed)
    sigma_pair: float | None  # of one paired difference log(L_B / L_A) at a shared seed; None: not measured
    source_a: str  # "replicas" | "residuals" | "prior"
    source_b: str  # the same, or "paired" (sigma_b None)
    pairs: int  # paired runs (a seed both ladders trained at a shared size)
    pair_source: str | None = None  # "replicas" | "residuals"
    dof_a: int | None = None
    dof_b: int | None = None
    pair_dof: int | None = None
    pair_sizes: int = 0  # the sizes the paired residual sigma was measured on

    @property
    def mode(self) -> str:
        if self.sigma_pair is not None:
            return "paired"
        sources = (self.source_a, self.source_b)
        if "prior" in sources:
            return "prior"
        return "replicas" if sources == ("replicas", "replicas") else "residuals"

    @property
    def dof(self) -> int | None:
        """The degrees of freedom of the sigma the bands mostly rest on, where it was measured on the sizes'
        scatter (few: the trend's band then takes Student's t there); None for replicas and priors."""
        if self.mode == "paired":
            return self.pair_dof if self.pair_source == "residuals" else None
        dofs = [d for d, s in ((self.dof_a, self.source_a), (self.dof_b, self.source_b)) if s == "residuals"]
        return min(dofs) if dofs else None

    @property
    def text(self) -> str:
        if self.mode == "paired":
            how = ("measured on replicas" if self.pair_source == "replicas" else
                   f"one seed a size: measured as the {self.pair_sizes} sizes' scatter about the trend, "
                   f"{self.pair_dof} degrees of freedom, lack of fit counted as noise")
            return (f"paired by seed ({self.pairs} pairs): a paired difference's sigma {self.sigma_pair:.2%} ({how}), "
                    f"A's runs {self.sigma_a:.2%} ({self.source_a})")
        parts = [f"{k}'s runs {s:.2%} ({src})" for k, s, src in (("A", self.sigma_a, self.source_a),
                                                                 ("B", self.sigma_b, self.source_b))]
        note = "; one seed per size: the prior is assumed, train replicas to measure it" if self.mode == "prior" else ""
        return "unpaired (no seed shared at a size): " + ", ".join(parts) + note

    def as_dict(self) -> dict:
        return {"mode": self.mode, "sigma_a": self.sigma_a, "sigma_b": self.sigma_b, "sigma_pair": self.sigma_pair,
                "source_a": self.source_a, "source_b": self.source_b, "pair_source": self.pair_source,
                "dof_a": self.dof_a, "dof_b": self.dof_b, "pair_dof": self.pair_dof, "dof": self.dof,
                "pairs": self.pairs, "text": self.text}


def pooled_log_sigma(runs: pd.DataFrame) -> tuple[float, int] | None:
    """(pooled within-size std of log final loss, its degrees of freedom); None without replicas."""
    logs = np.log(runs["loss"].to_numpy(float))
    groups = pd.Series(logs).groupby(runs["size"].to_numpy())
    dof = int((groups.count() - 1).sum())
    if dof == 0:
        return None
    ss = float(groups.apply(lambda g: ((g - g.mean()) ** 2).sum()).sum())
    return math.sqrt(ss / dof), dof


def law_residual_sigma(runs: pd.DataFrame, law: dict) -> tuple[float, int] | None:
    """(RMS of one-seed runs' log residuals about their compute law over sizes - 3, those dof); None
    below MIN_RESIDUAL_DOF."""
    dof = int(runs["size"].nunique()) - 3
    if dof < MIN_RESIDUAL_DOF:
        return None
    flops = runs["flops"].to_numpy(float)
    resid = np.log(runs["loss"].to_numpy(float)) - np.log(law["E"] + law["A"] * flops ** -law["alpha"])
    return math.sqrt(float(np.sum(resid ** 2)) / dof), dof


def paired_differences(a: pd.DataFrame, b: pd.DataFrame) -> pd.DataFrame:
    """One row per (size, seed) both ladders ran: log(L_B / L_A) as ``diff``, and B's compute."""
    la = a.groupby(["size", "seed"], as_index=False)["loss"].mean()
    lb = b.groupby(["size", "seed"], as_index=False).agg(loss=("loss", "mean"), flops=("flops", "mean"))
    both = la.merge(lb, on=["size", "seed"], suffixes=("_a", "_b"))
    return both.assign(diff=np.log(both["loss_b"] / both["loss_a"]))


def pair_sigma(pairs: pd.DataFrame, shared: list[str]) -> tuple[Sigma, int] | None:
    """A paired difference's sigma (and the sizes it was measured on): on replicated pairs, else on one
    pair at every shared size about the line in log10 compute; None when neither is possible."""
    counts = pairs.groupby("size")["diff"].count()
    dof = int((counts - 1).clip(lower=0).sum())
    if dof > 0:
        centred = pairs["diff"] - pairs.groupby("size")["diff"].transform("mean")
        return Sigma(math.sqrt(float((centred ** 2).sum()) / dof), "replicas", dof), int(len(counts))
    if set(counts.index) != set(shared) or len(shared) - 2 < MIN_RESIDUAL_DOF:
        return None
    x, y = np.log10(pairs["flops"].to_numpy(float)), pairs["diff"].to_numpy(float)
    resid = y - np.polyval(np.polyfit(x, y, 1), x)
    dof = len(y) - 2
    return Sigma(math.sqrt(float(np.sum(resid ** 2)) / dof), "residuals", dof), len(y)


def run_sigma(runs: pd.DataFrame, which: str, prior: float | None, law: dict | None) -> Sigma:
    """One ladder's runs' sigma: replicas, else (with its law given) residuals, else the prior."""
    measured = pooled_log_sigma(runs)
    if measured is not None:
        return Sigma(measured[0], "replicas", measured[1])
    resid = law_residual_sigma(runs, law) if law is not None else None
    if resid is not None and resid[0] > 0:
        return Sigma(resid[0], "residuals", resid[1])
    if prior is None:
        raise InputError(f"ladder {which} has one run per size and too few sizes to measure its seed spread on their "
                         f"scatter (at least {MIN_RESIDUAL_DOF + 3}); train replicas or give a prior sigma")
    return Sigma(float(prior), "prior", None)


def noise(a: pd.DataFrame, b: pd.DataFrame, shared: list[str], law_a: dict, prior_a: float | None,
          prior_b: float | None, fit_b=None) -> Noise:
    """The bands' noise, by the module's rule. ``fit_b`` () -> B's compute law, called only when B's own
    runs' sigma is needed and B has no replicas (a fit of its own: it costs a few tenths of a second)."""
    pairs = paired_differences(a, b)
    pairs = pairs[pairs["size"].isin(shared)]
    paired = pair_sigma(pairs, shared)
    sa = run_sigma(a, "A", prior_a, law_a)
    every_size_paired = paired is not None and set(pairs["size"]) == set(shared)
    if every_size_paired and pooled_log_sigma(b) is None:
        sb = None  # B moves with A plus the paired difference at every size: its own luck is not used
    else:
        law_b = fit_b() if fit_b is not None and pooled_log_sigma(b) is None else None
        sb = run_sigma(b, "B", prior_b, law_b)
    ps, sizes = paired if paired is not None else (None, 0)
    return Noise(sigma_a=sa.value, sigma_b=None if sb is None else sb.value,
                 sigma_pair=None if ps is None else ps.value, source_a=sa.source,
                 source_b="paired" if sb is None else sb.source, pairs=int(len(pairs)),
                 pair_source=None if ps is None else ps.source, dof_a=sa.dof, dof_b=None if sb is None else sb.dof,
                 pair_dof=None if ps is None else ps.dof, pair_sizes=sizes)
