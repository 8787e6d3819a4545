"""A training run as an executor Step: its config (what is hashed), its Ray resources and the key
that orders a size's seeds (``Step.warm_key``). Rungs, the hero, IsoFLOP sweep runs and LR sweep
runs are all built here; the function they run is ``ladder.dag.step_fns.train_step``."""

from __future__ import annotations

import dataclasses
import hashlib
from dataclasses import replace
from typing import Any

from ladder.dag import kinds
from ladder.dag.inputs import FOREIGN_TRAIN_CODE, TRAIN_CODE, step_inputs
from ladder.spec import DataSpec, LadderSpec, RungSpec, to_dict

TRAIN_FN = "ladder.dag.step_fns:train_step"


# The in-memory ``bytes`` data drew window starts with replacement until it went through the token shards'
# sampler (ladder.trainers.builtin.mixture): its runs read other batches now, so their hashes name it and they retrain.
# Sharded runs always sampled so, and keep their hashes.
BYTES_SAMPLING = {"sampling": "without_replacement"}


def train_config(spec: LadderSpec, run: RungSpec, role: str) -> dict[str, Any]:
    """What a training step computes from (its hash covers it, less its cosmetic fields). A run trained by
    another trainer than the built-in one has its ``trainer`` entry (ladder.trainers.registry); one trained
    by the built-in trainer has none, so its hash is what it was before trainers had kinds."""
    from ladder.trainers import registry

    trainer = spec.trainer_of(run)
    entry = registry.plan_entry(trainer, trainer_field(spec, run))
    return {
        "role": role,
        "ladder": spec.name,
        "rung": to_dict(dataclasses.replace(run, trainer=None)),
        "data": to_dict(run_data(spec, role)),
        **(BYTES_SAMPLING if spec.data.tokenizer == "bytes" else {}),
        "wandb": to_dict(spec.wandb),
        "inputs": {**step_inputs(registry.packages(trainer), spec.data), **task_inputs(spec.data)},
        **({"trainer": entry} if entry is not None else {}),
    }


def trainer_field(spec: LadderSpec, run: RungSpec) -> str:
    """Where the trainer of ``run`` is declared, as a bad-input line names it."""
    if run.trainer is None:
        return "trainer"
    names = [r.name for r in spec.rungs]
    return f"rungs[{names.index(run.name)}].trainer" if run.name in names else f"{run.name}.trainer"


def task_inputs(data: DataSpec) -> dict[str, Any]:
    """The task files' digests (a run's task columns change with them); nothing without tasks, so a ladder
    without tasks keeps its step hashes."""
    if not data.tasks:
        return {}
    from ladder.trainers.builtin.tasks import task_digest

    return {"tasks": {t.name: task_digest(t) for t in data.tasks}}


def run_data(spec: LadderSpec, role: str) -> DataSpec:
    """The data a run trains and evaluates on: the hero's evals all read the final's sample, and a hero
    that declares a data-mix switch (a RunChange with weights) trains it at its fraction of the run."""
    if role != "hero":
        return spec.data
    data = spec.data.for_hero()
    switch = [c for c in spec.hero.changes if c.weights] if spec.hero is not None else []
    if switch:
        data = replace(data, switch_at=switch[0].step / spec.hero.steps, switch_weights=dict(switch[0].weights))
    return data


def task_resources(run: RungSpec) -> dict[str, Any]:
    from ladder.trainers.builtin.hostdevices import worker_env

    r = run.resources
    if r.processes > 1:  # the step only drives its gang: the gang's placement group holds the CPUs and GPUs
        return {"cpus": 0.0, "gpus": 0.0, "custom": dict(r.custom), "max_retries": r.max_retries}
    out = {"cpus": r.cpus, "gpus": r.gpus, "custom": dict(r.custom), "max_retries": r.max_retries}
    env = worker_env(r)
    return {**out, "env": env} if env else out


def warm_key(run: RungSpec) -> str:
    """What a run's compiled programs depend on: its config without the fields a seed's replica
    changes (an over-specific key only misses the cache, it never shares a wrong program)."""
    from ladder.executor.hashing import canonical_json

    config = {k: v for k, v in to_dict(run).items() if k not in ("name", "seed", "replica", "description", "placement")}
    return hashlib.sha256(canonical_json(config).encode()).hexdigest()[:12]


def training_step(spec: LadderSpec, run: RungSpec, role: str, *, config: dict | None = None, **step_fields):
    """The Step that trains ``run``; ``step_fields`` (deps, description, code) go to the Step as given."""
    from ladder.dag.tokenize import shard_deps
    from ladder.executor import Step

    code = TRAIN_CODE if spec.trainer_of(run).kind == "builtin" else FOREIGN_TRAIN_CODE
    fields = {"description": run.description, "code": code, **step_fields}
    fields["deps"] = tuple(fields.get("deps", ())) + shard_deps(spec)  # the token shards it maps
    return Step(name=run.name, kind=kinds.TRAIN, fn=TRAIN_FN, config=config or train_config(spec, run, role),
                resources=task_resources(run), flops=run.flops, warm_key=warm_key(run), **fields)
