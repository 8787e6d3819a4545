"""The smoke ladder with an IsoFLOP stage (tests): a sweep at two budgets places the rungs and the hero.

At each budget the sweep trains four sizes of the smoke recipe; the isoflop step fits a parabola in
log N per budget and N_opt(C), D_opt(C) as power laws. Two rungs are declared at the sweep's own
budgets, so each *is* its budget's best sweep run (nothing trained twice); two rungs below the
sweep and the hero (1.5x above it) are placed at N_opt(C) from the frontier's law.

Why these budgets: byte-level models this small are compute-optimal at 100-300 tokens per active
parameter (measured: at 1.5e10 FLOPs the smallest size, d8 at 330 tokens/param, beat d16 by 0.19
nats, so no parabola had its minimum inside the sizes); 4.5e10 is the smallest budget whose sizes
bracketed the minimum (d8 2.52, d16 2.42, d24 2.45, d32 2.72 at lr 3e-3). At 9e10 the minimum sits at
d16 (d16 2.17, d24 2.23, d32 2.28 with the trainer's host-drawn initial weights), so that budget's
sizes are d8, d16 and d24 around it.
"""

import dataclasses
import importlib.util
from pathlib import Path

from ladder.spec import (
    DataSpec,
    DomainSpec,
    FitSpec,
    GateSpec,
    IsoFlopBudget,
    IsoFlopSpec,
    LadderSpec,
)
from ladder.spec.recipe import Recipe


def _smoke_recipe() -> Recipe:
    """The smoke ladder's recipe, read from its file beside this one (a spec file is loaded by path)."""
    path = Path(__file__).with_name("smoke.py")
    spec = importlib.util.spec_from_file_location("smoke_ladder_recipe", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.RECIPE


_SMOKE = _smoke_recipe()
# Its recipe without the cooldown branch (a sweep run needs only its final loss), at the default tokens
# per parameter, which nothing here uses: every run gets its tokens from its budget.
RECIPE = dataclasses.replace(_SMOKE, schedule=dataclasses.replace(_SMOKE.schedule, branch_fracs=()),
                             tokens_per_param=Recipe.tokens_per_param)

FAMILY = tuple(RECIPE.model(d) for d in (8, 16, 24, 32, 48, 64))
# Checkpointed only at the end: the sweep's 14 short runs would otherwise write 10 checkpoints each,
# which is what a smoke test of the stage least needs to pay for.
TEMPLATE = RECIPE.rung("template", 16, checkpoint_every=1_000_000)
BUDGETS = (4.5e10, 9e10)
HERO_BUDGET = 1.35e11


def by_budget(name: str, flops: float, **kw):
    """A run declared as "the compute-optimal run at `flops`": its model and tokens come from the sweep."""
    return dataclasses.replace(TEMPLATE, name=name, budget=flops, **kw)


LADDER = LadderSpec(
    name="smoke_isoflop",
    isoflop=IsoFlopSpec(
        budgets=(IsoFlopBudget(BUDGETS[0], sizes=(8, 16, 24, 32)),
                 IsoFlopBudget(BUDGETS[1], guess=16, span=1)),
        family=FAMILY,
        template=TEMPLATE,
        bootstrap=100,
    ),
    # Four rung sizes: the gate backtests the compute law on the three smallest (fewer cannot be backtested).
    rungs=(by_budget("rung_1", 1.1e10), by_budget("rung_2", 2.25e10))
    + tuple(by_budget(f"rung_{i + 3}", c) for i, c in enumerate(BUDGETS)),
    hero=by_budget("hero", HERO_BUDGET),
    data=DataSpec(
        domains=(DomainSpec("code", "builtin:stdlib_py", 0.5), DomainSpec("prose", "builtin:web_bible", 0.5)),
        eval_tokens=4_096,
    ),
    fit=FitSpec(law="compute", curve_law="none", bootstrap=50),
    # Too small to extrapolate well: the gate is loose so tests reach the hero.
    gate=GateSpec(max_backtest_error=0.5, max_interval_width=10.0),
    description="CI smoke ladder with an IsoFLOP stage",
)
