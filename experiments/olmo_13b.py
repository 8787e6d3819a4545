"""OLMo's model ladder with OLMo 2 13B (peteish13, 5T tokens) as the hero: experiments/olmo_7b.py's
16 rungs, the hero scored as the paper scores it, the mean of its last 5 evaluations.

    ladder import-results experiments/olmo_13b.py fits/reference_data/olmo_ladder
    ladder submit experiments/olmo_13b.py
    ladder report experiments/olmo_13b.py --json
"""

import runpy
from pathlib import Path

from ladder.spec import OptimSpec, RungSpec, ScheduleSpec

olmo = runpy.run_path(str(Path(__file__).with_name("olmo_7b.py")))

LADDER = olmo["ladder"](
    "olmo_13b",
    RungSpec(name="peteish13_eval_final", model=olmo["model"](5120, 40, 40, 13824), tokens=596_057 * 2048 * olmo["SEQ"],
             batch_size=2048, seq_len=olmo["SEQ"], optim=OptimSpec(lr=9e-4, weight_decay=0.1, grad_clip=1.0),
             schedule=ScheduleSpec(kind="cosine", warmup_frac=0.001, final_lr_frac=0.0),
             description="OLMo 2 13B (peteish13), 5.0T tokens, scored by the mean of its last 5 evals (imported)"),
    hero_task_evals=5, description="OLMo's task ladder, 13B hero (Bhagia et al. 2024; public data)")
