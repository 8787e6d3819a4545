"""Checks of a data-mix switch mid-run: the ladder's (data.switch_at, data.switch_weights, replayed on
every run) and a hero's declared one (hero.changes[i].weights), one line per problem."""

from __future__ import annotations

import math
from collections.abc import Mapping


def _weights(problems: list[str], where: str, weights, domains: list[str]) -> None:
    if not isinstance(weights, Mapping):
        problems.append(f"{where}: expected a mapping of domain name to weight, got {type(weights).__name__}")
        return
    unknown = [k for k in weights if k not in domains]
    if unknown:
        problems.append(f"{where}: {', '.join(map(repr, unknown))} is not a domain of data.domains ({', '.join(domains)})")
    values = list(weights.values())
    if not all(isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) and v >= 0 for v in values) \
            or not sum(values) > 0:
        problems.append(f"{where}: weights must be non-negative numbers with a positive sum, got {dict(weights)!r}")


def switch_problems(spec) -> list[str]:
    problems: list[str] = []
    d = spec.data
    domains = [dom.name for dom in d.domains]
    at = d.switch_at
    if isinstance(at, bool) or not isinstance(at, int | float) or not 0.0 <= at < 1.0:
        problems.append(f"data.switch_at: {at!r} must be a fraction of the run in [0, 1) (0: no switch)")
    elif at > 0 or d.switch_weights:
        if at == 0:
            problems.append("data.switch_weights: set without data.switch_at; give the fraction of the run to switch at")
        else:
            _weights(problems, "data.switch_weights", d.switch_weights, domains)
    hero = spec.hero
    switches = [(i, c) for i, c in enumerate(hero.changes if hero is not None else ()) if getattr(c, "weights", None)]
    for i, c in switches:
        _weights(problems, f"hero.changes[{i}].weights", c.weights, domains)
    if len(switches) > 1:
        problems.append(f"hero.changes: {len(switches)} changes carry weights; a hero trains one data-mix switch")
    return problems
