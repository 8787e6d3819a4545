"""A tiny ladder for the fault tests: the smoke ladder's recipe at a few dozen steps per rung.

Three rungs (the fewest the compute law fits) and a small hero; each rung checkpoints every few
steps so a kill mid-rung has a checkpoint to resume from.
"""

from ladder.spec import DataSpec, DomainSpec, FitSpec, GateSpec, LadderSpec, ScheduleSpec
from ladder.spec.recipe import Recipe

STEPS = (24, 32, 40)  # optimizer steps per rung (batch 8 x seq 32 = 256 tokens a step)
RECIPE = Recipe(
    head_dim=8,
    layers_per_width=1 / 32,
    min_layers=2,
    n_experts=4,
    top_k=2,
    expert_ratio=1.0,
    tokens_per_param=10.0,
    seq_len=32,
    lr=3e-3,
    batch=8,
    schedule=ScheduleSpec(kind="wsd", warmup_frac=0.1, decay_frac=0.2, cooldown_shape="1-sqrt"),
)

LADDER = LadderSpec(
    name="tiny",
    rungs=tuple(RECIPE.rung(f"rung_{i + 1}", d, tokens=256 * s, checkpoint_every=4, eval_every=8)
                for i, (d, s) in enumerate(zip((16, 24, 32), STEPS, strict=True))),
    hero=RECIPE.rung("hero", 40, tokens=256 * 48, checkpoint_every=8, eval_every=16),
    data=DataSpec(
        domains=(DomainSpec("code", "builtin:stdlib_py", 0.5), DomainSpec("prose", "builtin:web_bible", 0.5)),
        eval_tokens=1_024,
    ),
    fit=FitSpec(law="compute", curve_law="multipower", bootstrap=10),
    gate=GateSpec(max_backtest_error=10.0, max_interval_width=100.0),
    description="fault-test ladder",
)
