"""The IsoFLOP stage's spec (Chinchilla's approach 2): budgets, the sizes tried at each, the family they
come from, and the template every sweep run shares.

At each budget C the sweep trains each of its sizes on C / flops_per_token tokens; the stage fits a
parabola of loss in log N per budget and N_opt(C), D_opt(C) as power laws (fits.isoflop). Runs of
the ladder declared by budget (``RungSpec.budget``) are then placed on that frontier.
"""

from __future__ import annotations

from dataclasses import dataclass

from .model import ModelSpec
from .runs import RungSpec


@dataclass(frozen=True)
class IsoFlopBudget:
    """One compute budget of the sweep and the models tried at it (by their d_model in the family)."""

    flops: float  # the budget in FLOPs (the trainer's count: flops_per_token x tokens)
    sizes: tuple[int, ...] = ()  # d_model of each model trained at this budget (members of IsoFlopSpec.family)
    guess: int = 0  # instead of sizes: the d_model guessed optimal; the sweep tries it and `span` neighbours each side
    span: int = 2  # family members each side of the guess (with guess)

    def widths(self, family: tuple[ModelSpec, ...]) -> tuple[int, ...]:
        """The d_model of every model this budget trains (sizes, or the span around the guess)."""
        if self.sizes:
            return tuple(self.sizes)
        known = [m.d_model for m in family]
        if self.guess not in known:
            return ()
        i = known.index(self.guess)
        return tuple(known[max(0, i - self.span): i + self.span + 1])


@dataclass(frozen=True)
class IsoFlopSpec:
    """An IsoFLOP sweep; its fit places every run declared by budget (and the hero, when it is one)."""

    budgets: tuple[IsoFlopBudget, ...]  # the sweep's budgets (IsoFlopBudget), smallest to largest
    family: tuple[ModelSpec, ...]  # the models sizes are picked from, smallest to largest (e.g. Recipe.family)
    template: RungSpec  # what every sweep run shares (batch, optim, schedule, seq_len, resources); model, tokens replaced
    reuse: bool = True  # a run declared at a sweep budget is that budget's best run, not trained again
    bootstrap: int = 200  # residual-bootstrap resamples for the frontier's intervals (0: none)
    min_runs: int = 3  # sizes a budget needs for its parabola (budgets with fewer are left out of the fit)
