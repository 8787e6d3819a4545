"""Marin's public 535B-A23B MoE ladder: plan it, import its recorded curves, forecast the hero.

Marin's shapes (fits/reference_data/marin_moe_535b/README.md; marin-community/marin
experiments/grug/moe_hero_ep): 384 routed experts, top-8, 2 shared experts, experts d/2 wide in a
d/2 latent, shared experts d/2 wide, 128-wide heads, grouped-query attention with max(local,
global) KV heads, untied 128,256-token embeddings, 4,096-token sequences.

    rung   layers heads kv  batch   steps   tokens   active (ours / Marin)       total (Marin)
    d768      8     6    1   1,024  11,420    47.9B      60.57M / 60,555,264     1,588,199,424
    d1024    12     8    2   2,048  15,276   128.1B     162.03M / 162,004,992    3,973,054,464
    d1536    16    12    3   6,144  15,128   380.7B     481.35M / 481,296,384   11,520,442,368
    d2048    22    16    4  11,264  20,072   926.1B      1.171B / 1,170,735,104 27,717,533,696
    hero d6144 48  48   12  11,264 390,251  18.005T     22.763B / 22,762,487,808 535,305,388,032

Ours counts the RMSNorm scales too (Marin's formula does not): +0.02% or less. FLOPs differ more:
ours (spec.py) adds the lm_head's 6 d V per token and attention's 12 L T d; Marin's compute
(levanter's analytic count with the lm_head term removed) is given below per step, and `ladder plan`
shows both. Marin's rung learning rates were computed at launch and are not recorded; the Adam LR
here is the hero's (0.000759). The trainer builds these shapes (grouped-query attention, latent
experts), but nothing here trains at this scale: the rungs and the hero are imported.

To forecast from the recorded curves, with no training and no network:

    ladder import-results experiments/marin_moe_535b.py fits/reference_data/marin_moe_535b/rung_curves.csv
    ladder submit experiments/marin_moe_535b.py
    ladder report experiments/marin_moe_535b.py --json

d2048 stopped at 80% of its steps; it is recorded as partial and the fit carries the missing part
in the band. `fit.baseline="marin"` adds Marin's own method (a per-5% fit with E pinned at 1.5 and
+0.005 on d2048's extrapolated tail) beside ours, on Marin's compute figures.
"""

import dataclasses

from ladder.spec import (
    DataSpec,
    DomainSpec,
    FitSpec,
    GateSpec,
    LadderSpec,
    ModelSpec,
    OptimSpec,
    Resources,
    RunChange,
    RungSpec,
    ScheduleSpec,
    WandbSpec,
)

VOCAB = 128_256
# Marin's tokenizer: Llama 3's 128,256 tokens (marin-community/marin-tokenizer adds a chat template). Declared,
# not held: planning, importing and forecasting need only its size; training here would need its tokenizer.json.
TOKENIZER = f"declared:{VOCAB}:marin-community/marin-tokenizer (Llama 3)"
SEQ = 4096
# Marin's training compute per step (forward + backward, lm_head term removed): rungs.csv, hero_spec.csv.
MARIN_FLOPS_PER_STEP = {
    "d768": 2.320210052775936e15,
    "d1024": 1.129954355970048e16,
    "d1536": 9.130921800656486e16,
    "d2048": 3.857022193930076e17,
    "d6144": 6.690294608796058e18,
}


def moe(d_model: int, n_layers: int, n_heads: int, n_kv_heads: int) -> ModelSpec:
    return ModelSpec(
        d_model=d_model, n_layers=n_layers, n_heads=n_heads, n_kv_heads=n_kv_heads, vocab=VOCAB,
        tie_embeddings=False, qk_norm=True, z_loss=1e-4, n_experts=384, top_k=8, n_shared=2,
        expert_d_ff=d_model // 2, expert_latent=d_model // 2, shared_d_ff=d_model // 2,
        balancing="aux_free_quantile",
    )


def run(name: str, model: ModelSpec, batch: int, steps: int, racks: int, description: str) -> RungSpec:
    return RungSpec(
        name=name, model=model, tokens=steps * batch * SEQ, batch_size=batch, seq_len=SEQ,
        optim=OptimSpec(lr=7.59e-4, weight_decay=0.1, grad_clip=1.0),
        schedule=ScheduleSpec(kind="linear", warmup_frac=0.01, final_lr_frac=0.05),
        resources=Resources(cpus=120, gpus=4 * 16 * racks), eval_every=max(1, round(steps / 20)),
        description=description,
    )


LADDER = LadderSpec(
    name="marin_moe_535b",
    rungs=(
        run("d768", moe(768, 8, 6, 1), 1024, 11_420, 1, "61M active / 1.6B total, 48B tokens (Marin)"),
        run("d1024", moe(1024, 12, 8, 2), 2048, 15_276, 2, "162M / 4.0B, 128B tokens (Marin)"),
        run("d1536", moe(1536, 16, 12, 3), 6144, 15_128, 6, "481M / 11.5B, 381B tokens (Marin)"),
        run("d2048", moe(2048, 22, 16, 4), 11_264, 20_072, 11, "1.2B / 27.7B, 926B tokens (Marin; stopped at 80%)"),
    ),
    hero=dataclasses.replace(
        run("d6144", moe(6144, 48, 48, 12), 11_264, 390_251, 11,
            "d6144, 48 layers, 22.76B active / 535.3B total, 18.0T tokens (Marin's hero)"),
        # The hero's data mix changed at step 108,000 under a new W&B run id (issue #9126): `ladder follow`
        # widens the forecast past it to the rungs-only band until 3 points after it, then re-anchors there.
        changes=(RunChange(108_000, "data mix", "new mix under W&B run hero-mix-996f4891-step108k (marin #9126)"),)),
    # Marin trained on its own tokenized mixture; point this at yours, and data.tokenizer at its tokenizer.json,
    # to train (neither is needed to plan, import or predict).
    data=DataSpec(domains=(DomainSpec("pretraining_mix", "gs://your-bucket/tokenized/pretraining_mix", 1.0),),
                  tokenizer=TOKENIZER),
    # The final-loss law sees only the three complete rungs (3 points, 3 parameters): a side figure here, so a
    # short bootstrap; the forecast is the curve law's (fit.curve_fit="auto" on the imported curves).
    fit=FitSpec(law="compute", curve_law="none", bootstrap=50, baseline="marin",
                baseline_flops_per_step=MARIN_FLOPS_PER_STEP),
    gate=GateSpec(max_backtest_error=0.02, max_interval_width=0.10),
    wandb=WandbSpec(entity="marin-community", project="marin_moe"),
    train_hero=False,  # forecast here, trained on GB200 racks: import its curve with `ladder import-results`
    description="Marin 535B-A23B MoE scaling ladder (public figures)",
)
