"""Orbax checkpoints of the whole train state, with fallback past a corrupt newest checkpoint.

A checkpoint holds ``params`` and ``bias`` (flat name -> array dicts), ``opt`` (the optax state's
leaves, numbered in tree order), and ``meta`` (step, seed, and a fingerprint of every leaf). The data
position is the step (batches are a pure function of seed and step) and the RNG is the seed, so the
restored state continues bit-identically. Saves are synchronous so a SIGKILL never leaves a
checkpoint that claims to be complete but is not; a half-written one is left as orbax's temporary
directory and ignored. Each save also writes ``ladder_manifest.json`` (every file's size and
sha256) beside orbax's files.

On restore only *proven* corruption is skipped for the previous checkpoint: a file missing, cut
short or changed against the manifest (checked before orbax reads anything, so no half-failed
read is left behind), or arrays whose fingerprint does not match. The corrupt checkpoint moves to
``checkpoints.corrupt/`` (never deleted). Any other failure (a template that no longer matches
after a model or optax change, an IO or memory error) raises :class:`CheckpointRestoreError`
with the reason, and every checkpoint stays where it is.
"""

from __future__ import annotations

import json
import logging
import os
import shutil
import sys
from pathlib import Path

import jax
import numpy as np

from ladder.trainers.builtin import shard_check
from ladder.trainers.builtin.sha256 import sha256_file


def _quiet_orbax() -> None:
    for name in ("absl", "orbax", "orbax.checkpoint"):
        logging.getLogger(name).setLevel(logging.ERROR)


def fingerprint(tree) -> np.ndarray:
    """Sum of |x| and sum of x over every leaf, in float64: detects corrupted arrays."""
    acc = np.zeros(2, np.float64)
    for leaf in jax.tree.leaves(tree):
        a = np.asarray(leaf, dtype=np.float64)
        acc += (np.abs(a).sum(), a.sum())
    return acc


def _sync(name: str) -> None:
    """Every process of a gang reaches this point before any goes on (nothing in one process)."""
    if jax.process_count() > 1:
        from jax.experimental import multihost_utils

        multihost_utils.sync_global_devices(name)


class CheckpointWriteError(OSError):
    """A checkpoint could not be written (disk full, permission denied); earlier ones stay valid."""


def _os_error_in(exc: BaseException) -> OSError | None:
    """The OSError behind an exception, however deep orbax wrapped it."""
    seen = set()
    while exc is not None and id(exc) not in seen:
        if isinstance(exc, OSError):
            return exc
        seen.add(id(exc))
        exc = exc.__cause__ or exc.__context__
    return None


class CheckpointRestoreError(RuntimeError):
    """A checkpoint that is not proven corrupt could not be restored: the run stops, nothing is moved."""


MANIFEST = "ladder_manifest.json"


def _files(step_dir: Path) -> dict[str, Path]:
    return {str(p.relative_to(step_dir)): p for p in sorted(step_dir.rglob("*")) if p.is_file() and p.name != MANIFEST}


def write_manifest(step_dir: Path) -> None:
    manifest = {rel: [p.stat().st_size, sha256_file(p)] for rel, p in _files(step_dir).items()}
    tmp = step_dir / f".{MANIFEST}.tmp"
    tmp.write_text(json.dumps({"files": manifest}, sort_keys=True))
    os.replace(tmp, step_dir / MANIFEST)


def check_manifest(step_dir: Path) -> str | None:
    """Why the checkpoint is corrupt (a file missing, cut short or changed), or None: intact, or written
    before manifests existed (then nothing is proven either way)."""
    path = step_dir / MANIFEST
    if not path.exists():
        return None
    try:
        want = json.loads(path.read_text())["files"]
    except (ValueError, KeyError, TypeError, OSError) as exc:
        return f"its manifest is unreadable ({type(exc).__name__})"
    for rel, (size, sha) in sorted(want.items()):
        p = step_dir / rel
        if not p.is_file():
            return f"{rel} is missing"
        if p.stat().st_size != size:
            return f"{rel} has {p.stat().st_size} bytes, {size} were written"
        if sha256_file(p) != sha:
            return f"{rel} does not match its checksum"
    return None


def _check_template(tree, template, shown: str) -> None:
    """Orbax restores an array of another shape into a template without a word (the model changed since
    the save): say which array differs instead of training on from it."""
    for part in ("params", "bias", "opt"):
        want, got = template[part], tree[part]
        if set(want) != set(got):
            missing, extra = sorted(set(want) - set(got))[:3], sorted(set(got) - set(want))[:3]
            raise CheckpointRestoreError(f"checkpoint {shown} does not fit this model: {part} missing {missing}, "
                                         f"unexpected {extra}; train into a new directory")
        for name in sorted(want):
            a, b = np.shape(want[name]), np.shape(got[name])
            if a != b or np.asarray(want[name]).dtype != np.asarray(got[name]).dtype:
                raise CheckpointRestoreError(
                    f"checkpoint {shown} does not fit this model: {part}.{name} was saved as {b} "
                    f"{np.asarray(got[name]).dtype}, the model has {a} {np.asarray(want[name]).dtype}; its files are "
                    "intact, so it was kept: train into a new directory")


class Checkpointer:
    def __init__(self, directory: str | os.PathLike, max_to_keep: int = 3, *, shown_as: str | None = None):
        """``shown_as``: what messages call the directory (the URL a local mirror stands for)."""
        import orbax.checkpoint as ocp

        _quiet_orbax()
        self._ocp = ocp
        self.directory = Path(directory).absolute()
        self.shown_as = shown_as or str(self.directory)
        self.directory.mkdir(parents=True, exist_ok=True)
        self.max_to_keep = max_to_keep
        self._manager = ocp.CheckpointManager(
            self.directory,
            options=ocp.CheckpointManagerOptions(
                max_to_keep=max_to_keep, enable_async_checkpointing=False, create=True
            ),
        )

    def steps(self) -> list[int]:
        self._manager.reload()
        return sorted(self._manager.all_steps())

    def save(self, step: int, params: dict, bias: dict, opt_state, meta: dict) -> None:
        opt_leaves = jax.tree.leaves(opt_state)
        tree = {
            "params": dict(params),
            "bias": dict(bias) if bias else {"_none": np.zeros((), np.float32)},
            "opt": {f"{i:05d}": leaf for i, leaf in enumerate(opt_leaves)},
            "meta": {k: np.asarray(v) for k, v in meta.items()},
        }
        # The arrays' sums are kept per shard (shard_check), never pulled whole onto one host.
        tree["meta"]["fingerprint"] = np.zeros(2)
        if step in self.steps():  # e.g. SIGTERM right after a periodic save
            return
        try:
            self._manager.save(step, args=self._ocp.args.StandardSave(tree))
            self._manager.wait_until_finished()
            shard_check.write(self.directory / str(step), (tree["params"], tree["bias"], tree["opt"]))
            _sync(f"ladder-checkpoint-{step}")
            if jax.process_index() == 0:
                write_manifest(self.directory / str(step))
            _sync(f"ladder-manifest-{step}")
        except Exception as exc:
            os_error = _os_error_in(exc)
            if os_error is None:
                raise
            done = [s for s in self.steps() if s < step]
            last = f"step {done[-1]}" if done else "none yet"
            raise CheckpointWriteError(
                f"checkpoint at step {step} could not be written to {self.shown_as} ({os_error.strerror or os_error}); "
                f"the newest complete checkpoint is {last}; free space or fix permissions and resubmit to resume from it"
            ) from exc

    def restore_latest(self, params: dict, bias: dict, opt_state, meta_template: dict):
        """Newest readable checkpoint as (step, params, bias, opt_state, meta), or None if there is none."""
        opt_leaves, opt_def = jax.tree.flatten(opt_state)
        template = {
            "params": dict(params),
            "bias": dict(bias) if bias else {"_none": np.zeros((), np.float32)},
            "opt": {f"{i:05d}": leaf for i, leaf in enumerate(opt_leaves)},
            "meta": {**{k: np.asarray(v) for k, v in meta_template.items()}, "fingerprint": np.zeros(2)},
        }
        abstract = jax.tree.map(self._ocp.utils.to_shape_dtype_struct, template)
        for step in reversed(self.steps()):
            corrupt = check_manifest(self.directory / str(step))
            if corrupt is None:
                try:
                    tree = self._manager.restore(step, args=self._ocp.args.StandardRestore(abstract))
                except Exception as exc:
                    msg = str(exc).splitlines()[0][:300] if str(exc) else type(exc).__name__
                    raise CheckpointRestoreError(
                        f"checkpoint {self.shown_as}/{step} could not be restored ({type(exc).__name__}: {msg}); "
                        "its files are intact, so it was kept: if the model or optimizer changed, train into a new "
                        "directory; if it is corrupt after all, move it into checkpoints.corrupt/ and resubmit"
                    ) from exc
                _check_template(tree, template, f"{self.shown_as}/{step}")
                arrays = (tree["params"], tree["bias"], tree["opt"])
                if shard_check.saved(self.directory / str(step)):
                    corrupt = shard_check.mismatch(self.directory / str(step), arrays)
                else:  # written before per-shard sums: the whole-leaf fingerprint (one process)
                    got = fingerprint(arrays)
                    if not np.array_equal(got, np.asarray(tree["meta"]["fingerprint"])):
                        corrupt = "fingerprint mismatch (the arrays changed after they were saved)"
            if corrupt is not None:
                print(
                    f"[ladder.train] checkpoint {self.shown_as}/{step} is corrupt ({corrupt}); moved to "
                    "checkpoints.corrupt/, falling back to the previous checkpoint",
                    file=sys.stderr,
                    flush=True,
                )
                self._discard(step)
                continue
            opt = jax.tree.unflatten(opt_def, [tree["opt"][f"{i:05d}"] for i in range(len(opt_leaves))])
            b = {} if not bias else tree["bias"]
            return step, tree["params"], b, opt, tree["meta"]
        return None

    def _discard(self, step: int) -> None:
        """Move a bad checkpoint aside (kept for inspection) so later saves at that step succeed."""
        src = self.directory / str(step)
        if src.exists() and jax.process_index() == 0:
            dst = self.directory.parent / "checkpoints.corrupt" / str(step)
            dst.parent.mkdir(parents=True, exist_ok=True)
            if dst.exists():
                shutil.rmtree(dst, ignore_errors=True)
            shutil.move(str(src), str(dst))
        _sync(f"ladder-discard-{step}")
        self._manager.reload()

    def close(self) -> None:
        self._manager.close()
