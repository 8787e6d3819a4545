"""The small checks every part of spec validation uses: each appends one line naming the field."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any


def check_type(problems: list[str], path: str, value: Any, types: tuple[type, ...], what: str) -> bool:
    if isinstance(value, bool) and bool not in types:
        problems.append(f"{path}: expected {what}, got {value!r}")
        return False
    if not isinstance(value, types):
        problems.append(f"{path}: expected {what}, got {value!r}")
        return False
    return True


def positive_int(problems: list[str], path: str, value: Any) -> None:
    if check_type(problems, path, value, (int,), "a positive integer") and value <= 0:
        problems.append(f"{path}: must be a positive integer, got {value}")


def number_in(problems: list[str], path: str, value: Any, lo: float, hi: float, *, lo_open=False) -> None:
    if not check_type(problems, path, value, (int, float), "a number"):
        return
    if not math.isfinite(value):
        problems.append(f"{path}: must be finite, got {value}")
    elif value < lo or value > hi or (lo_open and value == lo):
        bracket = "(" if lo_open else "["
        problems.append(f"{path}: {value} is outside {bracket}{lo}, {hi}]")


def check_choice(problems: list[str], path: str, value: Any, choices: Sequence[str]) -> None:
    if value not in choices:
        problems.append(f"{path}: {value!r} is not one of {', '.join(choices)}")
