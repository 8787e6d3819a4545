"""Pin a CPU run to cores of its own while it trains, so runs side by side do not share a core.

Ray counts CPUs but does not pin tasks to them: two 1-CPU rungs on a 2-core machine each spread
XLA's thread pool over both cores, and the scheduler moves their threads across them. A run claims
its cores with an exclusive ``flock`` on one file per core in a folder every process of the machine
sees, so it pins only to cores no other run of this machine holds, and a killed process frees its
claim with its file descriptors. A run that cannot get all its cores, or that wants the whole
machine, is left alone.

Pin after XLA's CPU client has started (the train step starts it first): the cores XLA sees when it
starts change its numbers (pinned before, the default ladder's d24 and d48 rungs trained to other
losses), a pin afterwards does not. Two seeds of a size side by side, `make bench` ("pinning"):
pinned / OS tokens/s 1.02x at rung_2 and 1.20x at rung_5, the losses identical to the last digit.
"""

from __future__ import annotations

import contextlib
import fcntl
import os
import tempfile
from collections.abc import Iterator
from pathlib import Path

LOCK_DIR_ENV = "LADDER_CORE_LOCKS"


def lock_dir() -> Path:
    return Path(os.environ.get(LOCK_DIR_ENV) or Path(tempfile.gettempdir()) / "ladder-cores")


def _set_threads(cpus: set[int]) -> None:
    """Set the affinity of every thread of this process: ``sched_setaffinity(0)`` moves only the
    calling thread, and XLA's pool may already exist in a reused Ray worker."""
    for tid in os.listdir("/proc/self/task"):
        try:
            os.sched_setaffinity(int(tid), cpus)
        except ProcessLookupError:  # the thread ended between the listing and the call
            continue


def _claim(cpus: list[int], n: int, folder: Path) -> list[tuple[int, int]]:
    """(cpu, fd) for up to ``n`` cores no other process holds; each fd holds its core's lock."""
    folder.mkdir(parents=True, exist_ok=True)
    held: list[tuple[int, int]] = []
    for cpu in cpus:
        fd = os.open(folder / f"cpu{cpu}.lock", os.O_CREAT | os.O_RDWR, 0o666)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            os.close(fd)
            continue
        held.append((cpu, fd))
        if len(held) == n:
            break
    return held


@contextlib.contextmanager
def pinned(n_cpus: float) -> Iterator[list[int] | None]:
    """Pin this process to ``n_cpus`` free cores for the block; yields them, or None when left alone."""
    if not hasattr(os, "sched_setaffinity") or not os.path.isdir("/proc/self/task"):
        yield None
        return
    allowed = sorted(os.sched_getaffinity(0))
    n = int(n_cpus)
    if n < 1 or n >= len(allowed):
        yield None
        return
    held = _claim(allowed, n, lock_dir())
    try:
        if len(held) < n:
            yield None
            return
        cores = [cpu for cpu, _ in held]
        _set_threads(set(cores))
        try:
            yield cores
        finally:
            _set_threads(set(allowed))
    finally:
        for _, fd in held:
            os.close(fd)
