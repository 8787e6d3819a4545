"""A forced step starts from nothing: its old outputs are set aside, and dropped once the new run succeeds.

A step's directory is named by its content hash, so ``ladder rerun`` (or ``--force``) lands in the
directory that already holds the finished run. Running the step function there would find its old
result and checkpoints and retrain nothing. So before a forced run starts, everything in the
directory except the executor's own lease files moves to ``<ladder>/.replaced/<dir>-<run_id>/``;
the new run succeeds and that folder goes, or it fails and the old outputs stay there to inspect
or move back. A Ray retry of the same run finds its folder already made and moves nothing again.
"""

from __future__ import annotations

from .lease import LEASE_PREFIX, STATUS_FILE
from .store import Store

REPLACED_DIR = ".replaced"


def aside_dir(store: Store, ladder_dir: str, step_dir: str, run_id: str) -> str:
    name = step_dir.rstrip("/").replace("\\", "/").rsplit("/", 1)[-1]
    return store.join(ladder_dir, REPLACED_DIR, f"{name}-{run_id}")


def _kept(name: str) -> bool:
    """The executor's claim on the step (status, leases, stop requests) stays where it is."""
    return name == STATUS_FILE or name.startswith(LEASE_PREFIX) or name.startswith(".stop-")


def set_aside(store: Store, d: str, aside: str) -> str | None:
    """Move the step's outputs to ``aside``; its URL, or None when there was nothing to move."""
    if store.exists(aside):  # a retry of this run: the first attempt moved them already
        return store.url(aside)
    names = [n for n in store.listdir(d) if not _kept(n)]
    if not names:
        return None
    store.makedirs(aside)
    for n in names:
        store.move(store.join(d, n), store.join(aside, n))
    return store.url(aside)


def drop_previous(store: Store, aside: str) -> None:
    store.rmtree(aside)
