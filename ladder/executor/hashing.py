"""Content hashes of steps: canonical JSON of (step kind, config without cosmetic keys, data deps' hashes)."""

from __future__ import annotations

import dataclasses
import hashlib
import json
import math
from collections.abc import Mapping
from pathlib import PurePath
from typing import Any

from ladder.spec import COSMETIC_FIELDS, HASH_NEUTRAL_DEFAULTS

HASH_LEN = 12


def canonical(obj: Any) -> Any:
    """A plain JSON value for ``obj``: tuples become lists, dataclasses dicts, keys strings."""
    if obj is None or isinstance(obj, bool | str):
        return obj
    if isinstance(obj, int):
        return int(obj)  # an int subclass (ModelSpec's TokenizerVocab) is a plain JSON number
    if isinstance(obj, float):
        if not math.isfinite(obj):
            return repr(obj)  # "nan" / "inf": JSON has no literal for them
        return obj
    if isinstance(obj, Mapping):
        return {str(k): canonical(v) for k, v in obj.items()}
    if dataclasses.is_dataclass(obj) and not isinstance(obj, type):
        return {f.name: canonical(getattr(obj, f.name)) for f in dataclasses.fields(obj)}
    if isinstance(obj, list | tuple):
        return [canonical(v) for v in obj]
    if isinstance(obj, set | frozenset):
        return sorted((canonical(v) for v in obj), key=lambda v: json.dumps(v, sort_keys=True))
    if isinstance(obj, PurePath):
        return str(obj)
    if hasattr(obj, "item") and callable(obj.item):  # numpy scalars
        return canonical(obj.item())
    raise TypeError(f"config value {obj!r} of type {type(obj).__name__} is not JSON-able")


def strip_cosmetic(obj: Any, cosmetic: frozenset[str] = COSMETIC_FIELDS) -> Any:
    """Drop cosmetic keys (descriptions, notes, resources, ...) and later-added fields left at their
    hash-neutral default, at any depth of a canonical value."""
    if isinstance(obj, dict):
        return {k: strip_cosmetic(v, cosmetic) for k, v in obj.items()
                if k not in cosmetic and not (k in HASH_NEUTRAL_DEFAULTS and v == HASH_NEUTRAL_DEFAULTS[k])}
    if isinstance(obj, list):
        return [strip_cosmetic(v, cosmetic) for v in obj]
    return obj


def canonical_json(obj: Any) -> str:
    return json.dumps(canonical(obj), sort_keys=True, separators=(",", ":"), ensure_ascii=True)


def hashed_config(config: Mapping[str, Any]) -> dict:
    """The part of a config that the hash covers."""
    return strip_cosmetic(canonical(dict(config)))


def step_hash(fn_qualname: str, config: Mapping[str, Any], data_dep_hashes: Mapping[str, str]) -> str:
    """Full sha256 hex digest; directories use the first HASH_LEN characters."""
    payload = {"fn": fn_qualname, "config": hashed_config(config), "deps": dict(data_dep_hashes)}
    return hashlib.sha256(canonical_json(payload).encode()).hexdigest()


# A config's ``inputs`` (the digests of its data and the versions of the packages that compute it) came
# after ladders had run: a step's hash without them is its *legacy* hash, the name of the directory an
# earlier release gave it (see plan.build_graph, which keeps using such a directory while its inputs
# are unchanged).
INPUTS_KEY = "inputs"


def legacy_hash(fn_qualname: str, config: Mapping[str, Any], legacy_dep_hashes: Mapping[str, str]) -> str:
    return step_hash(fn_qualname, {k: v for k, v in config.items() if k != INPUTS_KEY}, legacy_dep_hashes)


_MISSING = "<missing>"


def config_diff(old: Any, new: Any, prefix: str = "") -> dict[str, list]:
    """Field-level diff of two canonical values: ``{"model.d_model": [64, 128], ...}``."""
    out: dict[str, list] = {}
    if isinstance(old, dict) and isinstance(new, dict):
        for key in sorted(set(old) | set(new)):
            path = f"{prefix}.{key}" if prefix else str(key)
            out.update(config_diff(old.get(key, _MISSING), new.get(key, _MISSING), path))
        return out
    if isinstance(old, list) and isinstance(new, list) and len(old) == len(new):
        for i, (a, b) in enumerate(zip(old, new, strict=True)):
            out.update(config_diff(a, b, f"{prefix}[{i}]"))
        return out
    if old != new or type(old) is not type(new):
        out[prefix or "<root>"] = [old, new]
    return out


def format_diff(diff: Mapping[str, list], limit: int = 4) -> str:
    parts = [f"{k} {json.dumps(a)} -> {json.dumps(b)}" for k, (a, b) in list(diff.items())[:limit]]
    if len(diff) > limit:
        parts.append(f"+{len(diff) - limit} more")
    return ", ".join(parts)
