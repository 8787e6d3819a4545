"""The trainer fields of a spec, checked for shape (ladder.trainers checks what needs the machine: files,
the command on PATH, the callable's import, the placeholders)."""

from __future__ import annotations

from collections.abc import Mapping

from .runs import TRAINER_KINDS, RungSpec, TrainerSpec

# The fields each kind uses; another kind's field set is refused rather than ignored.
KIND_FIELDS = {"builtin": (), "command": ("command", "env", "code"), "callable": ("function", "env", "code")}


def validate_trainer(problems: list[str], path: str, t: TrainerSpec | None) -> None:
    if t is None:
        return
    if not isinstance(t, TrainerSpec):
        problems.append(f"{path}: expected a TrainerSpec, got {type(t).__name__}")
        return
    if t.kind not in TRAINER_KINDS:
        problems.append(f"{path}.kind: {t.kind!r} is not one of {', '.join(TRAINER_KINDS)}")
        return
    used = KIND_FIELDS[t.kind]
    for name, empty in (("command", ()), ("env", {}), ("function", ""), ("code", ())):
        value = getattr(t, name)
        if name not in used and value not in (empty, None) and len(value):
            problems.append(f"{path}.{name}: a {t.kind} trainer does not use it; remove it or set kind to "
                            f"{'command' if name == 'command' else 'callable' if name == 'function' else 'command'}")
    if t.kind == "command" and (not isinstance(t.command, tuple | list) or not t.command
                                or not all(isinstance(a, str) and a for a in t.command)):
        problems.append(f"{path}.command: {t.command!r} must be a non-empty tuple of strings, "
                        "e.g. ('{python}', 'train.py', '--config', '{config}')")
    if t.kind == "callable" and (not isinstance(t.function, str) or t.function.count(":") != 1
                                 or not all(t.function.split(":"))):
        problems.append(f"{path}.function: {t.function!r} must name a function as 'package.module:function'")
    if not isinstance(t.env, Mapping) or not all(isinstance(k, str) and isinstance(v, str) for k, v in t.env.items()):
        problems.append(f"{path}.env: {t.env!r} must map names to strings, e.g. {{'OMP_NUM_THREADS': '1'}}")
    if not isinstance(t.code, tuple | list) or not all(isinstance(c, str) and c for c in t.code):
        problems.append(f"{path}.code: {t.code!r} must be a tuple of file paths")


def validate_run_trainer(problems: list[str], path: str, t: TrainerSpec, run: RungSpec) -> None:
    """What a trainer can train of ``run`` at ``path`` (its own trainer's fields are checked by
    :func:`validate_trainer`)."""
    if not isinstance(t, TrainerSpec) or not isinstance(run, RungSpec):
        return
    if t.kind == "callable" and run.resources.processes > 1:
        problems.append(f"{path}.resources.processes: its callable trainer runs in its step's one worker; more than "
                        "one process needs a trainer of kind 'command' (one process each) or 'builtin'")
    if t.kind in ("command", "callable") and run.schedule.branch_fracs:
        problems.append(f"{path}.schedule.branch_fracs: WSD cooldown branches are the built-in trainer's only, this "
                        f"run's is a {t.kind}; remove them or train the run with kind 'builtin'")
