"""Orbax checkpoints of the whole train state, with fallback past a corrupt newest checkpoint.

A checkpoint holds ``params`` and ``bias`` (flat name -> array dicts), ``opt`` (the optax state's
leaves, numbered in tree order), and ``meta`` (step, seed, and a fingerprint of every leaf). The data
position is the step (batches are a pure function of seed and step) and the RNG is the seed, so the
restored state continues bit-identically. Saves are synchronous so a SIGKILL never leaves a
checkpoint that claims to be complete but is not; a half-written one is left as orbax's temporary
directory and ignored. On restore, a checkpoint that fails to read or whose fingerprint does not
match is skipped for the previous one with a printed message.
"""

from __future__ import annotations

import logging
import os
import shutil
import sys
from pathlib import Path

import jax
import numpy as np


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
        tree["meta"]["fingerprint"] = fingerprint((tree["params"], tree["bias"], tree["opt"]))
        if step in self.steps():  # e.g. SIGTERM right after a periodic save
            return
        try:
            self._manager.save(step, args=self._ocp.args.StandardSave(tree))
            self._manager.wait_until_finished()
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
            try:
                tree = self._manager.restore(step, args=self._ocp.args.StandardRestore(abstract))
                got = fingerprint((tree["params"], tree["bias"], tree["opt"]))
                want = np.asarray(tree["meta"]["fingerprint"])
                if not np.array_equal(got, want):
                    raise ValueError("fingerprint mismatch (the arrays changed after they were saved)")
            except Exception as exc:  # corrupt or truncated: fall back to the previous one
                msg = str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__
                print(
                    f"[ladder.train] checkpoint {self.shown_as}/{step} is unreadable ({msg}); "
                    "falling back to the previous checkpoint",
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
        if src.exists():
            dst = self.directory.parent / "checkpoints.corrupt" / str(step)
            dst.parent.mkdir(parents=True, exist_ok=True)
            if dst.exists():
                shutil.rmtree(dst, ignore_errors=True)
            shutil.move(str(src), str(dst))
        self._manager.reload()

    def close(self) -> None:
        self._manager.close()
