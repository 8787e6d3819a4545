"""Resolution (rules -> numbers, the ladder's seed -> rung seeds), ``--set`` overrides and load_spec."""

from __future__ import annotations

import dataclasses
import importlib.util
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from .model import Rule, SpecError
from .runs import LadderSpec, RungSpec, TrainerSpec
from .validate import validate

REPLICA_SEED_STRIDE = 1000


def resolve_rung(rung: RungSpec, ladder_seed: int) -> RungSpec:
    n_active = rung.model.params_active
    flops = rung.flops
    batch = rung.batch_size
    if isinstance(batch, Rule):
        batch = max(1, int(round(batch(n_active, flops) / rung.seq_len)))
    lr = rung.optim.lr
    if isinstance(lr, Rule):
        lr = float(lr(n_active, flops))
    # An explicit seed wins, so resolving a resolved rung again leaves its seed alone.
    seed = ladder_seed + REPLICA_SEED_STRIDE * rung.replica if rung.seed is None else rung.seed
    return dataclasses.replace(
        rung, batch_size=batch, seed=seed, optim=dataclasses.replace(rung.optim, lr=float(lr))
    )


def resolve(spec: LadderSpec) -> LadderSpec:
    """Return the spec with every rule evaluated; validate first so rules see sane numbers."""
    validate(spec)
    from .vocab import follow_tokenizer

    # The vocabulary first: a rule of compute sees the FLOPs of the tokenizer's output head, not 256's.
    spec = follow_tokenizer(spec)
    # A run declared by budget keeps its rules until the IsoFLOP stage has placed it (ladder.dag.isoflop_place).
    rungs = tuple(r if r.budget > 0 else resolve_rung(r, spec.seed) for r in spec.rungs)
    hero = spec.hero if spec.hero is None or spec.hero.budget > 0 else resolve_rung(spec.hero, spec.seed)
    resolved = dataclasses.replace(spec, rungs=rungs, hero=hero)
    validate(resolved)
    return resolved




def _parse_value(text: str) -> Any:
    import ast

    lowered = text.strip().lower()
    if lowered in ("true", "false"):
        return lowered == "true"
    if lowered in ("none", "null"):
        return None
    try:
        return ast.literal_eval(text)
    except (ValueError, SyntaxError):
        return text


def _split_path(key: str) -> list[str]:
    """'rungs[2].model.top_k' -> ['rungs', '[2]', 'model', 'top_k']."""
    parts: list[str] = []
    for dotted in key.split("."):
        while "[" in dotted:
            head, rest = dotted.split("[", 1)
            if head:
                parts.append(head)
            index, dotted = rest.split("]", 1)
            parts.append(f"[{index}]")
        if dotted:
            parts.append(dotted)
    return parts


def _set_path(obj: Any, parts: list[str], value: Any, key: str) -> Any:
    if not parts:
        return value
    head, rest = parts[0], parts[1:]
    if head.startswith("["):
        if not isinstance(obj, tuple | list):
            raise SpecError([f"{key}: {head} indexes something that is not a list"])
        index = head[1:-1]
        items = list(obj)
        if index == "*":
            return tuple(_set_path(item, rest, value, key) for item in items)
        if index.lstrip("-").isdigit():
            i = int(index)
            if not -len(items) <= i < len(items):
                raise SpecError([f"{key}: index {i} is out of range (0..{len(items) - 1})"])
        else:
            matches = [j for j, item in enumerate(items) if getattr(item, "name", None) == index]
            if not matches:
                raise SpecError([f"{key}: no entry named {index!r}"])
            i = matches[0]
        items[i] = _set_path(items[i], rest, value, key)
        return tuple(items)
    if not dataclasses.is_dataclass(obj):
        raise SpecError([f"{key}: {head!r} is not a field (the value there is {obj!r})"])
    names = {f.name for f in dataclasses.fields(obj)}
    if head not in names:
        raise SpecError([f"{key}: {type(obj).__name__} has no field {head!r}; fields: {', '.join(sorted(names))}"])
    current = getattr(obj, head)
    new = _set_path(current, rest, value, key)
    if not rest and isinstance(current, float) and isinstance(new, int) and not isinstance(new, bool):
        new = float(new)
    if not rest and isinstance(current, tuple) and isinstance(new, list):
        new = tuple(new)
    return dataclasses.replace(obj, **{head: new})


RUNS_PREFIX = "runs"  # a key "runs.<field>" sets that field of every rung and the hero (and an IsoFLOP template)


def set_key(spec: LadderSpec, key: str, value: Any, where: str) -> LadderSpec:
    """``spec`` with the field at ``key`` set to ``value``; ``where`` (e.g. "--set optim.lr") starts every problem."""
    parts = _split_path(key)
    if parts[0] != RUNS_PREFIX:
        return _set_path(spec, parts, value, where)
    if len(parts) == 1:
        raise SpecError([f"{where}: 'runs' needs a field of a run after it, e.g. runs.optim.lr"])
    rest = parts[1:]
    changes: dict[str, Any] = {"rungs": tuple(_set_path(r, rest, value, where) for r in spec.rungs)}
    if spec.hero is not None:
        changes["hero"] = _set_path(spec.hero, rest, value, where)
    if spec.isoflop is not None:
        changes["isoflop"] = dataclasses.replace(spec.isoflop, template=_set_path(spec.isoflop.template, rest, value, where))
    return dataclasses.replace(spec, **changes)


def apply_variant(spec: LadderSpec, variant: str) -> LadderSpec:
    """The ladder ``<name>+<variant>``: the spec with its variant's overrides applied (LadderSpec.variants)."""
    if variant not in spec.variants:
        declared = ", ".join(sorted(spec.variants)) or "none"
        raise SpecError([f"--variant {variant}: {spec.name} declares no such variant (it declares: {declared}); "
                         "add it to LadderSpec.variants"])
    overrides = spec.variants[variant]
    if not isinstance(overrides, Mapping):
        raise SpecError([f"variants[{variant!r}]: expected a mapping of field to value, e.g. {{'runs.optim.lr': 1e-3}}, "
                         f"got {type(overrides).__name__}"])
    for key, value in overrides.items():
        try:
            spec = set_key(spec, str(key), value, f"variants[{variant!r}] {key}")
        except TypeError as exc:
            raise SpecError([f"variants[{variant!r}] {key}: {exc}"]) from exc
    return dataclasses.replace(spec, name=f"{spec.name}+{variant}", variants={})


def check_variants(spec: LadderSpec, base_dir: Path | None = None) -> None:
    """Every variant applied and validated, so a misspelt field fails on the spec's first load, not its variant's."""
    problems = []
    for variant in spec.variants:
        if not isinstance(variant, str) or not variant.replace("_", "").replace("-", "").isalnum():
            problems.append(f"variants: {variant!r} must be a name of letters, digits, '_' or '-'")
            continue
        try:
            validate(apply_variant(spec, variant), base_dir=base_dir)
        except SpecError as exc:
            problems.extend(p if p.startswith("variants[") else f"variants[{variant!r}]: {p}" for p in exc.problems)
    if problems:
        raise SpecError(problems)


def apply_overrides(spec: LadderSpec, overrides: Sequence[str]) -> LadderSpec:
    """Apply ``key=value`` overrides. ``seed=3`` sets the ladder seed (every rung without its own);
    ``runs.<field>=value`` sets that field of every rung and the hero."""
    for item in overrides:
        if "=" not in item:
            raise SpecError([f"--set {item}: expected key=value, e.g. --set seed=3"])
        key, text = item.split("=", 1)
        key = key.strip()
        if not key:
            raise SpecError([f"--set {item}: the key is empty"])
        spec = set_key(spec, key, _parse_value(text), f"--set {key}")
    return spec


def load_spec(path: str | Path, overrides: Sequence[str] = (), *, resolve_rules: bool = True,
              variant: str | None = None) -> LadderSpec:
    """Import an experiment file, apply its ``variant`` (the ladder <name>+<variant>), then overrides,
    resolve rules and validate.

    Raises SpecError (one line per problem) for any user mistake, including an unreadable file.
    """
    path = Path(path)
    if not path.is_file():
        raise SpecError([f"{path}: no such experiment file; give a .py file that defines LADDER"])
    module_name = f"_ladder_experiment_{abs(hash(str(path.resolve())))}"
    spec_obj = importlib.util.spec_from_file_location(module_name, path)
    if spec_obj is None or spec_obj.loader is None or path.suffix != ".py":
        raise SpecError([f"{path}: not a Python file; an experiment is a .py file that defines LADDER"])
    module = importlib.util.module_from_spec(spec_obj)
    sys.modules[module_name] = module
    try:
        spec_obj.loader.exec_module(module)
    except SpecError:
        raise
    except Exception as exc:  # a user's file: report its error as one line, not a traceback
        raise SpecError([f"{path}: failed to import: {type(exc).__name__}: {exc}"]) from exc
    finally:
        sys.modules.pop(module_name, None)
    ladder = getattr(module, "LADDER", None)
    if ladder is None:
        raise SpecError([f"{path}: defines no LADDER; add LADDER = LadderSpec(...)"])
    if not isinstance(ladder, LadderSpec):
        raise SpecError([f"{path}: LADDER is a {type(ladder).__name__}, expected a LadderSpec"])
    check_variants(ladder, base_dir=path.parent)
    if variant is not None:
        ladder = apply_variant(ladder, variant)
    try:
        ladder = apply_overrides(ladder, overrides)
    except TypeError as exc:
        raise SpecError([f"--set: {exc}"]) from exc
    ladder = with_base_dir(ladder, path.parent)
    validate(ladder, base_dir=path.parent)
    return resolve(ladder) if resolve_rules else ladder


def with_base_dir(spec: LadderSpec, folder: Path) -> LadderSpec:
    """Every trainer of the spec with the folder its relative paths are relative to (the spec file's)."""
    base = str(Path(folder).resolve())

    def fill(t: TrainerSpec | None) -> TrainerSpec | None:
        return t if t is None or t.base_dir or not isinstance(t, TrainerSpec) else dataclasses.replace(t, base_dir=base)

    if not isinstance(spec.rungs, tuple | list):
        return spec  # validate says what is wrong with it
    runs = [r if not isinstance(r, RungSpec) or r.trainer is None else dataclasses.replace(r, trainer=fill(r.trainer))
            for r in spec.rungs]
    hero = spec.hero
    if isinstance(hero, RungSpec) and hero.trainer is not None:
        hero = dataclasses.replace(hero, trainer=fill(hero.trainer))
    return dataclasses.replace(spec, rungs=tuple(runs), hero=hero, trainer=fill(spec.trainer))
