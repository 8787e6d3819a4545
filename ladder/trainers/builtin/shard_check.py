"""Per-shard fingerprints of a checkpoint's arrays: the corruption check that works on arrays spread over
devices and processes.

Each process sums (|x| and x, in float64) only the shards it holds (replica 0 of each, so a replicated
array is summed once), keyed by the leaf's path and the shard's index, and writes them to
``ladder_shards/process-<i>.json`` in the checkpoint's folder: no leaf is ever pulled whole onto one host.
On restore each process compares the shards it holds again; a shard whose index was not saved (the run
restored onto another layout) is not compared, the manifest's checksums still cover its files.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import jax
import numpy as np

FOLDER = "ladder_shards"


def _index_key(index: tuple) -> str:
    return "[" + ",".join(f"{s.start or 0}:{'' if s.stop is None else s.stop}" for s in index) + "]"


def shard_sums(tree) -> dict[str, list[float]]:
    """``{leaf path + shard index: [sum |x|, sum x]}`` over the shards this process holds."""
    out: dict[str, list[float]] = {}
    for path, leaf in jax.tree_util.tree_flatten_with_path(tree)[0]:
        name = jax.tree_util.keystr(path)
        if not isinstance(leaf, jax.Array):
            a = np.asarray(leaf, np.float64)
            out[name] = [float(np.abs(a).sum()), float(a.sum())]
            continue
        for shard in leaf.addressable_shards:
            if shard.replica_id != 0:
                continue
            a = np.asarray(shard.data, np.float64)
            out[name + _index_key(shard.index)] = [float(np.abs(a).sum()), float(a.sum())]
    return out


def write(step_dir: Path, tree) -> None:
    folder = Path(step_dir) / FOLDER
    folder.mkdir(parents=True, exist_ok=True)
    path = folder / f"process-{jax.process_index()}.json"
    tmp = path.with_suffix(".tmp")
    tmp.write_text(json.dumps(shard_sums(tree), sort_keys=True))
    os.replace(tmp, path)


def saved(step_dir: Path) -> bool:
    return (Path(step_dir) / FOLDER).is_dir()


def mismatch(step_dir: Path, tree) -> str | None:
    """Which shard this process holds differs from its saved sums, or None (all that could be compared match)."""
    want: dict[str, list[float]] = {}
    for path in sorted((Path(step_dir) / FOLDER).glob("process-*.json")):
        want.update(json.loads(path.read_text()))
    for key, sums in shard_sums(tree).items():
        if key in want and want[key] != sums:
            return f"shard {key} does not match its saved sums"
    return None
