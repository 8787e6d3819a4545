"""A callable trainer (``package.module:function``) before it runs: importable and callable, checked at
plan time; what of it the step's hash covers. The function runs in the step's Ray worker
(ladder.trainers.function_run) with the spec's folder on ``sys.path``."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable, Mapping
from typing import Any

from ladder.spec import SpecError, TrainerSpec
from ladder.trainers.command import _base, check_placeholders, code_digests


def load(entry: Mapping[str, Any]) -> Callable:
    """The function an entry names, its module imported with the spec's folder first on ``sys.path``."""
    module_name, _, attr = entry["function"].partition(":")
    base = entry.get("base_dir")
    if base and base not in sys.path:
        sys.path.insert(0, base)
    module = importlib.import_module(module_name)
    fn = module
    for part in attr.split("."):
        fn = getattr(fn, part)
    if not callable(fn):
        raise TypeError(f"{entry['function']} is a {type(fn).__name__}, not a function")
    return fn


def plan_entry(t: TrainerSpec, where: str) -> dict[str, Any]:
    check_placeholders(t, where)
    entry = {"kind": "callable", "function": t.function, "env": dict(t.env), "code": code_digests(t, where),
             "base_dir": str(_base(t))}
    try:
        load(entry)
    except Exception as exc:  # a user's module: its error as one line
        raise SpecError([f"{where}.function: cannot load {t.function}: {type(exc).__name__}: {exc}; give an "
                         "importable 'package.module:function' (relative to the spec's folder or installed)"]) from None
    return entry
