"""Frozen, validated dataclasses that declare a scaling ladder.

An experiment is a Python file that defines ``LADDER = LadderSpec(...)``; :func:`load_spec` imports
it, applies ``--set key=value`` overrides, resolves rules (learning rate and batch size as power
laws in N or C) into concrete numbers, and validates every field. Every problem is reported as one
line naming the field, e.g. ``rungs[2].model.top_k: 9 exceeds n_experts 8``.

One concern a module: model.py (constants, SpecError, Rule, ModelSpec), runs.py (RungSpec and the
ladder's other parts, LadderSpec), isoflop.py (the IsoFLOP stage's spec), validate.py, load.py
(resolution, overrides, load_spec) and serial.py (to and from plain dicts).

Counting conventions (shared with fits/ and the trainer, checked against a hand count in tests):
- ``params_non_embedding`` excludes the input embedding and, when untied, the output head.
- ``params_active`` counts what one token touches: the non-embedding params minus the routed
  experts it skips. It is the N the fits use by default (MoE scaling laws in active params).
- ``flops_per_token`` = 6 * (active non-embedding params + the output projection d * vocab)
  + 12 * n_layers * seq_len * d_model (attention scores and values, forward + backward; PaLM's
  convention, causal masking not discounted).
"""

from .isoflop import IsoFlopBudget, IsoFlopSpec
from .load import REPLICA_SEED_STRIDE, apply_overrides, apply_variant, load_spec, resolve, resolve_rung
from .model import (
    BALANCING,
    BUILTIN_SOURCES,
    COMPUTE_DTYPES,
    COOLDOWN_SHAPES,
    COSMETIC_FIELDS,
    HASH_NEUTRAL_DEFAULTS,
    PARALLEL_MODES,
    RULE_KINDS,
    SCHEDULES,
    WANDB_MODES,
    ModelSpec,
    Rule,
    SpecError,
    deepseek_batch_rule,
    deepseek_lr_rule,
)
from .runs import (
    TRAINER_KINDS,
    DataSpec,
    DomainSpec,
    FitSpec,
    GateSpec,
    LadderSpec,
    OptimSpec,
    Resources,
    RunChange,
    RungSpec,
    ScheduleSpec,
    TargetSpec,
    TaskSpec,
    TrainerSpec,
    WandbSpec,
)
from .serial import data_from_dict, rung_from_dict, to_dict, trainer_from_dict
from .validate import validate

__all__ = [
    "BALANCING", "BUILTIN_SOURCES", "COMPUTE_DTYPES", "COOLDOWN_SHAPES", "COSMETIC_FIELDS", "HASH_NEUTRAL_DEFAULTS",
    "PARALLEL_MODES", "REPLICA_SEED_STRIDE", "RULE_KINDS", "SCHEDULES", "TRAINER_KINDS", "WANDB_MODES",
    "DataSpec", "DomainSpec", "FitSpec", "GateSpec", "IsoFlopBudget", "IsoFlopSpec", "LadderSpec", "ModelSpec",
    "OptimSpec", "Resources", "Rule", "RunChange", "RungSpec", "ScheduleSpec", "SpecError", "TargetSpec", "TaskSpec",
    "TrainerSpec", "WandbSpec",
    "apply_overrides", "apply_variant", "data_from_dict", "deepseek_batch_rule", "deepseek_lr_rule", "load_spec", "resolve",
    "resolve_rung", "rung_from_dict", "to_dict", "trainer_from_dict", "validate",
]
