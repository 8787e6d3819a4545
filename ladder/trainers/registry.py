"""Every kind of trainer, in one place: how a spec's TrainerSpec becomes its part of a training step's
config (checked at plan time), which function trains a run of it, which packages its numbers depend on.
A new kind is one entry here, a plan function and a run function (docs/trainers.md).

Functions are named as "module:function" and imported when used, so planning a ladder imports no
trainer and running one imports only its own."""

from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from ladder.spec import TrainerSpec


@dataclass(frozen=True)
class TrainerKind:
    """``plan``: (TrainerSpec, field path) -> the trainer's entry of the step config, raising SpecError (None:
    the kind adds nothing, so the step hashes as before trainers had kinds). ``run``: TrainRun -> result.json's
    dict. ``packages``: whose versions the step's hash covers."""

    name: str
    run: str
    plan: str | None = None
    packages: tuple[str, ...] = ()


KINDS: dict[str, TrainerKind] = {k.name: k for k in (
    TrainerKind("builtin", run="ladder.trainers.builtin.step:run",
                packages=("jax", "jaxlib", "flax", "optax", "numpy")),
    TrainerKind("command", run="ladder.trainers.command_run:run", plan="ladder.trainers.command:plan_entry"),
    TrainerKind("callable", run="ladder.trainers.function_run:run", plan="ladder.trainers.function:plan_entry"),
)}


def _resolve(name: str) -> Callable:
    module, _, attr = name.partition(":")
    return getattr(importlib.import_module(module), attr)


def plan_entry(t: TrainerSpec, where: str) -> dict[str, Any] | None:
    """The trainer's entry of a training step's config, or None for the built-in trainer."""
    kind = KINDS[t.kind]
    return _resolve(kind.plan)(t, where) if kind.plan is not None else None


def runner(entry: dict | None) -> Callable:
    """The function that trains a run with this config entry's trainer."""
    return _resolve(KINDS[(entry or {}).get("kind", "builtin")].run)


def packages(t: TrainerSpec) -> tuple[str, ...]:
    return KINDS[t.kind].packages
