"""A command trainer before it runs: its argv template's placeholders, the files it declares, the
program it names, checked at plan time (one line each, a SpecError); what of it the step's hash covers;
its command line filled in for a run."""

from __future__ import annotations

import os
import shutil
import string
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ladder.spec import SpecError, TrainerSpec
from ladder.trainers.contract import PLACEHOLDERS

# Filled by the machine the trainer runs on, not by the run: the interpreter running ladder.
MACHINE_PLACEHOLDERS = ("python",)


def fields_of(template: str) -> list[str]:
    """The placeholder names in one argv element or env value (``{{`` and ``}}`` are literal braces)."""
    return [name for _, name, _, _ in string.Formatter().parse(template) if name is not None]


def _base(t: TrainerSpec) -> Path:
    return Path(t.base_dir) if t.base_dir else Path.cwd()


def resolve_path(t: TrainerSpec, path: str) -> Path:
    p = Path(path).expanduser()
    return p if p.is_absolute() else _base(t) / p


def code_digests(t: TrainerSpec, where: str) -> dict[str, str]:
    """Each declared code file's sha256 (the step's hash covers them), by the path as declared."""
    from ladder.trainers.builtin.sha256 import sha256_file

    out = {}
    for i, path in enumerate(t.code):
        p = resolve_path(t, path)
        if not p.is_file():
            raise SpecError([f"{where}.code[{i}]: {path} does not exist (relative to {_base(t)}); "
                             "give the path of a file the trainer runs"])
        out[path] = sha256_file(p)
    return out


def check_placeholders(t: TrainerSpec, where: str) -> None:
    known = set(PLACEHOLDERS) | set(MACHINE_PLACEHOLDERS)
    places = [(f"{where}.command[{i}]", a) for i, a in enumerate(t.command)]
    places += [(f"{where}.env[{k}]", v) for k, v in dict(t.env).items()]
    for field, template in places:
        try:
            names = fields_of(template)
        except ValueError as exc:  # a lone brace
            raise SpecError([f"{field}: {template!r}: {exc}; write a literal brace as {{{{ or }}}}"]) from None
        for name in names:
            if name not in known:
                raise SpecError([f"{field}: unknown placeholder {{{name}}} in {template!r}; known: "
                                 f"{', '.join('{' + k + '}' for k in sorted(known))}"])


def check_program(t: TrainerSpec, where: str) -> None:
    """The program the command starts exists: on PATH, or as a file (relative to the spec's folder)."""
    program = t.command[0]
    if fields_of(program):  # '{python}' is this interpreter; another placeholder is only known per run
        return
    if "/" in program:
        p = resolve_path(t, program)
        if not (p.is_file() and os.access(p, os.X_OK)):
            raise SpecError([f"{where}.command[0]: {program} is not an executable file (relative to {_base(t)}); "
                             "give a program on PATH or the path of an executable"])
        return
    if shutil.which(program) is None:
        raise SpecError([f"{where}.command[0]: {program!r}: command not found on PATH; install it, give its full "
                         "path, or use '{python}' for the interpreter running ladder"])


def plan_entry(t: TrainerSpec, where: str) -> dict[str, Any]:
    """The trainer's part of a training step's config (hashed but for ``base_dir``), after its checks."""
    check_placeholders(t, where)
    check_program(t, where)
    return {"kind": "command", "command": list(t.command), "env": dict(t.env), "code": code_digests(t, where),
            "base_dir": str(_base(t))}


def fill(template: str, values: Mapping[str, str]) -> str:
    return template.format_map({**values, "python": sys.executable})


def argv(entry: Mapping[str, Any], values: Mapping[str, str]) -> list[str]:
    """The command line of one run: the template with its placeholders filled; a program given as a
    relative path is taken relative to the spec's folder (the command's working directory)."""
    return [fill(a, values) for a in entry["command"]]


def env(entry: Mapping[str, Any], values: Mapping[str, str]) -> dict[str, str]:
    return {k: fill(v, values) for k, v in dict(entry.get("env") or {}).items()}
