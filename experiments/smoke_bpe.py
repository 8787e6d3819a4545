"""The smoke ladder on a byte-level BPE the ladder trains itself (``data.tokenizer = "bpe:1024"``).

Its DAG adds a ``tokenizer`` step (the BPE, trained on every domain's training split) and one
``tokenize_<domain>`` step per source (the token shards every rung maps). Three small dense rungs on
English prose and Python's documentation, a hero predicted but not trained: the suite trains it
(tests/ladder/test_tokenize_ladder.py) to check a BPE ladder end to end, its bits per byte against the same
ladder on ``bytes`` (``--set data.tokenizer=bytes``),
and a ``tokenizer.json`` trained elsewhere (``--set data.tokenizer=PATH``: the model's vocab follows it).
"""

from ladder.spec import DataSpec, DomainSpec, FitSpec, GateSpec, LadderSpec, ScheduleSpec
from ladder.spec.recipe import Recipe

RECIPE = Recipe(
    head_dim=8,
    layers_per_width=1 / 16,
    min_layers=2,
    tokens_per_param=4.0,
    seq_len=64,
    lr=3e-3,
    batch=16,
    schedule=ScheduleSpec(kind="wsd", warmup_frac=0.05, decay_frac=0.2, cooldown_shape="1-sqrt"),
)

LADDER = LadderSpec(
    name="smoke_bpe",
    rungs=tuple(RECIPE.rung(f"rung_{i + 1}", d) for i, d in enumerate((16, 24, 32))),
    # predicted, not trained: the gate is advisory and the ladder completes on its rungs alone
    hero=RECIPE.rung("hero", 48),
    train_hero=False,
    data=DataSpec(
        domains=(DomainSpec("prose", "builtin:web_bible", 0.7), DomainSpec("docs", "builtin:pydoc_topics", 0.3)),
        tokenizer="bpe:1024",
        eval_tokens=8_192,
    ),
    fit=FitSpec(law="compute", curve_law="none", bootstrap=20),
    gate=GateSpec(max_backtest_error=0.5, max_interval_width=10.0),
    description="CI smoke ladder on a BPE the ladder trains",
)
