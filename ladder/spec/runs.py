"""The spec of one run (RungSpec and its optimizer, schedule and resources), of data, fits, gate and W&B,
and of the whole ladder (LadderSpec)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING, Any

from fits.defaults import DEFAULT_TASK_RULE
from fits.laws.registry import final_law_min_rungs

from .model import ModelSpec, Rule

if TYPE_CHECKING:
    from .isoflop import IsoFlopSpec


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
    a 2-CPU run trains data-parallel over two 1-thread devices (see ``ladder.trainers.builtin.hostdevices``).
    ``expert_parallel``: devices along the mesh's expert axis (a MoE's experts split over them).
    ``microbatches``: a step's batch runs as this many passes whose gradients are summed (the same step
    up to float summation, in the memory of one pass). ``remat``: what a block's backward recomputes
    (``none``; ``dots``: keeps only matmul outputs; ``full``: keeps only the block's input).
    ``processes``: JAX processes the run spans (one per host, a gang on Ray; ``devices`` then counts each
    process's local devices). ``memory_fraction``: of a GPU's memory the run may take (0: JAX's default),
    so two runs can share one GPU.
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
    expert_parallel: int = 1
    microbatches: int = 1
    remat: str = "none"
    processes: int = 1
    memory_fraction: float = 0.0


TRAINER_KINDS = ("builtin", "command", "callable")


@dataclass(frozen=True)
class TrainerSpec:
    """What trains a run (docs/trainers.md): the built-in JAX trainer, a command (an argv template with
    ``{config}``, ``{out}``, ``{steps}``, ... placeholders, and env) or a Python callable
    (``package.module:function``) run in the step's Ray worker. ``code``: the files its results depend on,
    whose digests the step's hash covers. Relative paths (``code``, a command's files) are relative to
    ``base_dir``: the spec file's folder, filled in when the spec is loaded (not hashed)."""

    kind: str = "builtin"
    command: tuple[str, ...] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    function: str = ""
    code: tuple[str, ...] = ()
    base_dir: str = ""


@dataclass(frozen=True)
class RunChange:
    """A change made to a run mid-way (a data-mix switch, an LR or batch change): from `step` on, the run
    is not the one the ladder forecast. `ladder follow` carries it (ladder.analysis.follow_bands); the
    report and the dashboard mark it."""

    step: int
    what: str
    note: str = ""
    # A data-mix switch the run trains (domain name -> weight from `step` on; a domain not named gets 0):
    # a hero declaring one trains it (ladder.dag.train_steps.run_data), and a ladder's rungs replay it at
    # the same fraction of their runs with data.switch_at / data.switch_weights (a variant).
    weights: Mapping[str, float] = field(default_factory=dict)


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
    eval_every: int = 0  # optimizer steps between evals; 0: n_evals evals spaced evenly, the last at the end
    log_every: int = 10
    checkpoint_every: int = 0  # 0: n_checkpoints spaced evenly, the last at the end
    # An eval costs the same at every rung size (3 x 32K tokens by default), so a small rung's ten
    # evals cost as much as a large fraction of its training.
    n_evals: int = 10
    n_checkpoints: int = 10
    resources: Resources = field(default_factory=Resources)
    description: str = ""
    # > 0: the compute-optimal run at this many FLOPs; its model and tokens are placeholders until the
    # ladder's IsoFLOP stage has run, then come from its fit (the rest of the run is kept as declared)
    budget: float = 0.0
    # how the model and tokens were chosen (e.g. "isoflop: N_opt(1e12) = 3.1e4"); recorded, not hashed
    placement: str = ""
    # changes made mid-run, declared after the fact (a hero's mix switch): recorded, not hashed
    changes: tuple[RunChange, ...] = ()
    # what trains this run; None: the ladder's trainer
    trainer: TrainerSpec | None = None

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
    """A named data domain: a built-in corpus (see BUILTIN_SOURCES), a file/folder path or an fsspec URL."""

    name: str
    source: str
    weight: float = 1.0


@dataclass(frozen=True)
class TaskSpec:
    """A multiple-choice task evaluated at every eval of every run (OLMo's ranked classification): a local
    JSONL file of {"context": str, "choices": [str, ...], "answer": int} rows, or a built-in task generated
    from the ladder's own held-out text (ladder.trainers.builtin.tasks.BUILTIN_TASKS)."""

    name: str
    source: str
    items: int = 0  # rows used: a file's first ``items`` (0: all); the items a built-in task generates (0: its default)
    seed: int = 0  # a built-in task's draw (the same items for every run of the ladder)


@dataclass(frozen=True)
class DataSpec:
    domains: tuple[DomainSpec, ...] = (
        DomainSpec("code", "builtin:stdlib_py", 0.5),
        DomainSpec("prose", "builtin:web_bible", 0.5),
    )
    tokenizer: str = "bytes"
    heldout_frac: float = 0.05
    eval_tokens: int = 32_768  # per domain
    eval_sample: str = "spread"  # eval windows: spread (evenly over each held-out stream) | head (its start)
    # Tokens per domain the final eval reads (the number every law fits and a hero is scored on); 0: the
    # same eval_tokens as every other eval. A fixed 32K sample can sit off its split by an amount that
    # moves with scale (experiments/tiny.py), and only the final eval is fitted, so it can afford more.
    final_eval_tokens: int = 0
    # Evals of a mixture-of-experts model compute every token's experts (dropless, as Marin reports its
    # eval_dropless loss). Capacity dispatch fills each expert's slots in token order, so at eval a window's
    # last tokens lost their expert output: the loss rose over the last ~24 of 128 positions, and the
    # more so at larger sizes (experiments/tiny.py). Training keeps capacity dispatch.
    eval_dropless: bool = True
    # Multiple-choice tasks scored at every eval: task_acc/<name> and task_bpb/<name> in eval.jsonl.
    tasks: tuple[TaskSpec, ...] = ()
    # A data-mix switch every run trains at this fraction of its steps (0: none), to the weights in
    # switch_weights (domain name -> weight; a domain not named gets 0). The evals keep `domains`' weights,
    # so a switched run is scored on the same mixture as one that was not.
    switch_at: float = 0.0
    switch_weights: Mapping[str, float] = field(default_factory=dict)

    @property
    def final_tokens(self) -> int:
        """Tokens per domain the final eval reads (``final_eval_tokens``, 0 for ``eval_tokens``)."""
        return int(self.final_eval_tokens) or int(self.eval_tokens)

    def for_hero(self) -> DataSpec:
        """The hero's data: every one of its evals reads the final's sample, because each is set against
        the forecast (the live snapshots, the report's recorded points), which is on the final's scale."""
        return replace(self, eval_tokens=self.final_tokens)


# Final-loss laws and the fewest rung sizes each can be fitted on (validation and the fit step read this),
# from fits' one law registry.
FINAL_LAW_MIN_RUNGS = final_law_min_rungs()


@dataclass(frozen=True)
class FitSpec:
    law: str = "compute"  # final-loss law: compute | compute_domains (one per eval domain, summed) | chinchilla | chinchilla_tied
    curve_law: str = "multipower"  # whole-curve law: multipower | tissue | none
    bootstrap: int = 200
    level: float = 0.9
    pin_E: float | None = None
    # A stated normal prior (mean, sd) on the compute law's E where the rungs pin it loosely (fits.compute.prior_weight
    # weighs it against the rungs' scatter); None fits E free.
    E_prior: tuple[float, float] | None = None
    # The whole-curve law's distance from the final-loss law at the hero (intervals.model_sigma): "band" widens the
    # band by it; "report" reports it beside the band, for a ladder whose curve law fails its own backtests.
    disagreement: str = "band"
    loss_metric: str = "eval_loss"  # which final number the laws fit: only eval_loss (train_loss is refused)
    backtest_holdout: int = 1  # only 1: the backtest predicts the largest size from those the hero's ratio below
    # Imported eval curves: "auto" fits the matched-progress laws to them (fits.matched_progress_choice chooses
    # one by backtests) and predicts the hero's whole curve; "none" fits final losses only.
    curve_fit: str = "auto"
    baseline: str = "none"  # "marin": Marin's per-5% forecast beside ours (fits.marin)
    baseline_flops_per_step: Mapping[str, float] = field(default_factory=dict)  # the baseline's compute, by run
    # Task accuracies forecast for the hero (task_acc/<task> and task_bpb/<task> in the runs' evals;
    # docs/tasks.md): () forecasts every task the rungs recorded.
    forecast_tasks: tuple[str, ...] = ()
    task_chance: Mapping[str, float] = field(default_factory=dict)  # chance accuracy by task (1 / choices); OLMo's known
    hero_task_evals: int = 1  # the hero's actual task accuracy: the mean of its last this many evals (OLMo's 13B: 5)
    # How a task's backtest makes its forecast (fits.defaults.TASK_RULES): "weighted" weighs every method
    # by 1 / its backtest error squared; "best" takes the one method with the lowest.
    task_rule: str = DEFAULT_TASK_RULE


@dataclass(frozen=True)
class GateSpec:
    max_backtest_error: float = 0.02  # relative
    # "noise": block a miss beyond both max_backtest_error and the backtest's seed-noise band (measured
    # with replicas; without them the threshold alone); "threshold": block any miss beyond it.
    backtest_rule: str = "noise"
    max_interval_width: float = 0.10  # (upper - lower) / predicted
    allow_diverged: bool = False
    accept_single_seed: bool = False  # one seed per size: accept the stated seed-spread prior (else a warning)
    require_replicas: bool = False  # block the hero unless the ladder measured its seed spread with replicas
    # block when one size's seeds disagree beyond the other sizes' spread at this family-wise p (0: never;
    # a warning from 0.05); ladder.analysis.outliers
    replica_outlier_level: float = 0.01


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
    isoflop: IsoFlopSpec | None = None  # an IsoFLOP sweep that places the runs declared by budget
    trainer: TrainerSpec = field(default_factory=TrainerSpec)  # what trains every run without its own
    # Named changes of the recipe, each {key: value} overrides as --set takes them ("runs.<field>" sets a
    # field of every rung and the hero): `--variant NAME` trains the ladder <name>+NAME with them applied
    # (ladder.spec.load.apply_variant), which `ladder compare` sets against this one.
    variants: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)

    def trainer_of(self, run: RungSpec) -> TrainerSpec:
        """The trainer of ``run``: its own, else the ladder's."""
        return run.trainer if run.trainer is not None else self.trainer

    def all_runs(self) -> tuple[RungSpec, ...]:
        return self.rungs + ((self.hero,) if self.hero is not None else ())

    def rung(self, name: str) -> RungSpec:
        for run in self.all_runs():
            if run.name == name:
                return run
        raise KeyError(name)
