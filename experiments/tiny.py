"""The default ladder (`make demo`): four MoE rungs and a hero of one recipe, on the 2-core CPU.

Rung compute grows geometrically and the hero sits about 10x above the largest rung; all runs
share experts, top-k, tokens per active parameter, schedule and the LR/batch rule.
"""

from ladder.recipe import Recipe
from ladder.spec import DataSpec, DomainSpec, FitSpec, GateSpec, LadderSpec, ScheduleSpec

RECIPE = Recipe(
    head_dim=16,
    layers_per_width=1 / 16,
    min_layers=2,
    n_experts=8,
    top_k=2,
    expert_ratio=1.0,
    tokens_per_param=20.0,
    seq_len=128,
    lr=3e-3,
    batch=16,
    schedule=ScheduleSpec(kind="wsd", warmup_frac=0.02, decay_frac=0.2, cooldown_shape="1-sqrt"),
)

LADDER = LadderSpec(
    name="tiny",
    rungs=tuple(RECIPE.rung(f"rung_{i + 1}", d) for i, d in enumerate((32, 48, 64, 80))),
    hero=RECIPE.rung("hero", 128, cpus=2.0),
    data=DataSpec(
        domains=(DomainSpec("code", "builtin:stdlib_py", 0.5), DomainSpec("prose", "builtin:web_bible", 0.5)),
    ),
    fit=FitSpec(law="compute", curve_law="multipower", bootstrap=200),
    gate=GateSpec(max_backtest_error=0.02, max_interval_width=0.10),
    description="default CPU ladder",
)
