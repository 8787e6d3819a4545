"""The compare tests' ladder: the earlier default ladder's layout (five MoE sizes at three layers, two seeds
each), which pairs its runs by seed, with the two variants the default ladder declares. Imported from
drawn finals in the tests, never trained."""

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
    description="the compare tests' two-seed ladder",
    variants={
        "dense": {"runs.model.n_experts": 0, "runs.model.top_k": 0, "runs.model.expert_d_ff": 0},
        "code70": {"data.domains[0].weight": 0.7, "data.domains[1].weight": 0.15, "data.domains[2].weight": 0.15},
    },
)
