"""Serialisation for hashing and provenance: specs to plain dicts and back."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from .model import COSMETIC_FIELDS, ModelSpec, Rule
from .runs import DataSpec, DomainSpec, OptimSpec, Resources, RunChange, RungSpec, ScheduleSpec, TargetSpec, TaskSpec, TrainerSpec


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
    for cls in (Rule, ModelSpec, ScheduleSpec, OptimSpec, Resources, RungSpec, TargetSpec, DomainSpec, DataSpec, RunChange,
                TrainerSpec, TaskSpec)
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
        n_evals=d.get("n_evals", 10),
        n_checkpoints=d.get("n_checkpoints", 10),
        resources=Resources(**d["resources"]) if "resources" in d else Resources(),
        description=d.get("description", ""),
        budget=d.get("budget", 0.0),
        placement=d.get("placement", ""),
        changes=tuple(RunChange(**c) for c in d.get("changes") or ()),
        trainer=trainer_from_dict(d["trainer"]) if d.get("trainer") else None,
    )


def trainer_from_dict(d: Mapping[str, Any]) -> TrainerSpec:
    return TrainerSpec(kind=d.get("kind", "builtin"), command=tuple(d.get("command") or ()), env=dict(d.get("env") or {}),
                       function=d.get("function", ""), code=tuple(d.get("code") or ()), base_dir=d.get("base_dir", ""))


def data_from_dict(d: Mapping[str, Any]) -> DataSpec:
    return DataSpec(
        domains=tuple(DomainSpec(**dom) for dom in d["domains"]),
        tokenizer=d.get("tokenizer", "bytes"),
        heldout_frac=d.get("heldout_frac", 0.05),
        eval_tokens=d.get("eval_tokens", 32_768),
        # A config written before the field existed was evaluated on the head of each held-out stream.
        eval_sample=d.get("eval_sample", "head"),
        final_eval_tokens=d.get("final_eval_tokens", 0),
        # Likewise a config from before this field evaluated with capacity dispatch.
        eval_dropless=d.get("eval_dropless", False),
        tasks=tuple(TaskSpec(**t) for t in d.get("tasks") or ()),
        switch_at=d.get("switch_at", 0.0),
        switch_weights=dict(d.get("switch_weights") or {}),
    )
