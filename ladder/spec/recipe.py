"""One recipe, many sizes: build the rungs and hero of a ladder so they differ only in scale.

A ladder extrapolates only if its rungs share a recipe. Measured on a naive micro ladder (head
dimension growing with width, too few optimizer steps, 10 tokens per parameter, cosine, code
only), a 10x hero came out 8-24% off while a 2x backtest looked fine. So this recipe fixes the
head dimension and grows depth with width, sets tokens as a multiple of active parameters,
keeps the expert layout (count, top-k, width ratio) fixed, uses a WSD schedule, and takes the
learning rate and batch from rules in N so every run gets a comparable number of steps.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from ladder.spec import ModelSpec, OptimSpec, Resources, Rule, RungSpec, ScheduleSpec


@dataclass(frozen=True)
class Recipe:
    head_dim: int = 16
    layers_per_width: float = 1 / 16  # n_layers = d_model * layers_per_width (depth grows with width)
    min_layers: int = 2
    n_experts: int = 8
    top_k: int = 2
    n_shared: int = 0
    expert_ratio: float = 1.0  # expert_d_ff = expert_ratio * d_model (fine-grained experts)
    dense_ratio: float = 8 / 3  # d_ff of a dense model
    balancing: str = "aux_free"
    capacity_factor: float = 1.5
    tokens_per_param: float = 20.0  # tokens per ACTIVE non-embedding parameter
    seq_len: int = 128
    lr: float | Rule = 3e-3
    batch: int | Rule = 16
    schedule: ScheduleSpec = field(default_factory=ScheduleSpec)
    optim: OptimSpec = field(default_factory=OptimSpec)
    cpus: float = 1.0

    def model(self, d_model: int, n_layers: int | None = None) -> ModelSpec:
        layers = n_layers or max(self.min_layers, int(round(d_model * self.layers_per_width)))
        moe = self.n_experts > 0
        return ModelSpec(
            d_model=d_model,
            n_layers=layers,
            n_heads=max(1, d_model // self.head_dim),
            d_ff=0 if moe else int(round(d_model * self.dense_ratio / 8)) * 8,
            n_experts=self.n_experts,
            top_k=self.top_k if moe else 0,
            n_shared=self.n_shared if moe else 0,
            expert_d_ff=int(round(d_model * self.expert_ratio)) if moe else 0,
            balancing=self.balancing,
            capacity_factor=self.capacity_factor,
        )

    def rung(self, name: str, d_model: int, n_layers: int | None = None, *, tokens: int | None = None,
             cpus: float | None = None, **overrides) -> RungSpec:
        model = self.model(d_model, n_layers)
        if tokens is None:
            tokens = int(self.tokens_per_param * model.params_active)
        return RungSpec(
            name=name,
            model=model,
            tokens=tokens,
            batch_size=self.batch,
            seq_len=self.seq_len,
            optim=OptimSpec(**{**self.optim.__dict__, "lr": self.lr}),
            schedule=self.schedule,
            resources=Resources(cpus=self.cpus if cpus is None else cpus),
            **overrides,
        )
