"""Marin's public 535B-A23B MoE ladder, to plan and to predict from recorded rung results.

Rungs (384 routed experts, top-8, one shared expert; batch in sequences of 4096 tokens), with
Marin's published sizes (active / total parameters):

    d768   61M / 1.6B     48B tokens   batch 1,024
    d1024 162M / 4.0B    128B tokens   batch 2,048
    d1536 481M / 11.5B   381B tokens   batch 6,144
    d2048 1.2B / 27.7B   926B tokens   batch 11,264
    hero  d6144, 48 layers, 23B / 535B, 18.75T tokens, about 2.7e24 FLOPs

Depths and expert widths here are chosen so this tool's counting convention (ladder/spec.py:
active non-embedding parameters, a 128,256-token vocabulary, untied embeddings) lands near the
published figures (within ~25% on active parameters, ~10% on totals); the FLOPs of the hero
match the published 2.7e24. Nothing here trains on a laptop: `ladder plan` prices it, and
`ladder fit` / `ladder predict` run on the rungs' recorded losses (a CSV of params, tokens, loss).
"""

from ladder.spec import (
    DataSpec,
    DomainSpec,
    FitSpec,
    GateSpec,
    LadderSpec,
    ModelSpec,
    OptimSpec,
    Resources,
    RungSpec,
    ScheduleSpec,
    TargetSpec,
    WandbSpec,
)

VOCAB = 128_256
SEQ = 4096


def moe(d_model: int, n_layers: int, n_shared: int = 1) -> ModelSpec:
    return ModelSpec(
        d_model=d_model, n_layers=n_layers, n_heads=d_model // 128, vocab=VOCAB, tie_embeddings=False,
        qk_norm=True, z_loss=1e-4, n_experts=384, top_k=8, n_shared=n_shared, expert_d_ff=d_model // 4,
        balancing="aux_free_quantile",
    )


def run(name: str, model: ModelSpec, tokens: float, batch: int, lr: float, gpus: int, description: str) -> RungSpec:
    return RungSpec(
        name=name, model=model, tokens=int(tokens), batch_size=batch, seq_len=SEQ,
        optim=OptimSpec(lr=lr, weight_decay=0.1, grad_clip=1.0),
        schedule=ScheduleSpec(kind="wsd", warmup_frac=0.01, decay_frac=0.2, cooldown_shape="1-sqrt"),
        resources=Resources(cpus=8, gpus=gpus), description=description,
    )


LADDER = LadderSpec(
    name="marin_moe_535b",
    rungs=(
        run("rung_1", moe(768, 9), 48e9, 1024, 3e-3, 8, "d768, 61M active / 1.6B total (Marin)"),
        run("rung_2", moe(1024, 11), 128e9, 2048, 2.5e-3, 8, "d1024, 162M / 4.0B (Marin)"),
        run("rung_3", moe(1536, 16), 381e9, 6144, 2e-3, 8, "d1536, 481M / 11.5B (Marin)"),
        run("rung_4", moe(2048, 20), 926e9, 11264, 1.6e-3, 8, "d2048, 1.2B / 27.7B (Marin)"),
    ),
    hero=run("hero", moe(6144, 48, n_shared=2), 18.75e12, 16384, 8e-4, 8,
             "d6144, 48 layers, 535B total / 23B active, 18.75T tokens (Marin)"),
    targets=(TargetSpec("hero_2x_tokens", moe(6144, 48, n_shared=2), int(37.5e12), SEQ,
                        "the hero's configuration trained twice as long"),),
    # Marin trained on its own tokenized mixture; point this at yours to train (not needed to plan or predict).
    data=DataSpec(domains=(DomainSpec("pretraining_mix", "gs://your-bucket/tokenized/pretraining_mix", 1.0),)),
    fit=FitSpec(law="compute", curve_law="multipower", bootstrap=1000),
    gate=GateSpec(max_backtest_error=0.02, max_interval_width=0.05),
    wandb=WandbSpec(entity="marin-community", project="marin_moe"),
    train_hero=False,  # predicted here, trained on a pod: import its result with `ladder import-results`
    description="Marin 535B-A23B MoE scaling ladder (public figures)",
)
