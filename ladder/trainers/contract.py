"""The trainer contract's input: one resolved run as the JSON file a trainer reads (docs/trainers.md).

Every number a trainer needs is resolved here, so a trainer computes none of the ladder's rules: the
model's shape, tokens and steps, batch and sequence length, the learning-rate schedule with its values
(``ladder.trainers.writer.lr_at`` turns it into a step's rate), the optimizer, the seed, the data (its
token shards when the ladder has a tokenize stage), the steps to evaluate and checkpoint at, the eval
samples' sizes, the output directory and whether the run resumes. The output side is the project's
own files (``metrics.jsonl``, ``eval.jsonl``, ``events.jsonl``, ``final_eval.json``) written through
``ladder.trainers.writer``; ``ladder.trainers.outcome`` reads them back into result.json.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ladder.spec import DataSpec, RungSpec, to_dict
from ladder.trainers.cadence import cadence
from ladder.trainers.writer import CONTRACT_VERSION


def lr_schedule_values(run: RungSpec) -> dict[str, Any]:
    """The run's schedule as values: what ``ladder.trainers.builtin.optim.lr_schedule`` computes from."""
    sched, total = run.schedule, run.steps
    warmup = (min(int(sched.warmup_steps), total) if sched.warmup_steps is not None
              else min(total, int(round(sched.warmup_frac * total))))
    decay = int(round(sched.decay_frac * total)) if sched.kind == "wsd" else total - warmup
    start = total - decay if sched.kind == "wsd" else warmup
    return {"kind": sched.kind, "peak": run.lr, "total_steps": total, "warmup_steps": warmup,
            "decay_start": start, "decay_steps": decay, "cooldown_shape": sched.cooldown_shape,
            "final_lr_frac": float(sched.final_lr_frac), "final_lr": run.lr * float(sched.final_lr_frac)}


def _model(run: RungSpec) -> dict[str, Any]:
    m = run.model
    return {**to_dict(m), "vocab": int(m.vocab), "d_ff": m.dense_d_ff,
            "head_dim": m.head_dim, "params_total": m.params_total, "params_active": m.params_active,
            "params_non_embedding": m.params_non_embedding, "flops_per_token": m.flops_per_token(run.seq_len)}


def _data(data: DataSpec, shard_dirs: Mapping[str, str]) -> dict[str, Any]:
    return {
        "tokenizer": data.tokenizer,
        "heldout_frac": data.heldout_frac,
        "domains": [{"name": d.name, "source": d.source, "weight": d.weight, "shards": shard_dirs.get(d.name)}
                    for d in data.domains],
    }


def run_input(run: RungSpec, data: DataSpec, out_dir: str | Path, *, role: str, ladder: str, resume: bool,
              shard_dirs: Mapping[str, str] | None = None, trainer: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The JSON a trainer receives for ``run`` (resolved: an int batch, a float LR, a seed).

    ``shard_dirs``: domain name -> its tokenize step's folder (token shards, ladder.trainers.builtin.shards),
    when the ladder has a tokenize stage. ``resume``: the directory holds an earlier start of this run.
    """
    out = Path(out_dir)
    steps = run.steps
    return {
        "contract": CONTRACT_VERSION,
        "name": run.name,
        "role": role,
        "ladder": ladder,
        "trainer": dict(trainer or {"kind": "builtin"}),
        "seed": int(run.seed),
        "model": _model(run),
        "tokens": int(run.tokens),
        "steps": steps,
        "batch_size": int(run.batch_size),
        "seq_len": int(run.seq_len),
        "tokens_per_step": run.batch_tokens,
        "lr_schedule": lr_schedule_values(run),
        "optimizer": {"name": "adamw", **{k: v for k, v in to_dict(run.optim).items() if k != "lr"}, "lr": run.lr},
        "data": _data(data, shard_dirs or {}),
        "log_every": int(run.log_every),
        "eval": {"steps": sorted(cadence(steps, run.eval_every, run.n_evals)),
                 "tokens_per_domain": int(data.eval_tokens), "final_tokens_per_domain": data.final_tokens,
                 "sample": data.eval_sample},
        "checkpoint": {"dir": str(out / "checkpoints"),
                       "steps": sorted(cadence(steps, run.checkpoint_every, run.n_checkpoints))},
        "out_dir": str(out),
        "resume": bool(resume),
        "processes": int(run.resources.processes),
    }


def has_checkpoint(out_dir: str | Path) -> bool:
    """Whether a directory holds an earlier start of a run: anything under its ``checkpoints/``."""
    ckpt = Path(out_dir) / "checkpoints"
    return ckpt.is_dir() and any(ckpt.iterdir())


# The placeholders an argv template may use: each a top-level number or string of the input, or a model field.
PLACEHOLDERS = ("config", "out", "name", "role", "seed", "steps", "tokens", "batch_size", "seq_len",
                "tokens_per_step", "lr", "log_every", "checkpoint_dir", "processes",
                "d_model", "n_layers", "n_heads", "n_kv_heads", "d_ff", "vocab", "head_dim")


def placeholder_values(inp: Mapping[str, Any], config_path: str | Path) -> dict[str, str]:
    """What each placeholder of an argv template stands for in this run."""
    model = inp["model"]
    values = {"config": str(config_path), "out": inp["out_dir"], "lr": repr(float(inp["lr_schedule"]["peak"])),
              "checkpoint_dir": inp["checkpoint"]["dir"]}
    for key in PLACEHOLDERS:
        if key not in values:
            values[key] = str(inp[key] if key in inp else model[key])
    return values
