"""One BLAS thread for the fits' small problems.

The fits' linear algebra works on vectors of 3-8 parameters and a few hundred points. OpenBLAS
threads even those calls, which costs nothing on an idle machine and a great deal on a busy one: its
threads spin waiting for a core, several times slower an iteration beside a second busy process
(`python -m bench fits` measures it; experiments/tiny_record.md records what it was). Limited at run
time (threadpoolctl), so a caller who imported numpy first gets it too, and only around the fits: the
caller's own BLAS keeps its threads.
"""

from __future__ import annotations

import contextlib
import functools
import sys
import threading
from collections.abc import Iterator

# The limit is the process's, not a thread's: with fits running in several threads at once, the first
# in sets it and the last out restores the caller's setting (else one thread's exit would restore it
# under another's fit, and a later exit would leave the caller at one thread).
_LOCK = threading.Lock()
_ACTIVE: dict = {"depth": 0, "limiters": [], "scipy": False}


@functools.cache
def _controller(scipy_loaded: bool):
    """The BLAS libraries loaded now; scipy brings its own OpenBLAS (with scipy.linalg), numpy another."""
    from threadpoolctl import ThreadpoolController

    return ThreadpoolController()


@contextlib.contextmanager
def one_blas_thread() -> Iterator[None]:
    """Every loaded BLAS limited to one thread inside the block, restored after it."""
    with _LOCK:
        scipy_loaded = "scipy.linalg" in sys.modules
        if _ACTIVE["depth"] == 0 or (scipy_loaded and not _ACTIVE["scipy"]):
            # the first block in, or scipy's library loaded inside an outer block: limit what is loaded now
            _ACTIVE["limiters"].append(_controller(scipy_loaded).limit(limits=1, user_api="blas"))
            _ACTIVE["scipy"] = scipy_loaded
        _ACTIVE["depth"] += 1
    try:
        yield
    finally:
        with _LOCK:
            _ACTIVE["depth"] -= 1
            if _ACTIVE["depth"] == 0:
                while _ACTIVE["limiters"]:  # newest first: each restores what it found
                    _ACTIVE["limiters"].pop().restore_original_limits()
