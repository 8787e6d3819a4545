"""SIGTERM during training: the handler only sets a flag; the loop checkpoints at its next chunk
boundary, then restores the previous handler and raises the signal again (so the process still ends
the way its sender asked)."""

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
