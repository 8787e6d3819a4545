"""Steps: what the executor runs. A step is a pure function of its config and its data deps' outputs."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

DEP_KINDS = ("data", "hash", "order")


@dataclass(frozen=True)
class Dep:
    """A dependency on another step of the same ladder.

    ``kind="data"``: the step reads the dep's output; the dep's hash is part of ours and a re-run of the
    dep refreshes us. ``kind="hash"``: the dep's hash is part of ours (a changed dep moves us to a new
    directory) but a re-run of the dep at the same hash does not refresh us (the hero reads the
    prediction it forecasts against, and is not retrained when a rung is). ``kind="order"``: only waits
    for it (e.g. the hero waits for the gate).
    ``required=False``: run even if the dep FAILED or was BLOCKED (e.g. a report of whatever exists).
    """

    step: str
    kind: str = "data"
    required: bool = True

    def __post_init__(self):
        if self.kind not in DEP_KINDS:
            raise ValueError(f"Dep({self.step!r}).kind: {self.kind!r} is not one of {', '.join(DEP_KINDS)}")


@dataclass(frozen=True)
class Step:
    """One node of a ladder's DAG.

    ``fn`` is a callable or ``"module:function"``, called as ``fn(config, ctx)`` in a Ray task; it may
    return a JSON-able dict (written to result.json). ``kind`` names what the step does in its hash, so
    that moving ``fn`` to another module moves no result; empty, the hash takes ``fn``'s
    ``"module:qualname"`` (see ``step_kind``). ``resources``: ``{"cpus", "gpus", "custom",
    "max_retries", "env"}``, ``env`` being environment variables its worker process starts with. ``flops`` is only
    shown in the plan; ``code``: the source paths whose changes make a finished run stale (``ladder plan``);
    ``warm_key``: see the field.
    """

    name: str
    fn: Callable | str
    config: Mapping[str, Any] = field(default_factory=dict)
    deps: tuple[Dep, ...] = ()
    resources: Mapping[str, Any] = field(default_factory=dict)
    flops: float = 0.0
    description: str = ""
    # Source paths (relative to the checkout, prefixes) whose changes leave a finished run stale; not
    # hashed (see stale.py). Empty: every file counts.
    code: tuple[str, ...] = ()
    # Steps with the same non-empty key compile the same programs (a size's seeds): the scheduler
    # starts one of each key before any second, so the others find the compile cache warm. Not hashed.
    warm_key: str = ""
    # The step's identity in its hash, declared once and never changed (see step_kind).
    kind: str = ""

    def __post_init__(self):
        if not isinstance(self.name, str) or not self.name or "/" in self.name or self.name.startswith("."):
            raise ValueError(f"Step.name: {self.name!r} must be a non-empty name without '/'")
        deps = tuple(Dep(d) if isinstance(d, str) else d for d in self.deps)
        object.__setattr__(self, "deps", deps)

    @property
    def data_deps(self) -> tuple[Dep, ...]:
        return tuple(d for d in self.deps if d.kind == "data")

    @property
    def hashed_deps(self) -> tuple[Dep, ...]:
        """The deps whose hashes are part of this step's hash."""
        return tuple(d for d in self.deps if d.kind in ("data", "hash"))


class Blocked(Exception):  # noqa: N818 - the name is the API
    """Raised by a step (the gate) to block its dependents; the step's status becomes BLOCKED."""

    def __init__(self, reasons: str | list[str]):
        self.reasons = [reasons] if isinstance(reasons, str) else list(reasons)
        super().__init__("; ".join(self.reasons))


class Interrupted(Exception):  # noqa: N818 - the name is the API
    """Raised by a step that stopped early because the driver asked it to (it saved what it had)."""


def fn_name(fn: Callable | str) -> str:
    """The qualified name that goes into the hash: ``module:qualname`` (a string fn is used as is)."""
    if isinstance(fn, str):
        return fn
    module = getattr(fn, "__module__", None) or "?"
    qual = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn)
    return f"{module}:{qual}"


def step_kind(step: Step) -> str:
    """What a step's hash names it by: its declared ``kind``, else its function's ``module:qualname``.
    A declared kind keeps a step's directories where they are when its function moves."""
    return step.kind or fn_name(step.fn)


def resolve_fn(fn: Callable | str) -> Callable:
    if callable(fn):
        return fn
    if not isinstance(fn, str) or ":" not in fn:
        raise ValueError(f"step function {fn!r} must be a callable or 'module:function'")
    module, _, attr = fn.partition(":")
    obj: Any = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj
