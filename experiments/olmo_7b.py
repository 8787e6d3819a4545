"""OLMo's model ladder (Bhagia et al. 2024, "Establishing Task Scaling Laws via Compute-Efficient Model
Ladders") with OLMo 2 7B as the hero: forecast its task accuracies from the 16 small runs.

The rungs are the paper's 16 (fits/reference_data/olmo_ladder/final.json): 190M, 370M, 760M and 1B
(1.3B), each trained to 1, 2, 5 and 10 times 20 tokens per parameter. The 0.5xC runs and the *-rerun
files (a 1xC run evaluated twice as often) are left out, as the paper leaves them. The shapes are
OLMo's (d_model, layers, heads, SwiGLU width; qk-norm, untied 100,352-token embeddings): OLMo's own
count n in final.json is our non-embedding count plus one embedding matrix (and its qk-norm over d
rather than per head), so N here is ours, the project's one definition, rungs and hero alike.

    ladder import-results experiments/olmo_7b.py fits/reference_data/olmo_ladder
    ladder submit experiments/olmo_7b.py
    ladder report experiments/olmo_7b.py --json     # "tasks": one row per task

The hero, peteish7, is scored as the paper scores it: its anneal row (the file of that name is the
hero's whole record here). Nothing trains: every run is imported; the forecast sees the rungs only.
docs/tasks.md has the method; experiments/olmo_tasks_record.md the results against the paper's.
"""

from ladder.spec import DataSpec, DomainSpec, FitSpec, GateSpec, LadderSpec, ModelSpec, OptimSpec, RungSpec, ScheduleSpec

VOCAB = 100_352  # OLMo 2's padded embedding size (dolma2 tokenizer)
TOKENIZER = f"declared:{VOCAB}:allenai/dolma2-tokenizer (OLMo 2)"
SEQ = 4096
TASKS = ("mmlu", "hellaswag", "arc_challenge", "arc_easy", "piqa", "csqa", "socialiqa", "openbookqa")
# size: (d_model, layers, heads, SwiGLU width, batch in sequences, steps at 1xC)
SIZES = {
    "190M": (768, 12, 12, 3072, 128, 7272),
    "370M": (1024, 16, 16, 4096, 192, 9452),
    "760M": (1536, 16, 16, 6144, 320, 11580),
    "1B": (2048, 16, 16, 8192, 384, 16279),
}
# the steps each multiple of Chinchilla's tokens ran (the last _step of each file)
STEPS = {
    "190M": {1: 7272, 2: 14533, 5: 36318, 10: 72625},
    "370M": {1: 9452, 2: 18894, 5: 47219, 10: 94427},
    "760M": {1: 11580, 2: 23150, 5: 57858, 10: 115706},
    "1B": {1: 16279, 2: 32547, 5: 81352, 10: 162694},
}


def model(d_model: int, n_layers: int, n_heads: int, d_ff: int) -> ModelSpec:
    return ModelSpec(d_model=d_model, n_layers=n_layers, n_heads=n_heads, d_ff=d_ff, vocab=VOCAB,
                     tie_embeddings=False, qk_norm=True)


def rung(size: str, k: int) -> RungSpec:
    d, layers, heads, ff, batch, _ = SIZES[size]
    steps = STEPS[size][k]
    return RungSpec(name=f"{size}-{k}xC", model=model(d, layers, heads, ff), tokens=steps * batch * SEQ,
                    batch_size=batch, seq_len=SEQ, optim=OptimSpec(lr=4e-3, weight_decay=0.1, grad_clip=1.0),
                    schedule=ScheduleSpec(kind="cosine", warmup_frac=0.01, final_lr_frac=0.1),
                    description=f"OLMo ladder {size} at {k}x Chinchilla tokens (imported)")


RUNGS = tuple(rung(size, k) for size in SIZES for k in (1, 2, 5, 10))
DATA = DataSpec(domains=(DomainSpec("olmo_mix", "gs://your-bucket/tokenized/olmo_mix", 1.0),), tokenizer=TOKENIZER)


def ladder(name: str, hero: RungSpec, hero_task_evals: int, description: str) -> LadderSpec:
    """OLMo's 16 rungs and one hero; C4's loss is the rungs' curve (the final-loss law fits it, and the
    chain through it is one of the task methods)."""
    return LadderSpec(
        name=name, rungs=RUNGS, hero=hero, data=DATA,
        fit=FitSpec(law="compute", curve_law="none", curve_fit="none", bootstrap=50, forecast_tasks=TASKS,
                    hero_task_evals=hero_task_evals),
        gate=GateSpec(max_backtest_error=0.02, max_interval_width=0.10),
        train_hero=False, description=description,
    )


LADDER = ladder(
    "olmo_7b",
    RungSpec(name="peteish7_eval_anneal", model=model(4096, 32, 32, 11008), tokens=3_945_065_873_408,
             batch_size=1024, seq_len=SEQ, optim=OptimSpec(lr=3e-4, weight_decay=0.1, grad_clip=1.0),
             schedule=ScheduleSpec(kind="cosine", warmup_frac=0.001, final_lr_frac=0.0),
             description="OLMo 2 7B (peteish7), 3.95T tokens, scored by its anneal row (imported)"),
    hero_task_evals=1, description="OLMo's task ladder, 7B hero (Bhagia et al. 2024; public data)")
