"""A trainer's process, owned by its step: started in its own process group with the kernel told to
kill it when the process that started it dies (Linux ``PR_SET_PDEATHSIG``), so it never outlives its
step's Ray worker; its standard output and error kept in a log, the last lines of its standard error
kept for the step's one-line failure; SIGTERM forwarded to its whole group; the group killed on every
way out of the step (:meth:`Child.kill`, called in a ``finally``)."""

from __future__ import annotations

import collections
import os
import signal
import subprocess
import sys
import threading
from collections.abc import Mapping, Sequence
from pathlib import Path

STDERR_TAIL = 8  # lines of standard error a failure's line quotes


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    if not sys.platform.startswith("linux"):
        return
    import ctypes

    pr_set_pdeathsig = 1
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(pr_set_pdeathsig, signal.SIGKILL)


class Child:
    """``argv`` running in ``cwd`` with ``env``; output appended to ``log``."""

    def __init__(self, argv: Sequence[str], *, cwd: str | os.PathLike, env: Mapping[str, str], log: Path):
        self.log = open(log, "ab")  # noqa: SIM115 - closed by kill(), after the process is gone
        self.tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)
        self.parent = os.getpid()
        self.proc = subprocess.Popen(list(argv), cwd=cwd, env=dict(env), stdout=self.log, stderr=subprocess.PIPE,
                                     stdin=subprocess.DEVNULL, start_new_session=True, preexec_fn=_die_with_parent)
        self.lock = threading.Lock()
        self.reader = threading.Thread(target=self._read_stderr, daemon=True)
        self.reader.start()
        self.terminated = False

    @property
    def pid(self) -> int:
        return self.proc.pid

    def _read_stderr(self) -> None:
        for raw in iter(self.proc.stderr.readline, b""):
            with self.lock:
                if not self.log.closed:
                    self.log.write(raw)
                    self.log.flush()
            line = raw.decode("utf-8", errors="replace").rstrip()
            if line:
                self.tail.append(line)

    def wait(self, timeout: float) -> int | None:
        """The exit status once the process has ended, else None after ``timeout`` seconds."""
        try:
            return self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            return None

    def terminate(self) -> None:
        """SIGTERM to the trainer's group: checkpoint and exit."""
        self.terminated = True
        self._signal(signal.SIGTERM)

    def _signal(self, sig: int) -> None:
        try:
            os.killpg(self.proc.pid, sig)
        except ProcessLookupError:  # the group is gone already: nothing left to signal
            pass

    def kill(self) -> None:
        """SIGKILL to the whole group (the trainer and whatever it started), then reap it."""
        self._signal(signal.SIGKILL)
        self.proc.wait()
        # The pipe closes when the group is gone; a process that left the group (its own setsid) and kept
        # the pipe must not hold the step: the reader is a daemon thread, waited on for a bounded time.
        self.reader.join(timeout=10)
        with self.lock:
            self.log.close()

    def describe_exit(self, rc: int) -> str:
        """'exited with status 3' or 'was killed by SIGSEGV', and the last lines of its standard error."""
        how = (f"was killed by {signal.Signals(-rc).name}" if rc < 0 else f"exited with status {rc}")
        tail = " | ".join(self.tail)
        return f"{how}: {tail}" if tail else f"{how} (its standard error was empty)"
