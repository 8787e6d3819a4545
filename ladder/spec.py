"""Frozen, validated dataclasses that declare a scaling ladder.

An experiment is a Python file that defines ``LADDER = LadderSpec(...)``; :func:`load_spec` imports
it, applies ``--set key=value`` overrides, resolves rules (learning rate and batch size as power
laws in N or C) into concrete numbers, and validates every field. Every problem is reported as one
line naming the field, e.g. ``rungs[2].model.top_k: 9 exceeds n_experts 8``.

Counting conventions (shared with fits/ and the trainer, checked against a hand count in tests):
- ``params_non_embedding`` excludes the input embedding and, when untied, the output head.
- ``params_active`` counts what one token touches: the non-embedding params minus the routed
  experts it skips. It is the N the fits use by default (MoE scaling laws in active params).
- ``flops_per_token`` = 6 * (active non-embedding params + the output projection d * vocab)
  + 12 * n_layers * seq_len * d_model (attention scores and values, forward + backward; PaLM's
  convention, causal masking not discounted).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import math
import sys
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

BALANCING = ("aux_free", "aux_free_quantile", "aux_loss", "none")
SCHEDULES = ("cosine", "linear", "constant", "wsd")
COOLDOWN_SHAPES = ("linear", "1-sqrt", "cosine")
RULE_KINDS = ("fixed", "power_n", "power_c")
WANDB_MODES = ("auto", "online", "offline", "disabled")
PARALLEL_MODES = ("replicated", "fsdp")
COMPUTE_DTYPES = ("float32", "bfloat16")
BUILTIN_SOURCES = ("builtin:stdlib_py", "builtin:pydoc_topics", "builtin:kjv", "builtin:web_bible")

# Fields that describe but do not change what a step computes: excluded from content hashes.
# "replica" only picks a rung's seed, and the resolved seed is hashed.
COSMETIC_FIELDS = frozenset({"description", "notes", "wandb", "resources", "root", "replica"})
# Fields added after ladders had already run: at these defaults they stay out of content hashes, so
# existing outputs keep their addresses; any other value is hashed like every field.
HASH_NEUTRAL_DEFAULTS = {"compute_dtype": "float32", "n_kv_heads": 0, "expert_latent": 0, "shared_d_ff": 0,
                         "curve_fit": "auto", "baseline": "none", "baseline_flops_per_step": {},
                         "advisory": False}


class SpecError(ValueError):
    """A spec problem; ``problems`` holds one line per problem, each naming its field."""

    def __init__(self, problems: Sequence[str]):
        self.problems = list(problems)
        super().__init__("\n".join(self.problems))


@dataclass(frozen=True)
class Rule:
    """A value typed directly (``fixed``) or derived as ``coef * X ** exponent``.

    ``power_n``: X is the rung's active non-embedding parameter count (OLMo's batch and LR in N).
    ``power_c``: X is the rung's training compute in FLOPs (DeepSeek LLM: lr = 0.3118 C^-0.125,
    batch = 0.2920 C^0.3271 tokens). ``lo``/``hi`` clamp the result.
    """

    kind: str = "fixed"
    coef: float = 1.0
    exponent: float = 0.0
    lo: float | None = None
    hi: float | None = None

    def __call__(self, n_active: float, flops: float) -> float:
        if self.kind == "fixed":
            value = self.coef
        elif self.kind == "power_n":
            value = self.coef * n_active**self.exponent
        else:
            value = self.coef * flops**self.exponent
        if self.lo is not None:
            value = max(value, self.lo)
        if self.hi is not None:
            value = min(value, self.hi)
        return value


def deepseek_lr_rule() -> Rule:
    """DeepSeek LLM (2024) eq. 1: optimal lr = 0.3118 * C^-0.1250."""
    return Rule("power_c", 0.3118, -0.1250)


def deepseek_batch_rule() -> Rule:
    """DeepSeek LLM (2024) eq. 1: optimal batch = 0.2920 * C^0.3271 tokens."""
    return Rule("power_c", 0.2920, 0.3271)


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer; ``n_experts > 0`` makes every MLP a routed MoE."""

    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int = 0  # dense SwiGLU width; 0 means 4 * d_model * 2/3 rounded to 8 (dense layers only)
    vocab: int = 256
    tie_embeddings: bool = True
    qk_norm: bool = False
    z_loss: float = 0.0
    n_experts: int = 0
    top_k: int = 0
    n_shared: int = 0
    expert_d_ff: int = 0
    balancing: str = "aux_free"
    bias_update_rate: float = 1e-3
    aux_loss_coef: float = 1e-2
    capacity_factor: float = 1.5
    # dtype of the weight matmuls' operands: "bfloat16" rounds them (and their gradients) to bf16 with
    # float32 accumulation; parameters, optimizer, norms, softmax, router and loss stay float32
    compute_dtype: str = "float32"
    n_kv_heads: int = 0  # grouped-query attention: K and V heads (0: n_heads)
    expert_latent: int = 0  # routed experts work in a latent of this width, with a down and an up projection (0: d_model)
    shared_d_ff: int = 0  # each shared expert's width (0: expert_d_ff)

    @property
    def is_moe(self) -> bool:
        return self.n_experts > 0

    @property
    def head_dim(self) -> int:
        return self.d_model // self.n_heads

    @property
    def dense_d_ff(self) -> int:
        if self.d_ff:
            return self.d_ff
        return max(8, int(round(self.d_model * 8 / 3 / 8)) * 8)

    def _layer_params(self) -> tuple[int, int]:
        """(total, active) parameters of one transformer block."""
        d = self.d_model
        kv = self.n_kv_heads or self.n_heads
        attn = 2 * d * d + 2 * d * kv * self.head_dim + (2 * self.head_dim if self.qk_norm else 0)
        norms = 2 * d
        if not self.is_moe:
            mlp = 3 * d * self.dense_d_ff
            return attn + norms + mlp, attn + norms + mlp
        width = self.expert_latent or d
        expert = 3 * width * self.expert_d_ff
        latent = 2 * d * self.expert_latent
        shared = self.n_shared * 3 * d * (self.shared_d_ff or self.expert_d_ff)
        fixed = d * self.n_experts + latent + shared  # router, latent projections, shared experts
        return attn + norms + fixed + self.n_experts * expert, attn + norms + fixed + self.top_k * expert

    @property
    def params_embedding(self) -> int:
        return self.vocab * self.d_model * (1 if self.tie_embeddings else 2)

    @property
    def params_non_embedding(self) -> int:
        return self.n_layers * self._layer_params()[0] + self.d_model  # + final norm

    @property
    def params_active_non_embedding(self) -> int:
        return self.n_layers * self._layer_params()[1] + self.d_model

    @property
    def params_total(self) -> int:
        return self.params_non_embedding + self.params_embedding

    @property
    def params_active(self) -> int:
        """Active non-embedding parameters: the N of the fits."""
        return self.params_active_non_embedding

    def flops_per_token(self, seq_len: int) -> float:
        dense_equiv = self.params_active_non_embedding + self.d_model * self.vocab
        return 6.0 * dense_equiv + 12.0 * self.n_layers * seq_len * self.d_model


@dataclass(frozen=True)
class ScheduleSpec:
    """Learning-rate schedule. WSD holds the peak, then cools down over ``decay_frac`` of the run.

    ``branch_fracs`` lists extra token budgets (fractions of the run) at which a WSD run branches a
    cooldown from its stable phase, so one run yields several (N, D) points for the 2-D law.
    """

    kind: str = "wsd"
    warmup_frac: float = 0.02
    warmup_steps: int | None = None
    decay_frac: float = 0.2
    cooldown_shape: str = "1-sqrt"
    final_lr_frac: float = 0.0
    branch_fracs: tuple[float, ...] = ()


@dataclass(frozen=True)
class OptimSpec:
    """AdamW with clipping, a weight-decay mask (no decay on norms, biases, router bias) and LR groups."""

    lr: float | Rule = 3e-3
    b1: float = 0.9
    b2: float = 0.95
    eps: float = 1e-8
    weight_decay: float = 0.1
    grad_clip: float = 1.0
    router_lr_mult: float = 1.0
    norm_lr_mult: float = 1.0
    embed_lr_mult: float = 1.0


@dataclass(frozen=True)
class Resources:
    """What a run asks of the cluster, and how it spreads over the devices of the node it lands on.

    ``devices``: how many local devices the run's data-parallel mesh spans (0: the most devices of
    its node that the batch divides over evenly); an explicit count must divide the batch. ``parallel``: ``replicated`` keeps a full copy of
    the parameters and optimizer state on every device; ``fsdp`` shards each large parameter (and its
    optimizer state) over the devices. ``cpu_devices``: on a run without GPUs, the number of XLA host
    devices its process splits into (0: one per whole CPU asked for; 1: one multi-threaded device), so
    a 2-CPU run trains data-parallel over two 1-thread devices (see ``ladder.train.hostdevices``).
    Like the rest of ``resources`` these change where a run computes, not what (up to float
    summation order), so they stay out of the step hashes.
    """

    cpus: float = 1.0
    gpus: float = 0.0
    custom: Mapping[str, float] = field(default_factory=dict)
    max_retries: int = 2
    devices: int = 0
    parallel: str = "replicated"
    cpu_devices: int = 0


@dataclass(frozen=True)
class RungSpec:
    """One training run: a rung of the ladder, or its hero.

    ``batch_size`` is in sequences; a Rule for it yields tokens, divided by ``seq_len``.
    ``seed`` None takes the ladder's seed; with ``replica`` r > 0 it takes the ladder's seed + 1000 r,
    to train the same size again: the fit groups runs of one size, so a ladder can average seeds
    where single rungs are too noisy to extrapolate.
    """

    name: str
    model: ModelSpec
    tokens: int
    batch_size: int | Rule = 16
    seq_len: int = 128
    optim: OptimSpec = field(default_factory=OptimSpec)
    schedule: ScheduleSpec = field(default_factory=ScheduleSpec)
    seed: int | None = None
    replica: int = 0
    eval_every: int = 0  # optimizer steps between evals; 0: about 10 evals per run
    log_every: int = 10
    checkpoint_every: int = 0  # 0: about 10 checkpoints per run
    resources: Resources = field(default_factory=Resources)
    description: str = ""

    @property
    def flops(self) -> float:
        return self.model.flops_per_token(self.seq_len) * self.tokens

    @property
    def batch_tokens(self) -> int:
        assert isinstance(self.batch_size, int), "resolve() the spec first"
        return self.batch_size * self.seq_len

    @property
    def steps(self) -> int:
        return max(1, self.tokens // self.batch_tokens)

    @property
    def lr(self) -> float:
        assert isinstance(self.optim.lr, float | int), "resolve() the spec first"
        return float(self.optim.lr)


@dataclass(frozen=True)
class TargetSpec:
    """An extra configuration to predict without training (e.g. a 535B hero on another ladder)."""

    name: str
    model: ModelSpec
    tokens: int
    seq_len: int = 4096
    description: str = ""

    @property
    def flops(self) -> float:
        return self.model.flops_per_token(self.seq_len) * self.tokens


@dataclass(frozen=True)
class DomainSpec:
    """A named data domain: a built-in corpus (see BUILTIN_SOURCES) or a local file/folder path."""

    name: str
    source: str
    weight: float = 1.0


@dataclass(frozen=True)
class DataSpec:
    domains: tuple[DomainSpec, ...] = (
        DomainSpec("code", "builtin:stdlib_py", 0.5),
        DomainSpec("prose", "builtin:web_bible", 0.5),
    )
    tokenizer: str = "bytes"
    heldout_frac: float = 0.05
    eval_tokens: int = 32_768  # per domain


@dataclass(frozen=True)
class FitSpec:
    law: str = "compute"  # final-loss law: compute | chinchilla | chinchilla_tied (one exponent for N and D)
    curve_law: str = "multipower"  # whole-curve law: multipower | tissue | none
    bootstrap: int = 200
    level: float = 0.9
    pin_E: float | None = None
    loss_metric: str = "eval_loss"  # which final number the laws fit: eval_loss | train_loss
    backtest_holdout: int = 1  # rungs held out at the top for the backtest
    # Imported eval curves: "auto" fits the matched-progress laws to them (fits.progress_eval chooses
    # one by backtests) and predicts the hero's whole curve; "none" fits final losses only.
    curve_fit: str = "auto"
    baseline: str = "none"  # "marin": Marin's per-5% forecast beside ours (fits.marin)
    baseline_flops_per_step: Mapping[str, float] = field(default_factory=dict)  # the baseline's compute, by run


@dataclass(frozen=True)
class GateSpec:
    max_backtest_error: float = 0.02  # relative
    max_interval_width: float = 0.10  # (upper - lower) / predicted
    allow_diverged: bool = False


@dataclass(frozen=True)
class WandbSpec:
    mode: str = "auto"  # auto: online when logged in, else offline
    entity: str | None = None
    project: str | None = None
    tags: tuple[str, ...] = ()  # W&B tags on every run of the ladder (and its ladder-level run)
    notes: str = ""  # W&B notes (the run description) on every run of the ladder


@dataclass(frozen=True)
class LadderSpec:
    name: str
    rungs: tuple[RungSpec, ...]
    hero: RungSpec | None = None
    targets: tuple[TargetSpec, ...] = ()
    data: DataSpec = field(default_factory=DataSpec)
    fit: FitSpec = field(default_factory=FitSpec)
    gate: GateSpec = field(default_factory=GateSpec)
    wandb: WandbSpec = field(default_factory=WandbSpec)
    root: str = "runs"
    seed: int = 0
    hero_forecast_every: int = 0  # hero steps between forecast snapshots; 0: about 8 per run
    train_hero: bool = True  # False: predict the hero but never train it here (e.g. a 535B hero)
    description: str = ""

    def all_runs(self) -> tuple[RungSpec, ...]:
        return self.rungs + ((self.hero,) if self.hero is not None else ())

    def rung(self, name: str) -> RungSpec:
        for run in self.all_runs():
            if run.name == name:
                return run
        raise KeyError(name)


# --------------------------------------------------------------------------------------------
# Resolution: rules -> numbers, ladder seed -> rung seeds.


REPLICA_SEED_STRIDE = 1000


def resolve_rung(rung: RungSpec, ladder_seed: int) -> RungSpec:
    n_active = rung.model.params_active
    flops = rung.flops
    batch = rung.batch_size
    if isinstance(batch, Rule):
        batch = max(1, int(round(batch(n_active, flops) / rung.seq_len)))
    lr = rung.optim.lr
    if isinstance(lr, Rule):
        lr = float(lr(n_active, flops))
    # An explicit seed wins, so resolving a resolved rung again leaves its seed alone.
    seed = ladder_seed + REPLICA_SEED_STRIDE * rung.replica if rung.seed is None else rung.seed
    return dataclasses.replace(
        rung, batch_size=batch, seed=seed, optim=dataclasses.replace(rung.optim, lr=float(lr))
    )


def resolve(spec: LadderSpec) -> LadderSpec:
    """Return the spec with every rule evaluated; validate first so rules see sane numbers."""
    validate(spec)
    rungs = tuple(resolve_rung(r, spec.seed) for r in spec.rungs)
    hero = resolve_rung(spec.hero, spec.seed) if spec.hero is not None else None
    resolved = dataclasses.replace(spec, rungs=rungs, hero=hero)
    validate(resolved)
    return resolved


# --------------------------------------------------------------------------------------------
# Validation: collect every problem as one line naming its field.


def _check_type(problems: list[str], path: str, value: Any, types: tuple[type, ...], what: str) -> bool:
    if isinstance(value, bool) and bool not in types:
        problems.append(f"{path}: expected {what}, got {value!r}")
        return False
    if not isinstance(value, types):
        problems.append(f"{path}: expected {what}, got {value!r}")
        return False
    return True


def _positive_int(problems: list[str], path: str, value: Any) -> None:
    if _check_type(problems, path, value, (int,), "a positive integer") and value <= 0:
        problems.append(f"{path}: must be a positive integer, got {value}")


def _number_in(problems: list[str], path: str, value: Any, lo: float, hi: float, *, lo_open=False) -> None:
    if not _check_type(problems, path, value, (int, float), "a number"):
        return
    if not math.isfinite(value):
        problems.append(f"{path}: must be finite, got {value}")
    elif value < lo or value > hi or (lo_open and value == lo):
        bracket = "(" if lo_open else "["
        problems.append(f"{path}: {value} is outside {bracket}{lo}, {hi}]")


def _choice(problems: list[str], path: str, value: Any, choices: Sequence[str]) -> None:
    if value not in choices:
        problems.append(f"{path}: {value!r} is not one of {', '.join(choices)}")


def _validate_rule(problems: list[str], path: str, rule: Rule) -> None:
    _choice(problems, f"{path}.kind", rule.kind, RULE_KINDS)
    _number_in(problems, f"{path}.coef", rule.coef, 0, math.inf, lo_open=True)
    _number_in(problems, f"{path}.exponent", rule.exponent, -5, 5)


def _validate_model(problems: list[str], path: str, m: ModelSpec) -> None:
    if not isinstance(m, ModelSpec):
        problems.append(f"{path}: expected a ModelSpec, got {type(m).__name__}")
        return
    for name in ("d_model", "n_layers", "n_heads", "vocab"):
        _positive_int(problems, f"{path}.{name}", getattr(m, name))
    if isinstance(m.d_model, int) and isinstance(m.n_heads, int) and m.n_heads > 0 and m.d_model % m.n_heads:
        problems.append(f"{path}.n_heads: d_model {m.d_model} is not divisible by n_heads {m.n_heads}")
    elif isinstance(m.d_model, int) and isinstance(m.n_heads, int) and m.n_heads > 0 and m.head_dim % 2:
        problems.append(f"{path}.n_heads: head dimension {m.head_dim} must be even for RoPE")
    if _check_type(problems, f"{path}.d_ff", m.d_ff, (int,), "a non-negative integer") and m.d_ff < 0:
        problems.append(f"{path}.d_ff: must be >= 0, got {m.d_ff}")
    for name in ("n_kv_heads", "expert_latent", "shared_d_ff"):
        value = getattr(m, name)
        if _check_type(problems, f"{path}.{name}", value, (int,), "a non-negative integer") and value < 0:
            problems.append(f"{path}.{name}: must be >= 0, got {value}")
    if isinstance(m.n_kv_heads, int) and m.n_kv_heads > 0 and isinstance(m.n_heads, int) and m.n_heads % m.n_kv_heads:
        problems.append(f"{path}.n_kv_heads: n_heads {m.n_heads} is not a multiple of n_kv_heads {m.n_kv_heads}")
    _number_in(problems, f"{path}.z_loss", m.z_loss, 0, 1)
    _choice(problems, f"{path}.balancing", m.balancing, BALANCING)
    _choice(problems, f"{path}.compute_dtype", m.compute_dtype, COMPUTE_DTYPES)
    if not _check_type(problems, f"{path}.n_experts", m.n_experts, (int,), "a non-negative integer"):
        return
    if m.n_experts < 0:
        problems.append(f"{path}.n_experts: must be >= 0, got {m.n_experts}")
        return
    if m.n_experts == 0:
        if m.top_k or m.n_shared or m.expert_d_ff:
            problems.append(f"{path}.n_experts: 0 (dense) but top_k/n_shared/expert_d_ff are set; set n_experts")
        return
    _positive_int(problems, f"{path}.top_k", m.top_k)
    _positive_int(problems, f"{path}.expert_d_ff", m.expert_d_ff)
    if isinstance(m.top_k, int) and m.top_k > m.n_experts:
        problems.append(f"{path}.top_k: {m.top_k} exceeds n_experts {m.n_experts}")
    if _check_type(problems, f"{path}.n_shared", m.n_shared, (int,), "a non-negative integer") and m.n_shared < 0:
        problems.append(f"{path}.n_shared: must be >= 0, got {m.n_shared}")
    _number_in(problems, f"{path}.capacity_factor", m.capacity_factor, 1.0, 64.0)
    _number_in(problems, f"{path}.bias_update_rate", m.bias_update_rate, 0, 1)
    _number_in(problems, f"{path}.aux_loss_coef", m.aux_loss_coef, 0, 10)


def _validate_rung(problems: list[str], path: str, r: RungSpec) -> None:
    if not isinstance(r, RungSpec):
        problems.append(f"{path}: expected a RungSpec, got {type(r).__name__}")
        return
    if not isinstance(r.name, str) or not r.name or not r.name.replace("_", "").replace("-", "").isalnum():
        problems.append(f"{path}.name: {r.name!r} must be a non-empty name of letters, digits, '_' or '-'")
    _validate_model(problems, f"{path}.model", r.model)
    _positive_int(problems, f"{path}.tokens", r.tokens)
    _positive_int(problems, f"{path}.seq_len", r.seq_len)
    if isinstance(r.batch_size, Rule):
        _validate_rule(problems, f"{path}.batch_size", r.batch_size)
    else:
        _positive_int(problems, f"{path}.batch_size", r.batch_size)
    o = r.optim
    if isinstance(o.lr, Rule):
        _validate_rule(problems, f"{path}.optim.lr", o.lr)
    else:
        _number_in(problems, f"{path}.optim.lr", o.lr, 0, 1e6, lo_open=True)
    _number_in(problems, f"{path}.optim.b1", o.b1, 0, 1)
    _number_in(problems, f"{path}.optim.b2", o.b2, 0, 1)
    _number_in(problems, f"{path}.optim.eps", o.eps, 0, 1, lo_open=True)
    _number_in(problems, f"{path}.optim.weight_decay", o.weight_decay, 0, 10)
    _number_in(problems, f"{path}.optim.grad_clip", o.grad_clip, 0, 1e6)
    s = r.schedule
    _choice(problems, f"{path}.schedule.kind", s.kind, SCHEDULES)
    _choice(problems, f"{path}.schedule.cooldown_shape", s.cooldown_shape, COOLDOWN_SHAPES)
    _number_in(problems, f"{path}.schedule.warmup_frac", s.warmup_frac, 0, 1)
    _number_in(problems, f"{path}.schedule.decay_frac", s.decay_frac, 0, 1)
    _number_in(problems, f"{path}.schedule.final_lr_frac", s.final_lr_frac, 0, 1)
    if isinstance(s.warmup_frac, float | int) and isinstance(s.decay_frac, float | int):
        if s.warmup_frac + (s.decay_frac if s.kind == "wsd" else 0) > 1:
            problems.append(f"{path}.schedule: warmup_frac + decay_frac exceed 1")
    for i, frac in enumerate(s.branch_fracs):
        _number_in(problems, f"{path}.schedule.branch_fracs[{i}]", frac, 0, 1, lo_open=True)
    if s.branch_fracs and s.kind != "wsd":
        problems.append(f"{path}.schedule.branch_fracs: cooldown branches need kind 'wsd', got {s.kind!r}")
    if s.warmup_steps is not None:
        _positive_int(problems, f"{path}.schedule.warmup_steps", s.warmup_steps)
    if r.seed is not None:
        _check_type(problems, f"{path}.seed", r.seed, (int,), "an integer")
    if not isinstance(r.replica, int) or isinstance(r.replica, bool) or r.replica < 0:
        problems.append(f"{path}.replica: {r.replica!r} must be an integer >= 0 (0: the first run of this size)")
    for name in ("eval_every", "checkpoint_every"):
        v = getattr(r, name)
        if _check_type(problems, f"{path}.{name}", v, (int,), "a non-negative integer") and v < 0:
            problems.append(f"{path}.{name}: must be >= 0, got {v}")
    _positive_int(problems, f"{path}.log_every", r.log_every)
    res = r.resources
    _number_in(problems, f"{path}.resources.cpus", res.cpus, 0, 4096)
    _number_in(problems, f"{path}.resources.gpus", res.gpus, 0, 4096)
    for key, value in dict(res.custom).items():
        _number_in(problems, f"{path}.resources.custom[{key}]", value, 0, 1e9)
    _choice(problems, f"{path}.resources.parallel", res.parallel, PARALLEL_MODES)
    if _check_type(problems, f"{path}.resources.devices", res.devices, (int,), "a non-negative integer"):
        if res.devices < 0:
            problems.append(f"{path}.resources.devices: must be >= 0 (0: every device the batch divides over), "
                            f"got {res.devices}")
        elif res.devices and isinstance(r.batch_size, int) and r.batch_size > 0 and r.batch_size % res.devices:
            problems.append(
                f"{path}.resources.devices: batch_size {r.batch_size} does not split over {res.devices} devices; "
                f"make batch_size a multiple of {res.devices} or set devices to a divisor of {r.batch_size}"
            )
    if _check_type(problems, f"{path}.resources.cpu_devices", res.cpu_devices, (int,), "a non-negative integer"):
        if not 0 <= res.cpu_devices <= 256:
            problems.append(f"{path}.resources.cpu_devices: must be in [0, 256] (0: one per CPU), "
                            f"got {res.cpu_devices}")
    if isinstance(r.batch_size, int) and isinstance(r.seq_len, int) and isinstance(r.tokens, int):
        if r.batch_size > 0 and r.seq_len > 0 and 0 < r.tokens < r.batch_size * r.seq_len:
            problems.append(
                f"{path}.tokens: {r.tokens} is less than one batch ({r.batch_size} x {r.seq_len} tokens)"
            )


def _validate_data(problems: list[str], path: str, d: DataSpec, base_dir: Path | None) -> None:
    if not d.domains:
        problems.append(f"{path}.domains: at least one domain is required")
    names = set()
    for i, dom in enumerate(d.domains):
        p = f"{path}.domains[{i}]"
        if dom.name in names:
            problems.append(f"{p}.name: duplicate domain name {dom.name!r}")
        names.add(dom.name)
        _number_in(problems, f"{p}.weight", dom.weight, 0, 1e6, lo_open=True)
        if dom.source.startswith("builtin:"):
            _choice(problems, f"{p}.source", dom.source, BUILTIN_SOURCES)
        elif "://" not in dom.source:
            src = Path(dom.source)
            if not src.is_absolute() and base_dir is not None:
                src = base_dir / src
            if not src.exists():
                problems.append(f"{p}.source: {dom.source} does not exist; give a file, folder or builtin:*")
    _choice(problems, f"{path}.tokenizer", d.tokenizer, ("bytes",))
    _number_in(problems, f"{path}.heldout_frac", d.heldout_frac, 0, 0.5, lo_open=True)
    _positive_int(problems, f"{path}.eval_tokens", d.eval_tokens)


def validate(spec: LadderSpec, base_dir: Path | None = None) -> None:
    """Raise SpecError listing every problem, one line each; return None when the spec is sound."""
    problems: list[str] = []
    if not isinstance(spec, LadderSpec):
        raise SpecError([f"LADDER: expected a LadderSpec, got {type(spec).__name__}"])
    if not isinstance(spec.name, str) or not spec.name or not spec.name.replace("_", "").replace("-", "").isalnum():
        problems.append(f"name: {spec.name!r} must be a non-empty name of letters, digits, '_' or '-'")
    if not isinstance(spec.rungs, tuple | list) or not spec.rungs:
        problems.append("rungs: at least one rung is required")
        raise SpecError(problems)
    for i, rung in enumerate(spec.rungs):
        _validate_rung(problems, f"rungs[{i}]", rung)
    if spec.hero is not None:
        _validate_rung(problems, "hero", spec.hero)
    seen: set[str] = set()
    for i, run in enumerate(spec.all_runs()):
        name = getattr(run, "name", None)
        if name in seen:
            where = "hero" if i == len(spec.rungs) else f"rungs[{i}]"
            problems.append(f"{where}.name: duplicate run name {name!r}")
        seen.add(name)
    for i, target in enumerate(spec.targets):
        _validate_model(problems, f"targets[{i}].model", target.model)
        _positive_int(problems, f"targets[{i}].tokens", target.tokens)
    _validate_data(problems, "data", spec.data, base_dir)
    _choice(problems, "fit.law", spec.fit.law, ("compute", "chinchilla", "chinchilla_tied"))
    _choice(problems, "fit.curve_law", spec.fit.curve_law, ("multipower", "tissue", "none"))
    _choice(problems, "fit.curve_fit", spec.fit.curve_fit, ("auto", "none"))
    _choice(problems, "fit.baseline", spec.fit.baseline, ("none", "marin"))
    if spec.fit.baseline == "marin":
        runs = [r.name for r in spec.rungs] + ([spec.hero.name] if spec.hero else [])
        missing = [n for n in runs if not spec.fit.baseline_flops_per_step.get(n)]
        if missing:
            problems.append(f"fit.baseline_flops_per_step: no compute per step for {', '.join(missing)}; "
                            "Marin's baseline needs its figure for every rung and the hero")
    _choice(problems, "fit.loss_metric", spec.fit.loss_metric, ("eval_loss", "train_loss"))
    if _check_type(problems, "fit.bootstrap", spec.fit.bootstrap, (int,), "a non-negative integer"):
        if spec.fit.bootstrap < 0:
            problems.append(f"fit.bootstrap: must be >= 0, got {spec.fit.bootstrap}")
    _number_in(problems, "fit.level", spec.fit.level, 0, 1, lo_open=True)
    min_rungs = {"compute": 3, "chinchilla": 3, "chinchilla_tied": 2}.get(spec.fit.law, 0)
    if len(spec.rungs) < min_rungs and spec.hero is not None:
        problems.append(f"rungs: the {spec.fit.law} law needs at least {min_rungs} rungs, got {len(spec.rungs)}")
    _number_in(problems, "gate.max_backtest_error", spec.gate.max_backtest_error, 0, 10, lo_open=True)
    _number_in(problems, "gate.max_interval_width", spec.gate.max_interval_width, 0, 100, lo_open=True)
    _choice(problems, "wandb.mode", spec.wandb.mode, WANDB_MODES)
    if not (isinstance(spec.wandb.tags, tuple | list) and all(isinstance(t, str) and t for t in spec.wandb.tags)):
        problems.append(f"wandb.tags: {spec.wandb.tags!r} must be a tuple of non-empty strings, e.g. ('marin', 'moe')")
    _check_type(problems, "wandb.notes", spec.wandb.notes, (str,), "a string")
    _check_type(problems, "seed", spec.seed, (int,), "an integer")
    _check_type(problems, "root", spec.root, (str,), "a path or URL")
    if problems:
        raise SpecError(problems)


# --------------------------------------------------------------------------------------------
# Loading and overrides.


def _parse_value(text: str) -> Any:
    import ast

    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _split_path(key: str) -> list[str]:
    """'rungs[2].model.top_k' -> ['rungs', '[2]', 'model', 'top_k']."""
    parts: list[str] = []
    for dotted in key.split("."):
        while "[" in dotted:
            head, rest = dotted.split("[", 1)
            if head:
                parts.append(head)
            index, dotted = rest.split("]", 1)
            parts.append(f"[{index}]")
        if dotted:
            parts.append(dotted)
    return parts


def _set_path(obj: Any, parts: list[str], value: Any, key: str) -> Any:
    if not parts:
        return value
    head, rest = parts[0], parts[1:]
    if head.startswith("["):
        if not isinstance(obj, tuple | list):
            raise SpecError([f"--set {key}: {head} indexes something that is not a list"])
        index = head[1:-1]
        items = list(obj)
        if index == "*":
            return tuple(_set_path(item, rest, value, key) for item in items)
        if index.lstrip("-").isdigit():
            i = int(index)
            if not -len(items) <= i < len(items):
                raise SpecError([f"--set {key}: index {i} is out of range (0..{len(items) - 1})"])
        else:
            matches = [j for j, item in enumerate(items) if getattr(item, "name", None) == index]
            if not matches:
                raise SpecError([f"--set {key}: no entry named {index!r}"])
            i = matches[0]
        items[i] = _set_path(items[i], rest, value, key)
        return tuple(items)
    if not dataclasses.is_dataclass(obj):
        raise SpecError([f"--set {key}: {head!r} is not a field (the value there is {obj!r})"])
    names = {f.name for f in dataclasses.fields(obj)}
    if head not in names:
        raise SpecError([f"--set {key}: {type(obj).__name__} has no field {head!r}; fields: {', '.join(sorted(names))}"])
    current = getattr(obj, head)
    new = _set_path(current, rest, value, key)
    if not rest and isinstance(current, float) and isinstance(new, int) and not isinstance(new, bool):
        new = float(new)
    if not rest and isinstance(current, tuple) and isinstance(new, list):
        new = tuple(new)
    return dataclasses.replace(obj, **{head: new})


def apply_overrides(spec: LadderSpec, overrides: Sequence[str]) -> LadderSpec:
    """Apply ``key=value`` overrides. ``seed=3`` sets the ladder seed (every rung without its own)."""
    for item in overrides:
        if "=" not in item:
            raise SpecError([f"--set {item}: expected key=value, e.g. --set seed=3"])
        key, text = item.split("=", 1)
        key = key.strip()
        if not key:
            raise SpecError([f"--set {item}: the key is empty"])
        spec = _set_path(spec, _split_path(key), _parse_value(text), key)
    return spec


def load_spec(path: str | Path, overrides: Sequence[str] = (), *, resolve_rules: bool = True) -> LadderSpec:
    """Import an experiment file, apply overrides, resolve rules and validate.

    Raises SpecError (one line per problem) for any user mistake, including an unreadable file.
    """
    path = Path(path)
    if not path.is_file():
        raise SpecError([f"{path}: no such experiment file; give a .py file that defines LADDER"])
    module_name = f"_ladder_experiment_{abs(hash(str(path.resolve())))}"
    spec_obj = importlib.util.spec_from_file_location(module_name, path)
    if spec_obj is None or spec_obj.loader is None or path.suffix != ".py":
        raise SpecError([f"{path}: not a Python file; an experiment is a .py file that defines LADDER"])
    module = importlib.util.module_from_spec(spec_obj)
    sys.modules[module_name] = module
    try:
        spec_obj.loader.exec_module(module)
    except SpecError:
        raise
    except Exception as exc:  # a user's file: report its error as one line, not a traceback
        raise SpecError([f"{path}: failed to import: {type(exc).__name__}: {exc}"]) from exc
    finally:
        sys.modules.pop(module_name, None)
    ladder = getattr(module, "LADDER", None)
    if ladder is None:
        raise SpecError([f"{path}: defines no LADDER; add LADDER = LadderSpec(...)"])
    if not isinstance(ladder, LadderSpec):
        raise SpecError([f"{path}: LADDER is a {type(ladder).__name__}, expected a LadderSpec"])
    try:
        ladder = apply_overrides(ladder, overrides)
    except TypeError as exc:
        raise SpecError([f"--set: {exc}"]) from exc
    validate(ladder, base_dir=path.parent)
    return resolve(ladder) if resolve_rules else ladder


# --------------------------------------------------------------------------------------------
# Serialisation for hashing and provenance.


def to_dict(obj: Any, *, drop_cosmetic: bool = False) -> Any:
    """A JSON-ready dict of a spec; with drop_cosmetic, fields that do not change results are removed."""
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        out = {"__type__": type(obj).__name__} if isinstance(obj, Rule) else {}
        for f in dataclasses.fields(obj):
            if drop_cosmetic and f.name in COSMETIC_FIELDS:
                continue
            out[f.name] = to_dict(getattr(obj, f.name), drop_cosmetic=drop_cosmetic)
        return out
    if isinstance(obj, Mapping):
        return {str(k): to_dict(v, drop_cosmetic=drop_cosmetic) for k, v in obj.items()}
    if isinstance(obj, tuple | list):
        return [to_dict(v, drop_cosmetic=drop_cosmetic) for v in obj]
    return obj


_TYPES = {
    cls.__name__: cls
    for cls in (Rule, ModelSpec, ScheduleSpec, OptimSpec, Resources, RungSpec, TargetSpec, DomainSpec, DataSpec)
}


def rung_from_dict(d: Mapping[str, Any]) -> RungSpec:
    """Rebuild a resolved RungSpec from ``to_dict`` output (the config a training step receives)."""
    return RungSpec(
        name=d["name"],
        model=ModelSpec(**d["model"]),
        tokens=d["tokens"],
        batch_size=d["batch_size"],
        seq_len=d["seq_len"],
        optim=OptimSpec(**d["optim"]),
        schedule=ScheduleSpec(**{**d["schedule"], "branch_fracs": tuple(d["schedule"].get("branch_fracs", ()))}),
        seed=d["seed"],
        replica=d.get("replica", 0),
        eval_every=d.get("eval_every", 0),
        log_every=d.get("log_every", 10),
        checkpoint_every=d.get("checkpoint_every", 0),
        resources=Resources(**d["resources"]) if "resources" in d else Resources(),
        description=d.get("description", ""),
    )


def data_from_dict(d: Mapping[str, Any]) -> DataSpec:
    return DataSpec(
        domains=tuple(DomainSpec(**dom) for dom in d["domains"]),
        tokenizer=d.get("tokenizer", "bytes"),
        heldout_frac=d.get("heldout_frac", 0.05),
        eval_tokens=d.get("eval_tokens", 32_768),
    )
