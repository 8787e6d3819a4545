"""What each field of a ladder spec means, read from the spec dataclasses themselves.

A field's text is, in order: FIELD_DOCS below, else the comment on (or just above) its line in
ladder/spec/. Defaults and types come from dataclasses.fields. `ladder show SPEC` prints a
spec's resolved values beside these; `reference_markdown()` writes docs/spec.md's tables (ladder.cli.docs)
(tests/core/test_show.py keeps both complete: every field of every spec class has a text).
"""

from __future__ import annotations

import dataclasses
import inspect
import io
import tokenize
from typing import Any

from ladder import spec as spec_mod

SPEC_CLASSES = ("LadderSpec", "RungSpec", "RunChange", "ModelSpec", "OptimSpec", "ScheduleSpec", "Resources", "Rule",
                "TargetSpec", "DataSpec", "DomainSpec", "TaskSpec", "FitSpec", "GateSpec", "WandbSpec", "IsoFlopSpec",
                "IsoFlopBudget", "TrainerSpec")

FIELD_DOCS = {
    "LadderSpec.name": "the ladder's name: its outputs live under <root>/<name>/",
    "LadderSpec.rungs": "the rungs (RungSpec), smallest to largest; the laws are fit on them",
    "LadderSpec.hero": "the large run the rungs predict (RungSpec); None: rungs only",
    "LadderSpec.targets": "extra configurations to predict without training (TargetSpec)",
    "LadderSpec.data": "the training and eval text (DataSpec)",
    "LadderSpec.fit": "how the laws are fit and their intervals made (FitSpec)",
    "LadderSpec.gate": "when the hero may start (GateSpec)",
    "LadderSpec.wandb": "Weights & Biases logging (WandbSpec)",
    "LadderSpec.variants": ("named changes of the recipe, {name: {key: value}} with keys as --set takes them "
                            "('runs.<field>': every rung and the hero); --variant NAME trains the ladder <name>+NAME"),
    "LadderSpec.root": "where outputs go: a folder or an fsspec URL (--root, then LADDER_ROOT, override it)",
    "LadderSpec.seed": "the ladder's seed; a rung without its own seed takes it",
    "LadderSpec.description": "free text shown in plans and reports (not hashed)",
    "RungSpec.name": "the run's name (rung_1, d768, hero), used in commands and output folders",
    "RungSpec.model": "the model's shape (ModelSpec)",
    "RungSpec.tokens": "training tokens",
    "RungSpec.batch_size": "sequences per optimizer step, or a Rule giving tokens per step",
    "RungSpec.seq_len": "tokens per sequence",
    "RungSpec.optim": "optimizer settings (OptimSpec)",
    "RungSpec.schedule": "learning-rate schedule (ScheduleSpec)",
    "RungSpec.seed": "the run's seed; None: the ladder's seed (+ 1000 x replica)",
    "RungSpec.replica": "0 for the first run of a size; r > 0 trains the same size again on another seed",
    "RungSpec.log_every": "optimizer steps between logged training metrics",
    "RungSpec.n_evals": "evals per run when eval_every is 0: n_evals of them spaced evenly, the last at the end",
    "RungSpec.n_checkpoints": "checkpoints per run when checkpoint_every is 0 (a rerun resumes from the newest)",
    "RungSpec.resources": "what the run asks of the cluster (Resources; not hashed)",
    "RungSpec.description": "free text (not hashed)",
    "RungSpec.changes": "changes made mid-run (RunChange: step, what, note), e.g. a data-mix switch; `ladder follow` "
                        "widens the forecast past each to the rungs-only band until 3 points after it, then re-anchors "
                        "there; the report and dashboard mark each (recorded, not hashed)",
    "LadderSpec.trainer": "what trains every run without its own (TrainerSpec; docs/trainers.md): the built-in "
                          "JAX trainer by default",
    "RungSpec.trainer": "what trains this run (TrainerSpec); None: the ladder's trainer",
    "TrainerSpec.kind": "builtin (the JAX trainer), command (an argv template run as the step's child) or callable "
                        "(a Python function called in the step's worker)",
    "TrainerSpec.command": "a command's argv template, e.g. ('{python}', 'train.py', '--config', '{config}'); "
                           "placeholders are checked at plan time (docs/trainers.md lists them)",
    "TrainerSpec.env": "variables added to the trainer's environment (placeholders filled); hashed",
    "TrainerSpec.function": "a callable's 'package.module:function', called as function(run) or "
                            "function(run, should_stop)",
    "TrainerSpec.code": "files the trainer's results depend on, relative to the spec's folder: their digests are "
                        "part of the step's hash",
    "TrainerSpec.base_dir": "the folder relative paths are relative to: the spec file's, filled when it is loaded "
                            "(not hashed)",
    "RunChange.step": "the step the change was made at (before the run's last step)",
    "RunChange.what": "what changed: 'data mix', 'lr', 'batch size' ...",
    "RunChange.note": "free text: why, where it is recorded (a W&B run id, an issue)",
    "RunChange.weights": ("a data-mix switch the run trains from `step` on: domain name -> weight (a hero "
                          "declaring one trains it; {}: a change recorded, not trained)"),
    "ModelSpec.d_model": "width of the residual stream",
    "ModelSpec.n_layers": "transformer blocks",
    "ModelSpec.n_heads": "attention heads (head dim = d_model / n_heads)",
    "ModelSpec.vocab": ("vocabulary size; unset, it follows data.tokenizer's size (256 for bytes); one given "
                        "smaller than the tokenizer's, even 256, is refused"),
    "ModelSpec.tie_embeddings": "share the input embedding and the output projection",
    "ModelSpec.qk_norm": "RMS-normalise queries and keys before attention",
    "ModelSpec.z_loss": "coefficient of the z-loss on the output logits' log-partition (0: off)",
    "ModelSpec.n_experts": "routed experts per MoE layer; 0: a dense model",
    "ModelSpec.top_k": "experts each token is routed to",
    "ModelSpec.n_shared": "shared experts every token also passes through",
    "ModelSpec.expert_d_ff": "hidden width of each expert",
    "ModelSpec.balancing": "load balancing: aux_free (router bias), aux_free_quantile, aux_loss or none",
    "ModelSpec.bias_update_rate": "step size of the aux-free router-bias update",
    "ModelSpec.aux_loss_coef": "coefficient of the load-balancing loss (balancing = aux_loss)",
    "ModelSpec.capacity_factor": "slots per expert as a multiple of an even share of the tokens",
    "OptimSpec.lr": "peak learning rate, or a Rule (power law in N or C)",
    "OptimSpec.b1": "AdamW beta1",
    "OptimSpec.b2": "AdamW beta2",
    "OptimSpec.eps": "AdamW epsilon",
    "OptimSpec.weight_decay": "decoupled weight decay (not on norms, biases or the router bias)",
    "OptimSpec.grad_clip": "global gradient-norm clip",
    "OptimSpec.router_lr_mult": "learning-rate multiple of the routers",
    "OptimSpec.norm_lr_mult": "learning-rate multiple of the norms",
    "OptimSpec.embed_lr_mult": "learning-rate multiple of the embeddings",
    "ScheduleSpec.kind": "wsd (warmup, stable, decay), cosine, linear or constant",
    "ScheduleSpec.warmup_frac": "fraction of the run spent warming up",
    "ScheduleSpec.warmup_steps": "warmup in steps (overrides warmup_frac when set)",
    "ScheduleSpec.decay_frac": "fraction of the run spent cooling down (wsd)",
    "ScheduleSpec.cooldown_shape": "shape of the cooldown: linear, 1-sqrt or cosine",
    "ScheduleSpec.final_lr_frac": "final learning rate as a fraction of the peak",
    "ScheduleSpec.branch_fracs": "extra budgets (fractions of the run) at which a WSD run branches a cooldown",
    "Resources.cpus": "CPUs the run asks Ray for",
    "Resources.gpus": "GPUs the run asks Ray for",
    "Resources.custom": "custom Ray resources, e.g. {'TPU': 4}",
    "Resources.max_retries": "times Ray retries a run whose worker died",
    "Resources.devices": "local devices of the data-parallel mesh (0: as many as divide the batch)",
    "Resources.parallel": "replicated (a full copy per device) or fsdp (shard large parameters)",
    "Resources.cpu_devices": "XLA host devices a CPU run splits into (0: one per CPU asked for)",
    "Resources.expert_parallel": "devices along the mesh's expert axis: a MoE's experts split over them",
    "Resources.microbatches": "passes a step's batch runs in, gradients averaged (same step, one pass's memory)",
    "Resources.remat": "what a block's backward recomputes: none, dots (keeps matmul outputs) or full",
    "Resources.processes": "JAX processes the run spans, one gang on Ray (cpus and gpus are the gang's, split evenly)",
    "Resources.memory_fraction": "of a GPU's memory the run may take (0: JAX's default), so runs can share a GPU",
    "Rule.kind": "fixed (coef itself), power_n (coef * N^exponent) or power_c (coef * C^exponent)",
    "Rule.coef": "the value (fixed) or the power law's coefficient",
    "Rule.exponent": "the power law's exponent",
    "Rule.lo": "lower clamp of the result (None: none)",
    "Rule.hi": "upper clamp of the result (None: none)",
    "TargetSpec.name": "the target's name in predictions and reports",
    "TargetSpec.model": "its model shape (ModelSpec)",
    "TargetSpec.tokens": "its training tokens",
    "TargetSpec.seq_len": "its sequence length (for FLOPs per token)",
    "TargetSpec.description": "free text (not hashed)",
    "DataSpec.domains": "the text domains and their mixture weights (DomainSpec)",
    "DataSpec.tokenizer": ("bytes (256 symbols, nothing to train), bpe:<vocab> (a byte-level BPE the ladder trains on "
                           "its training split) or a tokenizer.json path or URL; all but bytes train from token shards"),
    "DataSpec.heldout_frac": "fraction of each domain held out for eval",
    "DataSpec.switch_at": ("every run switches its training mixture to switch_weights at this fraction of its "
                           "steps (0: never); the evals keep the domains' weights (a mid-run change replayed on rungs)"),
    "DataSpec.switch_weights": "the mixture after data.switch_at: domain name -> weight (a domain not named gets 0)",
    "DataSpec.final_eval_tokens": ("per domain, the final eval's sample (the number the laws fit and a hero is "
                                   "scored on; 0: eval_tokens, the sample every eval reads)"),
    "DataSpec.eval_dropless": ("MoE evals compute every token's experts (True) or use the training's capacity "
                               "dispatch, which drops a window's late tokens' expert outputs (False)"),
    "DomainSpec.name": "the domain's name in eval metrics",
    "DomainSpec.source": "a built-in corpus (builtin:stdlib_py, builtin:pydoc_topics, builtin:kjv, "
                         "builtin:web_bible), a .txt/.jsonl/.parquet/.arrow file or folder (gzip or zstd or not; "
                         "a Hugging Face datasets save_to_disk folder too), local or s3:// / gs:// through fsspec",
    "DomainSpec.weight": "mixture weight (normalised over domains)",
    "DataSpec.tasks": ("multiple-choice tasks (TaskSpec) scored at every eval of every run, OLMo's ranked "
                       "classification: task_acc/<name> (length-normalised accuracy, per character), task_acc_se/<name> "
                       "and task_bpb/<name> (bits per byte of the right choice) in eval.jsonl"),
    "TaskSpec.name": "the task's name in eval metrics (task_acc/<name>, task_bpb/<name>)",
    "TaskSpec.source": ("a local JSONL file, a line per item {\"context\": str, \"choices\": [str, ...], \"answer\": int}, "
                        "or builtin:heldout_cloze (items drawn from the ladder's own held-out text)"),
    "TaskSpec.items": "items scored: a file's first N (0: all), or how many a built-in draws (0: its default, 256)",
    "TaskSpec.seed": "a built-in task's draw (every run of the ladder scores the same items)",
    "FitSpec.bootstrap": "bootstrap resamples for the fit's intervals (0: none)",
    "FitSpec.level": "probability of every interval the ladder reports (the one default, 0.9)",
    "FitSpec.pin_E": "fix the compute law's asymptote E (None: fit it)",
    "FitSpec.disagreement": ("the whole-curve law's distance from the final-loss law at the hero: 'band' widens the band "
                             "by it, 'report' reports it beside the band"),
    "FitSpec.E_prior": "a stated normal prior (mean, sd) on the compute law's E, weighed against the rungs' scatter (None: E free)",
    "GateSpec.backtest_rule": ("\"noise\": a backtest miss beyond max_backtest_error blocks only when it is also beyond "
                               "the backtest's seed-noise band (measured with replicas; without them the threshold "
                               "decides); \"threshold\": any miss beyond max_backtest_error blocks"),
    "GateSpec.allow_diverged": "let the hero start although a rung diverged",
    "GateSpec.accept_single_seed": "with one seed per size, accept the stated prior on seed-to-seed spread instead of a warning",
    "GateSpec.require_replicas": "block the hero unless replicas measured the seed spread",
    "GateSpec.replica_outlier_level": ("block when one size's seeds disagree beyond the other sizes' spread at this "
                                       "family-wise p (0: never; a warning below 0.05)"),
    "WandbSpec.entity": "W&B entity (None: WANDB_ENTITY, else your default)",
    "WandbSpec.project": "W&B project (None: WANDB_PROJECT, else the ladder's name)",
}


def _comments(cls) -> dict[str, str]:
    """Field name -> the comment on its line, or on the comment lines just above it."""
    try:
        source = inspect.getsource(cls)
    except (OSError, TypeError):  # no source on disk (a zipped install): FIELD_DOCS still applies
        return {}
    out, pending, field_line = {}, [], {}
    for tok in tokenize.generate_tokens(io.StringIO(source).readline):
        if tok.type == tokenize.COMMENT:
            text = tok.string.lstrip("#").strip()
            line = tok.start[0]
            if line in field_line:
                out.setdefault(field_line[line], text)
            elif tok.start[1] == 4:
                pending.append(text)
        elif tok.type == tokenize.NAME and tok.start[1] == 4 and tok.string in cls.__dataclass_fields__:
            field_line[tok.start[0]] = tok.string
            if pending:
                out[tok.string] = " ".join(pending)
            pending = []
        elif tok.type == tokenize.NAME and tok.start[1] == 4:
            pending = []
    return out


def field_docs(cls) -> list[dict[str, Any]]:
    """One row per field of a spec class: name, type, default (or 'required') and meaning."""
    comments = _comments(cls)
    rows = []
    for f in dataclasses.fields(cls):
        if f.default is not dataclasses.MISSING:
            default = f.default
        elif f.default_factory is not dataclasses.MISSING:
            default = f.default_factory()
        else:
            default = "required"
        doc = f.metadata.get("doc") or FIELD_DOCS.get(f"{cls.__name__}.{f.name}") or comments.get(f.name, "")
        rows.append({"field": f.name, "type": str(f.type), "default": default, "doc": doc})
    return rows


def spec_classes() -> list[type]:
    return [getattr(spec_mod, n) for n in SPEC_CLASSES]


def default_text(value: Any, width: int = 60) -> str:
    """A default as a reader needs it: a nested spec by its class (its fields are listed under it)."""
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return f"{type(value).__name__}()"
    text = repr(value)
    return text if len(text) <= width else text[: width - 3] + "..."


def reference_markdown() -> str:
    """The spec reference: a table per spec class (docs/spec.md, through ladder.cli.docs)."""
    parts = []
    for cls in spec_classes():
        parts.append(f"### {cls.__name__}\n")
        first = (inspect.getdoc(cls) or "").split("\n\n")[0].replace("\n", " ")
        if first and not first.startswith(cls.__name__ + "("):
            parts.append(first + "\n")
        parts.append("| field | default | meaning |\n|---|---|---|")
        for r in field_docs(cls):
            default = "required" if r["default"] == "required" else f"`{default_text(r['default'], 40)}`"
            parts.append(f"| `{r['field']}` | {default.replace('|', '/')} | {r['doc'].replace('|', '/')} |")
        parts.append("")
    return "\n".join(parts)
