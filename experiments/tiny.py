"""The default ladder (`make demo`): four MoE rungs and a hero of one recipe, on the 2-core CPU.

Recipe (ladder/recipe.py): 8 experts, top-2, expert width = d_model, head dimension 8, depth grown
with width, 20 tokens per active parameter, WSD with a (1 - sqrt) cooldown, and the learning rate
and batch from power laws in compute (DeepSeek LLM's exponents: lr ~ C^-0.125, batch ~ C^0.3271,
the batch coefficient scaled so the smallest rung still takes over 1,000 optimizer steps). The LR
coefficient comes from a sweep on rung_2 and rung_4 (never the hero): at 0.18 both rungs were
better at half the rate (rung_2 eval loss 1.956 -> 1.926, rung_4 1.572 -> 1.553; a quarter was
worse on rung_2, 1.950; double was worse on both), hence 0.09. Each rung also
branches cooldowns at 25% and 50% of its run, so every model size gives three token budgets and
the two-dimensional law (one exponent for N and D) can be backtested on the two smallest rungs
against the largest: 7x in compute, beyond the hero's 6.4x over the largest rung.
"""

import dataclasses

from ladder.recipe import Recipe
from ladder.spec import DataSpec, DomainSpec, FitSpec, GateSpec, LadderSpec, Rule, ScheduleSpec

RECIPE = Recipe(
    head_dim=8,
    n_experts=8,
    top_k=2,
    expert_ratio=1.0,
    tokens_per_param=20.0,
    seq_len=128,
    lr=Rule("power_c", 0.09, -0.125),
    batch=Rule("power_c", 0.1, 0.3271),
    schedule=ScheduleSpec(kind="wsd", warmup_frac=0.02, decay_frac=0.2, cooldown_shape="1-sqrt",
                          branch_fracs=(0.25, 0.5)),
)

RUNGS = tuple(RECIPE.rung(f"rung_{i + 1}", d, layers) for i, (d, layers) in enumerate(((32, 2), (40, 2), (48, 3), (56, 3))))
_hero = RECIPE.rung("hero", 80, 4, cpus=2.0)
# The hero trains the recipe's schedule without the cooldown branches: those only serve the fit.
HERO = dataclasses.replace(_hero, schedule=dataclasses.replace(_hero.schedule, branch_fracs=()))

LADDER = LadderSpec(
    name="tiny",
    rungs=RUNGS,
    hero=HERO,
    data=DataSpec(
        domains=(
            DomainSpec("code", "builtin:stdlib_py", 0.5),
            DomainSpec("bible_web", "builtin:web_bible", 0.25),
            DomainSpec("bible_kjv", "builtin:kjv", 0.25),
        ),
        eval_tokens=32_768,
    ),
    fit=FitSpec(law="chinchilla_tied", curve_law="multipower", bootstrap=200),
    gate=GateSpec(max_backtest_error=0.02, max_interval_width=0.15),
    description="default CPU ladder",
)
