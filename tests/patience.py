"""How long a test waits for something: until it happens, until the process it waits on exits, or,
only if neither comes, until a hang guard.

A slow or loaded machine makes every phase slower, so no wait here is a number of seconds chosen on one
machine. A wait on an event polls for it and also ends the moment the process that should cause it exits
(with that process's log); a bound, where a test needs one, is a multiple of a phase the same test
measured on this machine (`measured`). What is left is the hang guard: it ends a test that would
otherwise wait forever (a deadlock), far beyond anything a slow machine takes, and CI's own limit
stays the last word.
"""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

HANG_S = float(os.environ.get("LADDER_TEST_HANG_S", "2400"))


def measured(seconds: float, times: float = 4.0, floor: float = 60.0) -> float:
    """A bound of ``times`` the duration a test measured for a comparable phase on this machine."""
    return max(floor, times * seconds)


def wait_for(pred: Callable[[], Any], what: str, *, proc: subprocess.Popen | None = None,
             log: Path | None = None, bound: float = HANG_S, every: float = 0.2) -> Any:
    """Poll ``pred`` until it returns something true; fail at once if ``proc`` exits first."""
    t0 = time.monotonic()
    while True:
        value = pred()
        if value:
            return value
        if proc is not None and proc.poll() is not None:
            value = pred()  # it may have happened just before the exit
            if value:
                return value
            tail = Path(log).read_text(errors="replace")[-3000:] if log and Path(log).exists() else ""
            raise AssertionError(f"waiting for {what}: the process exited ({proc.returncode}) first\n{tail}")
        if time.monotonic() - t0 > bound:
            raise AssertionError(f"waiting for {what}: nothing after {bound:.0f} s (a hang guard"
                                 f"{'' if bound == HANG_S else ', from a phase measured here'})")
        time.sleep(every)
