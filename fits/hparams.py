"""Hyperparameter rules from sweeps: the optimal learning rate (or batch) at each budget, then a power law.

DeepSeek LLM (2024) fitted lr_opt = 0.3118 C^-0.125 and B_opt = 0.2920 C^0.3271 this way: sweep a
hyperparameter at a few small budgets, take each budget's optimum, fit a line in log-log. A ladder
needs the same thing for its own recipe, because a rule that is right at the largest rung but off at
the smallest makes the small rungs worse than they should be, which steepens the fitted law and
makes it under-predict the hero.

Each budget's optimum is the vertex of a parabola in log(x) through the best swept value and up to
its neighbour on each side (replicates averaged first; wider windows let the far, asymmetric walls of
the bowl pull the vertex). A budget whose best value sits at the edge
of its sweep has no vertex: its optimum is reported as that edge with ``at_edge`` set and it is left
out of the power law, because the true optimum lies somewhere beyond it.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field

import numpy as np

from fits.defaults import DEFAULT_LEVEL
from fits.io import InputError
from fits.isoflop import group_budgets


@dataclass(frozen=True)
class Optimum:
    budget: float
    x_opt: float
    loss_opt: float
    n_values: int  # distinct swept values at this budget
    at_edge: bool  # the best value is the smallest or largest swept: x_opt is a bound, not a vertex


@dataclass(frozen=True)
class RuleFit:
    """x_opt = coef * budget ** exponent, from the budgets' optima (a least-squares line in log-log).

    ci: percentile intervals (at the fit's level, default 90%) of coef and exponent from resampling each budget's replicate rows.
    """

    coef: float
    exponent: float
    optima: tuple[Optimum, ...]
    ci: dict[str, list[float]] = field(default_factory=dict)

    def __call__(self, budget) -> np.ndarray:
        return self.coef * np.asarray(budget, dtype=float) ** self.exponent

    def to_dict(self) -> dict:
        return {"coef": self.coef, "exponent": self.exponent, "ci": self.ci,
                "optima": [asdict(o) for o in self.optima]}


def budget_optimum(x, loss, budget: float = float("nan"), neighbours: int = 1) -> Optimum:
    """The loss-minimising x of one budget's sweep (parabola in log x around the best value)."""
    x, loss = np.asarray(x, dtype=float), np.asarray(loss, dtype=float)
    values = np.unique(x)
    means = np.array([loss[x == v].mean() for v in values])
    best = int(np.argmin(means))
    if best in (0, len(values) - 1):
        return Optimum(budget, float(values[best]), float(means[best]), len(values), True)
    lo, hi = max(0, best - neighbours), min(len(values), best + neighbours + 1)
    u = np.log(values[lo:hi])
    c2, c1, c0 = np.polyfit(u, means[lo:hi], 2)
    # Noise can bend a flat valley the wrong way; the best swept value is then the honest answer.
    if c2 <= 0:
        return Optimum(budget, float(values[best]), float(means[best]), len(values), False)
    u_opt = float(np.clip(-c1 / (2 * c2), u[0], u[-1]))
    return Optimum(budget, float(np.exp(u_opt)), float(c0 + c1 * u_opt + c2 * u_opt**2), len(values), False)


def fit_rule(budget, x, loss, *, n_resamples: int = 500, seed: int = 0, level: float = DEFAULT_LEVEL) -> RuleFit:
    """Fit x_opt(budget) = coef * budget^exponent from sweep rows (one row per run); ci at `level`."""
    budget, x, loss = (np.asarray(a, dtype=float) for a in (budget, x, loss))
    if not (budget.shape == x.shape == loss.shape) or budget.ndim != 1:
        raise InputError("budget, x and loss must be 1-D and the same length")
    if not (np.all(np.isfinite(loss)) and np.all(budget > 0) and np.all(x > 0)):
        raise InputError("budget and x must be positive and loss finite in every sweep row")
    # Runs of one size differ in FLOPs only by rounding (batch * steps), sizes by far more.
    keys = group_budgets(budget)
    groups = [np.flatnonzero(keys == k) for k in np.unique(keys)]
    for g in groups:
        if len(np.unique(x[g])) < 3:
            raise InputError(f"budget {budget[g][0]:.3g}: sweep at least 3 distinct values to locate an optimum")

    def line(rows_per_group):
        optima = [budget_optimum(x[r], loss[r], float(np.exp(np.log(budget[r]).mean()))) for r in rows_per_group]
        inner = [o for o in optima if not o.at_edge]
        if len(inner) < 2:
            return optima, float("nan"), float("nan")
        slope, intercept = np.polyfit(np.log([o.budget for o in inner]), np.log([o.x_opt for o in inner]), 1)
        return optima, float(np.exp(intercept)), float(slope)

    optima, coef, exponent = line(groups)
    if not np.isfinite(exponent):
        raise InputError("fewer than two budgets have an optimum inside their sweep: widen the sweeps")
    rng = np.random.default_rng(seed)
    draws = np.array([line([rng.choice(g, size=len(g)) for g in groups])[1:] for _ in range(n_resamples)])
    ok = np.all(np.isfinite(draws), axis=1)
    ci = {name: np.percentile(draws[ok, i], [50 * (1 - level), 50 * (1 + level)]).tolist() for i, name in enumerate(("coef", "exponent"))} \
        if ok.sum() >= 10 else {}
    return RuleFit(coef, exponent, tuple(optima), ci)

