"""Spec constants, the SpecError every problem is raised as, Rules (values as power laws) and ModelSpec."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from fits.defaults import DEFAULT_TASK_RULE

BALANCING = ("aux_free", "aux_free_quantile", "aux_loss", "none")
SCHEDULES = ("cosine", "linear", "constant", "wsd")
COOLDOWN_SHAPES = ("linear", "1-sqrt", "cosine")
RULE_KINDS = ("fixed", "power_n", "power_c")
WANDB_MODES = ("auto", "online", "offline", "disabled")
BACKTEST_RULES = ("noise", "threshold")
PARALLEL_MODES = ("replicated", "fsdp")
COMPUTE_DTYPES = ("float32", "bfloat16")
BUILTIN_SOURCES = ("builtin:stdlib_py", "builtin:pydoc_topics", "builtin:kjv", "builtin:web_bible")

# Fields that describe but do not change what a step computes: excluded from content hashes.
# "replica" only picks a rung's seed, and the resolved seed is hashed.
COSMETIC_FIELDS = frozenset({"description", "notes", "wandb", "resources", "root", "replica", "placement", "changes",
                             "base_dir", "variants"})
# Fields added after ladders had already run: at these defaults they stay out of content hashes, so
# existing outputs keep their addresses; any other value is hashed like every field.
HASH_NEUTRAL_DEFAULTS = {"compute_dtype": "float32", "n_kv_heads": 0, "expert_latent": 0, "shared_d_ff": 0,
                         "curve_fit": "auto", "baseline": "none", "baseline_flops_per_step": {},
                         "advisory": False, "budget": 0.0, "accept_single_seed": False, "require_replicas": False,
                         "n_evals": 10, "n_checkpoints": 10, "final_eval_tokens": 0,
                         # Not the field's default: "head" is what runs before the field computed, so they keep
                         # their addresses under it, and the default "spread" moves every step to a new one.
                         "eval_sample": "head",
                         # Likewise: runs from before the field evaluated with capacity dispatch.
                         "eval_dropless": False,
                         # Likewise: a gate from before the field blocked on the threshold alone.
                         "backtest_rule": "threshold",
                         # A gate from before the field had no replica check; at the default it keeps its address.
                         "replica_outlier_level": 0.01,
                         # A run's own trainer: None takes the ladder's, which a training step hashes by itself.
                         "trainer": None,
                         # A run from before tasks were scored evaluated none; without tasks it keeps its address.
                         "tasks": [],
                         # The task forecasts' settings (issue 57), at their defaults.
                         "forecast_tasks": [], "task_chance": {}, "hero_task_evals": 1, "task_rule": DEFAULT_TASK_RULE,
                         # No prior on E (FitSpec.E_prior): the fits from before the field keep their addresses.
                         "E_prior": None,
                         # The laws' disagreement in the band (FitSpec.disagreement), as before the field.
                         "disagreement": "band",
                         # A data-mix switch (DataSpec) at its default: no switch, the addresses runs had before it.
                         "switch_at": 0.0, "switch_weights": {}}


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


class TokenizerVocab(int):
    """``ModelSpec.vocab`` left at its default: the tokenizer's size, 256 (``bytes``) until the spec is
    resolved against ``data.tokenizer`` (ladder.spec.vocab). An int, so that sizes, FLOPs, JSON and step
    hashes see 256 as before; its own type, so that a vocab a user wrote (even 256) is told from the
    default and refused when it is smaller than the tokenizer's rather than silently raised."""

    def __repr__(self) -> str:
        return int.__repr__(self)


FOLLOW_TOKENIZER = TokenizerVocab(256)


@dataclass(frozen=True)
class ModelSpec:
    """A decoder-only transformer; ``n_experts > 0`` makes every MLP a routed MoE."""

    d_model: int
    n_layers: int
    n_heads: int
    d_ff: int = 0  # dense SwiGLU width; 0 means 4 * d_model * 2/3 rounded to 8 (dense layers only)
    vocab: int = FOLLOW_TOKENIZER  # the tokenizer's size unless set
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
