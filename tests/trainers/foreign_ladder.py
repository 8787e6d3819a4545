"""A small ladder whose every run is trained by a foreign trainer, tests/trainers/bigram_trainer.py: the
rungs by it as a command (the ladder's trainer), the hero by it as a callable in its step's Ray worker
(the hero's own trainer). Real text: the standard library's inspect.py as code, docs/concepts.md as prose."""

import inspect
from pathlib import Path

from ladder.spec import DataSpec, DomainSpec, FitSpec, GateSpec, LadderSpec, ScheduleSpec, TrainerSpec
from ladder.spec.recipe import Recipe

HERE = Path(__file__).resolve().parent
RECIPE = Recipe(head_dim=8, layers_per_width=1 / 32, min_layers=2, tokens_per_param=10.0, seq_len=32, lr=3e-2,
                batch=8, schedule=ScheduleSpec(kind="wsd", warmup_frac=0.1, decay_frac=0.2, cooldown_shape="1-sqrt"))
BIGRAM = TrainerSpec(kind="command", command=("{python}", "bigram_trainer.py", "--config", "{config}"),
                     env={"OMP_NUM_THREADS": "1"}, code=("bigram_trainer.py",))
IN_PROCESS = TrainerSpec(kind="callable", function="bigram_trainer:train", code=("bigram_trainer.py",))

LADDER = LadderSpec(
    name="foreign",
    rungs=tuple(RECIPE.rung(f"rung_{i + 1}", d, tokens=256 * s, checkpoint_every=10, eval_every=20, log_every=5)
                for i, (d, s) in enumerate(zip((16, 24, 32), (40, 60, 80), strict=True))),
    hero=RECIPE.rung("hero", 40, tokens=256 * 120, checkpoint_every=20, eval_every=20, log_every=5, trainer=IN_PROCESS),
    data=DataSpec(domains=(DomainSpec("code", inspect.__file__, 0.5),
                           DomainSpec("prose", str(HERE.parents[1] / "docs" / "concepts.md"), 0.5)),
                  eval_tokens=1_024, final_eval_tokens=2_048),
    fit=FitSpec(law="compute", curve_law="none", bootstrap=10),
    gate=GateSpec(max_backtest_error=10.0, max_interval_width=100.0),
    trainer=BIGRAM,
    description="a ladder trained by a foreign trainer (tests)",
)
