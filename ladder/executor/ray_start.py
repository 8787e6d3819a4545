"""Start (or join) the Ray a driver runs its steps on, riding out a slow start and explaining a failed one.

On a busy machine a local Ray can miss its own 30 s startup window (its raylet registers late with the
GCS): that is transient, so the start is retried with backoff until ``LADDER_RAY_START_S`` has passed.
A Ray temp folder that cannot work (not a folder, not writable, a path too long for Ray's unix sockets)
is the user's setting, not the machine's load: it is reported at once, naming the setting and the fix.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Callable
from typing import Any

from .lease import env_float
from .store import ConfigError

# How long a driver keeps trying to start its local Ray before it gives up. Several of Ray's own
# 30 s startup windows, so a machine that is briefly overloaded (another Ray starting, a compile) is
# waited out, yet a machine that cannot start Ray at all is told so within minutes, not never.
START_S_DEFAULT = 300.0
# Ray puts unix sockets under <temp>/session_<timestamp>_<pid>/sockets/plasma_store: the kernel caps
# such a path at 107 bytes, and Ray's own session part takes about 60 of them.
_SOCKET_PATH_MAX = 107
_SESSION_SUFFIX_LEN = len("/session_2026-01-01_00-00-00_000000_1234567/sockets/plasma_store")


class RayStartError(RuntimeError):
    """Ray could not be started or joined: its message is one line naming the cause and the fix."""


def check_temp_dir(temp_dir: str | None) -> None:
    """Refuse, in one line, a Ray temp folder that cannot work, before Ray tries (and fails deep inside)."""
    if not temp_dir:
        return
    existing = os.path.abspath(temp_dir)
    while not os.path.exists(existing):
        existing = os.path.dirname(existing)
    if not os.path.isdir(existing):
        raise ConfigError(f"RAY_TMPDIR={temp_dir}: {existing} is a file, not a folder; "
                          "point RAY_TMPDIR at a writable folder, or unset it")
    if not os.access(existing, os.W_OK | os.X_OK):
        raise ConfigError(f"RAY_TMPDIR={temp_dir}: {existing} is not writable; "
                          "point RAY_TMPDIR at a writable folder, or unset it")
    if len(os.path.abspath(temp_dir)) + _SESSION_SUFFIX_LEN > _SOCKET_PATH_MAX:
        raise ConfigError(f"RAY_TMPDIR={temp_dir}: too long for Ray's unix sockets (at most "
                          f"{_SOCKET_PATH_MAX - _SESSION_SUFFIX_LEN} characters); use a shorter path such as /tmp/ray")


def retry_with_backoff(start: Callable[[], None], bound_s: float, *, first_wait_s: float = 2.0,
                       on_retry: Callable[[int, BaseException, float], None] | None = None,
                       sleep: Callable[[float], None] = time.sleep) -> int:
    """Call ``start`` until it returns, waiting 2, 4, 8 ... s between tries, for at most ``bound_s``.

    Returns the number of tries. The last error is re-raised once another try would start past the bound.
    """
    began = time.monotonic()
    wait = first_wait_s
    tries = 0
    while True:
        tries += 1
        try:
            start()
            return tries
        except Exception as exc:
            if time.monotonic() - began + wait > bound_s:
                raise
            if on_retry is not None:
                on_retry(tries, exc, wait)
            sleep(wait)
            wait = min(wait * 2, 60.0)


def _load_line() -> str:
    try:
        one_minute = os.getloadavg()[0]
    except OSError:
        return ""
    cores = os.cpu_count() or 1
    busy = " (the machine is overloaded)" if one_minute > 1.5 * cores else ""
    return f"; load average {one_minute:.1f} on {cores} cores{busy}"


def start_ray(address: str | None, *, include_dashboard: bool = False, log: Callable[[str], None] | None = None) -> None:
    """``ray.init`` for a driver: join ``address``, or start a local Ray using every core.

    Raises ConfigError for an unusable RAY_TMPDIR (a setting to fix), RayStartError when Ray still has not
    started after ``LADDER_RAY_START_S`` seconds of retries.
    """
    import ray

    temp_dir = os.environ.get("RAY_TMPDIR") or None
    # Ray starts its workers at nice 15 (its worker_niceness), so any other process at the default priority
    # starves every step a ladder runs. A ladder's workers are its training: they run at the driver's
    # priority. Read by the raylet a local start spawns; a user's own setting wins.
    os.environ.setdefault("RAY_worker_niceness", "0")
    kwargs: dict[str, Any] = {"logging_level": logging.WARNING}
    if address:
        def start() -> None:
            ray.init(address=address, **kwargs)
    else:
        check_temp_dir(temp_dir)

        def start() -> None:
            ray.init(address="local", num_cpus=os.cpu_count() or 1, include_dashboard=include_dashboard,
                     _temp_dir=temp_dir, **kwargs)

    def start_clean() -> None:
        try:
            start()
        except BaseException:
            ray.shutdown()  # a half-started local Ray (its GCS, a raylet) must not linger into the next try
            raise

    def on_retry(tries: int, exc: BaseException, wait: float) -> None:
        if log is not None:
            log(f"Ray did not start (try {tries}: {_first_line(exc)}); retrying in {wait:.0f} s")

    bound_s = env_float("LADDER_RAY_START_S", START_S_DEFAULT)
    try:
        retry_with_backoff(start_clean, bound_s, on_retry=on_retry)
    except Exception as exc:
        where = f"join Ray at {address}" if address else "start a local Ray"
        fix = ("check that the cluster is up and the address is right (ray status)" if address else
               "if another Ray is stuck, run `ray stop`; on a busy machine wait or raise LADDER_RAY_START_S")
        raise RayStartError(f"could not {where} within {bound_s:.0f} s ({_first_line(exc)}{_load_line()}); "
                            f"{fix}, then rerun the same command: finished steps are kept") from exc


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()
    return (text[0][:200] if text else type(exc).__name__)
