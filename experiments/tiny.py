"""The default ladder (`make demo`): five MoE rung sizes, two seeds each, and a hero of one recipe.

Recipe (ladder/spec/recipe.py): 8 experts, top-2, expert width = d_model, head dimension 8, three layers
at every size (width alone grows, so no rung sits across a depth jump), 50 tokens per active
parameter, WSD with a (1 - sqrt) cooldown, and the learning rate and batch from power laws in
compute. The LR rule is the fit of an LR sweep on three rung sizes (never the hero), recorded in
experiments/tiny_sweeps.csv: `ladder fit-rule experiments/tiny_sweeps.csv --where sweep=lr` gives
lr_opt = 0.797 C^-0.195 (exponent 90% interval [-0.315, -0.175]); the recipe uses 0.577 C^-0.183,
the same optima read by hand, within 3% of the fit at every rung and the hero. The batch keeps
DeepSeek LLM's exponent (C^0.3271) with the coefficient the batch sweep in the same file supports:
the smallest size was still step-limited at 3 sequences (2 / 3 / 4 gave 2.162 / 2.179 / 2.272),
the others flat between 3 and 9. Each size trains on two seeds (replicas); the compute law
L(C) = E + A C^-alpha is fitted on the runs' final eval losses along the recipe's line, the hero
sits 4.3x beyond the largest size, and the gate's backtest fits the three smallest sizes and
predicts the largest, 4.1x beyond them.

What each choice was measured against, what moved the forecast error and what was ruled out (the
frontier, b2, LR against run length, weight decay, data reuse, the eval sample): experiments/tiny_record.md.
"""

from ladder.spec import DataSpec, DomainSpec, FitSpec, GateSpec, LadderSpec, Rule, ScheduleSpec
from ladder.spec.recipe import Recipe

RECIPE = Recipe(
    head_dim=8,
    n_experts=8,
    top_k=2,
    expert_ratio=1.0,
    tokens_per_param=50.0,
    seq_len=128,
    lr=Rule("power_c", 0.577, -0.183),
    batch=Rule("power_c", 0.07, 0.3271),
    # No cooldown branches: the compute law fits final losses only and the curve law the main runs'
    # curves, so branches (15% more steps per rung, measured: 240 of rung_1's 1,596) fed nothing.
    schedule=ScheduleSpec(kind="wsd", warmup_frac=0.02, decay_frac=0.2, cooldown_shape="1-sqrt"),
)
LAYERS = 3

WIDTHS = (16, 24, 32, 40, 48)
# Two seeds per size: one run's final loss moves between seeds by as much as the error the gate
# allows; the fit sees both runs, the backtest and the bootstrap treat a size as one unit.
# Five evals and checkpoints per rung, not ten: an eval costs the same at every size and only the
# final one is fitted (tiny_record.md: the time it saves, the finals identical).
RUNGS = tuple(RECIPE.rung(f"rung_{i + 1}" + (f"_r{r}" if r else ""), d, LAYERS, replica=r, n_evals=5, n_checkpoints=5)
              for r in (0, 1) for i, d in enumerate(WIDTHS))
# The hero evaluates five times too: each of its evals reads 1,024 windows a domain and computes every
# expert (dropless), which makes an eval several times dearer than a rung's; its curve is still set
# against the forecast at 20, 40, 60, 80 and 100%.
HERO = RECIPE.rung("hero", 72, LAYERS, cpus=2.0, n_evals=5)

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
        # The final eval, the number the laws fit and the hero is scored on, reads 4x the windows: the
        # shared 256-window sample read 0.7% above the whole held-out split at the small sizes and 1.0%
        # at rung_5 in every stored draw; 1,024 windows sit within 0.14% of it at every size.
        final_eval_tokens=131_072,
    ),
    fit=FitSpec(law="compute", curve_law="multipower", bootstrap=200),
    gate=GateSpec(max_backtest_error=0.02, max_interval_width=0.15),
    description="default CPU ladder",
    # Changes to test against this recipe in one command (`ladder submit experiments/tiny.py --variant NAME`
    # trains the ladder tiny+NAME; `ladder compare experiments/tiny.py experiments/tiny.py --variant-b NAME`
    # sets it against tiny). Neither changes tiny's own steps.
    variants={
        # dense SwiGLU MLPs (width 8/3 d_model) in place of the 8-expert top-2 MoE
        "dense": {"runs.model.n_experts": 0, "runs.model.top_k": 0, "runs.model.expert_d_ff": 0},
        # more code in the mixture: code 0.7, the two Bibles 0.15 each
        "code70": {"data.domains[0].weight": 0.7, "data.domains[1].weight": 0.15, "data.domains[2].weight": 0.15},
    },
)
