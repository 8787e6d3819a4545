"""SIGTERM during training: the handler only sets a flag; the loop checkpoints at its next chunk
boundary, then restores the previous handler and raises the signal again (so the process still ends
the way its sender asked). In a gang of processes the loop's stop flags are ored over every process
(:func:`any_process`), so all of them checkpoint at the same step."""

from __future__ import annotations

import signal
import threading


class Sigterm:
    def __init__(self):
        self.flag = False
        self.prev = None
        self.installed = False

    def install(self):
        if threading.current_thread() is threading.main_thread():
            try:
                self.prev = signal.signal(signal.SIGTERM, self._handle)
                self.installed = True
            except ValueError:  # the main thread of a sub-interpreter: no handler, the run just ends on SIGTERM
                pass

    def _handle(self, signum, frame):
        self.flag = True

    def restore_and_reraise(self):
        self.uninstall()
        signal.raise_signal(signal.SIGTERM)

    def uninstall(self):
        if self.installed:
            signal.signal(signal.SIGTERM, self.prev if self.prev is not None else signal.SIG_DFL)
            self.installed = False


def any_process(flag: bool) -> bool:
    """``flag`` ored over every JAX process of the run; in one process, ``flag`` itself and no collective.

    A gang's processes checkpoint together (orbax and the loop's barriers are collectives) and each runs
    the next chunk's collectives only if it goes on: a process that stopped while another went on would
    leave that one waiting forever. Every process calls this at the same points of the loop (its chunk
    and boundary steps are the same everywhere), so the gather always finds all of them."""
    import jax

    if jax.process_count() == 1:
        return flag
    import numpy as np
    from jax.experimental import multihost_utils

    return bool(np.asarray(multihost_utils.process_allgather(np.int32(flag))).any())
