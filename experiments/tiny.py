"""The default ladder (`make demo`): five MoE rungs and a hero of one recipe, on the 2-core CPU.

Recipe (ladder/recipe.py): 8 experts, top-2, expert width = d_model, head dimension 8, three layers
at every size (width alone grows, so no rung sits across a depth jump), 50 tokens per active
parameter, WSD with a (1 - sqrt) cooldown, and the learning rate and batch from power laws in
compute (DeepSeek LLM's exponents: lr ~ C^-0.125, batch ~ C^0.3271, the batch coefficient scaled
so the smallest rung still takes over 1,000 optimizer steps; the LR coefficient from a sweep on
two rungs, never the hero). Each rung also branches cooldowns at 25% and 50% of its run (each costs
a fifth of its fraction), so every size gives three token budgets for the two-dimensional law.
The hero is 4.3x the largest rung's compute; the gate's backtest fits the three smallest rungs and
predicts the largest, 4.1x beyond them.

What moved the error (measured on this machine; each figure is one deterministic ladder, so the
seed-to-seed noise quoted below is the yardstick):
- 20 tokens per parameter (d32-d56, depth 2->3): backtest -9.3% at 7x. The rungs were step-limited:
  at equal tokens a larger rung was *worse* (it had a larger batch and fewer steps), the fit
  degenerated to a law in tokens alone, and one width's final loss moved 1.6% across seeds
  (1.861, 1.832, 1.832).
- Same, six rungs at a fixed depth of 3: backtest +11.7% at 5x; local slopes of log loss against
  log compute -0.145, -0.040, -0.117, -0.172, -0.154 (noise, not a law).
- 100 tokens per parameter at d24 beat 20 tokens per parameter at d40 for the same compute
  (1.735 against 1.83-1.86) and halved the seed spread (1.741, 1.728): the compute-optimal ratio
  of models this small is far above Chinchilla's 20, as Marin's own ladder (~790) also sits.
- 50 tokens per parameter (this file): backtest +2.2% at 4.1x, local slopes -0.110, -0.144,
  -0.083, -0.133; the hero 3.6% above the prediction, inside the interval.
"""

import dataclasses

from ladder.recipe import Recipe
from ladder.spec import DataSpec, DomainSpec, FitSpec, GateSpec, LadderSpec, Rule, ScheduleSpec

RECIPE = Recipe(
    head_dim=8,
    n_experts=8,
    top_k=2,
    expert_ratio=1.0,
    tokens_per_param=50.0,
    seq_len=128,
    lr=Rule("power_c", 0.09, -0.125),
    batch=Rule("power_c", 0.1, 0.3271),
    schedule=ScheduleSpec(kind="wsd", warmup_frac=0.02, decay_frac=0.2, cooldown_shape="1-sqrt",
                          branch_fracs=(0.25, 0.5)),
)
LAYERS = 3

WIDTHS = (16, 24, 32, 40, 48)
# Two seeds per size: one run's final loss moves ~2% between seeds here, as much as the error
# the gate allows; the fit sees both, the backtest and bootstrap treat a size as one unit.
RUNGS = tuple(RECIPE.rung(f"rung_{i + 1}" + (f"_r{r}" if r else ""), d, LAYERS, replica=r)
              for r in (0, 1) for i, d in enumerate(WIDTHS))
_hero = RECIPE.rung("hero", 72, LAYERS, cpus=2.0)
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
    fit=FitSpec(law="compute", curve_law="multipower", bootstrap=200),
    gate=GateSpec(max_backtest_error=0.02, max_interval_width=0.15),
    description="default CPU ladder",
)
