"""The smoke ladder: the default ladder's shape at a size that finishes in about a minute (tests).

Four MoE rungs of one recipe and a hero at about 2x the largest rung's compute.
"""

from ladder.spec import DataSpec, DomainSpec, FitSpec, GateSpec, LadderSpec, ScheduleSpec
from ladder.spec.recipe import Recipe

RECIPE = Recipe(
    head_dim=8,
    layers_per_width=1 / 32,
    min_layers=2,
    n_experts=4,
    top_k=2,
    expert_ratio=1.0,
    tokens_per_param=10.0,
    seq_len=64,
    lr=3e-3,
    batch=16,
    schedule=ScheduleSpec(kind="wsd", warmup_frac=0.05, decay_frac=0.2, cooldown_shape="1-sqrt", branch_fracs=(0.5,)),
)

LADDER = LadderSpec(
    name="smoke",
    rungs=tuple(RECIPE.rung(f"rung_{i + 1}", d) for i, d in enumerate((16, 24, 32, 40))),
    hero=RECIPE.rung("hero", 48, cpus=2.0),  # like tiny's hero: trains data-parallel over 2 host devices
    data=DataSpec(
        domains=(DomainSpec("code", "builtin:stdlib_py", 0.5), DomainSpec("prose", "builtin:web_bible", 0.5)),
        eval_tokens=8_192,
    ),
    fit=FitSpec(law="compute", curve_law="multipower", bootstrap=50),
    # The smoke ladder is too small to extrapolate well; its gate is loose so tests reach the hero.
    gate=GateSpec(max_backtest_error=0.5, max_interval_width=10.0),
    description="CI smoke ladder",
)
