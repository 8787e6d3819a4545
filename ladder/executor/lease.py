"""The ``.status`` file and the lease that guards it.

Each step directory holds ``.status`` (JSON: status, run_id, owner, heartbeat, start, end, error, ...)
and numbered lease files ``.lease-<gen>``. Claiming a step means creating the next lease generation
exclusively, so of several drivers only one wins, whether the step is new, failed before, or held
by an owner whose heartbeat went stale (a takeover is the same exclusive create). Lease files are never
deleted, so generation numbers never repeat. The owner heartbeats ``.status`` from a thread; a lease is
live while its run's status is RUNNING with a heartbeat younger than the lease timeout (or, in the
moment between creating the lease and writing the status, while the lease itself is that young).
"""

from __future__ import annotations

import json
import os
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from typing import Any

from .store import ConfigError, Store

STATUS_FILE = ".status"
LEASE_PREFIX = ".lease-"

RUNNING = "RUNNING"
SUCCESS = "SUCCESS"
FAILED = "FAILED"
DEP_FAILED = "DEP_FAILED"
BLOCKED = "BLOCKED"
TERMINAL = frozenset({SUCCESS, FAILED, DEP_FAILED, BLOCKED})

DEFAULT_LEASE_TIMEOUT = 60.0
DEFAULT_HEARTBEAT = 5.0
# A reader never calls an owner dead before it has missed this many of its own recorded heartbeats,
# whatever the reader's timeout: two drivers configured differently still agree on who is alive.
MISSED_BEATS = 3

_owner: tuple[int, str] | None = None


def owner_id() -> str:
    """``host:pid:uuid`` of this process (recomputed after a fork)."""
    global _owner
    if _owner is None or _owner[0] != os.getpid():
        _owner = (os.getpid(), f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:8]}")
    return _owner[1]


def new_run_id() -> str:
    return time.strftime("%Y%m%dT%H%M%S", time.gmtime()) + "-" + uuid.uuid4().hex[:8]


def env_float(name: str, default: float) -> float:
    value = os.environ.get(name)
    if not value:
        return default
    try:
        return float(value)
    except ValueError:
        raise ConfigError(f"{name}: expected a number of seconds, got {value!r}") from None


@dataclass
class DirState:
    """What a step directory says right now.

    ``corrupt`` names a ``.status`` that exists but cannot be used (not JSON, not an object, no valid
    status): it is reported, never trusted, and the step runs again once no owner holds it.
    """

    status: dict | None
    gen: int = 0
    lease: dict | None = None
    corrupt: str | None = None

    @property
    def state(self) -> str | None:
        return self.status.get("status") if self.status else None

    @property
    def run_id(self) -> str | None:
        return self.status.get("run_id") if self.status else None

    def holder(self) -> str | None:
        return (self.lease or self.status or {}).get("owner")

    def timeout_for(self, timeout: float) -> float:
        """The reader's timeout, stretched to cover the owner's recorded heartbeat interval."""
        rec = self.lease if self._lease_pending() else self.status
        try:
            interval = float((rec or {}).get("heartbeat_interval") or 0.0)
        except (TypeError, ValueError):
            interval = 0.0
        return max(timeout, MISSED_BEATS * interval)

    def _status_fresh(self, timeout: float, now: float) -> bool:
        st = self.status
        return bool(st and st.get("status") == RUNNING
                    and now - float(st.get("heartbeat") or 0.0) < self.timeout_for(timeout))

    def _lease_pending(self) -> bool:
        """The newest lease belongs to a run whose status is not written (yet)."""
        st, ls = self.status, self.lease
        return ls is not None and not (st and st.get("run_id") == ls.get("run_id"))

    def last_beat(self) -> float:
        beats = [float((self.status or {}).get("heartbeat") or 0.0)] if self.state == RUNNING else []
        if self._lease_pending():
            beats.append(float(self.lease.get("acquired") or 0.0))
        if not beats:
            beats.append(float((self.status or {}).get("heartbeat") or 0.0))
        return max(beats)

    def live(self, timeout: float, now: float | None = None) -> bool:
        """True while some owner holds the step: a RUNNING status with a fresh heartbeat (whoever's run it
        is), or a newest lease younger than the timeout whose run has not written its status yet.

        A fresh heartbeat always counts: a live run is never taken over, even when the newest lease names
        another run (a claimer whose status write was overtaken, or a lease file that could not be read).
        """
        now = time.time() if now is None else now
        if self._status_fresh(timeout, now):
            return True
        if self._lease_pending():
            return now - float(self.lease.get("acquired") or 0.0) < self.timeout_for(timeout)
        return False


def status_path(store: Store, d: str) -> str:
    return store.join(d, STATUS_FILE)


def _check_status(data: bytes | None) -> tuple[dict | None, str | None]:
    """(status, None) for a usable .status; (None, why) for one that exists but is corrupt."""
    if data is None:
        return None, None
    try:
        st = json.loads(data)
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        return None, f"corrupt .status (not JSON: {str(e).splitlines()[0][:80]})"
    if not isinstance(st, dict):
        return None, f"corrupt .status (a JSON {type(st).__name__}, expected an object)"
    if st.get("status") not in (RUNNING, *TERMINAL):
        return None, f"corrupt .status (status {str(st.get('status'))[:40]!r} is not one of RUNNING, {', '.join(sorted(TERMINAL))})"
    try:
        float(st.get("heartbeat") or 0.0)
    except (TypeError, ValueError):
        return None, f"corrupt .status (heartbeat {str(st.get('heartbeat'))[:40]!r} is not a number)"
    return st, None


def read_state(store: Store, d: str) -> DirState:
    status, corrupt = _check_status(store.read_bytes(status_path(store, d)))
    gens = [
        int(n[len(LEASE_PREFIX) :])
        for n in store.listdir(d)
        if n.startswith(LEASE_PREFIX) and n[len(LEASE_PREFIX) :].isdigit()
    ]
    gen = max(gens, default=0)
    lease = None
    if gen:
        path = store.join(d, f"{LEASE_PREFIX}{gen}")
        lease = store.read_json(path)
        if not isinstance(lease, dict):
            # Unreadable (e.g. written by an older version that created it empty first): its age is the
            # file's, so a fresh one still guards its claimer and an old one goes stale as usual.
            lease = {"acquired": store.mtime(path) or 0.0, "unreadable": True}
        else:
            try:
                float(lease.get("acquired") or 0.0)
            except (TypeError, ValueError):
                lease = {**lease, "acquired": store.mtime(path) or 0.0}
    return DirState(status, gen, lease, corrupt)


def try_claim(store: Store, d: str, state: DirState, *, run_id: str, reason: str, owner: str | None = None,
              heartbeat: float = DEFAULT_HEARTBEAT) -> bool:
    """Create lease generation ``state.gen + 1``; on success write ``.status`` RUNNING and return True.

    ``heartbeat``: how often the owner beats, recorded so that readers give it time to."""
    owner = owner or owner_id()
    now = time.time()
    gen = state.gen + 1
    lease = {"gen": gen, "owner": owner, "run_id": run_id, "acquired": now, "reason": reason,
             "previous_owner": state.holder(), "previous_status": state.state, "heartbeat_interval": heartbeat}
    if not store.create_exclusive(store.join(d, f"{LEASE_PREFIX}{gen}"), json.dumps(lease, sort_keys=True)):
        return False
    status = {"status": RUNNING, "run_id": run_id, "owner": owner, "heartbeat": now, "start": now,
              "end": None, "error": None, "lease": gen, "reason": reason, "heartbeat_interval": heartbeat}
    store.write_json(status_path(store, d), status)
    return True


def beat(store: Store, d: str, run_id: str) -> bool | None:
    """Refresh the heartbeat of our RUNNING status.

    True: beaten. False: the status is no longer ours or no longer RUNNING (stop beating). None: the
    status could not be read this time (keep beating: one bad read must not let a live lease go stale).
    """
    st = store.read_json(status_path(store, d))
    if not isinstance(st, dict):
        return None
    if st.get("run_id") != run_id or st.get("status") != RUNNING:
        return False
    st["heartbeat"] = time.time()
    store.write_json(status_path(store, d), st)
    return True


def write_final(store: Store, d: str, run_id: str, status: str, **fields: Any) -> dict | None:
    """Write a terminal status for our run; None (nothing written) when another run holds the step now."""
    st = store.read_json(status_path(store, d))
    if isinstance(st, dict) and st.get("run_id") not in (None, run_id):
        return None
    now = time.time()
    new = {**(st if isinstance(st, dict) else {}), "status": status, "run_id": run_id, "end": now,
           "heartbeat": now, **fields}
    store.write_json(status_path(store, d), new)
    return new


def mark(store: Store, d: str, status: str, *, error: str, timeout: float, **fields: Any) -> bool:
    """Record DEP_FAILED/BLOCKED for a step that never ran, unless it succeeded before or is held now."""
    state = read_state(store, d)
    if state.state == SUCCESS or state.live(timeout):
        return False
    now = time.time()
    store.makedirs(d)
    store.write_json(status_path(store, d), {
        "status": status, "run_id": None, "owner": owner_id(), "heartbeat": now, "start": None,
        "end": now, "error": error, "lease": state.gen, **fields})
    return True


class Heartbeater:
    """A daemon thread that heartbeats every step this driver owns."""

    def __init__(self, store: Store, interval: float):
        self.store = store
        self.interval = max(0.05, float(interval))
        self._items: dict[str, str] = {}
        self._lock = threading.Lock()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def add(self, d: str, run_id: str) -> None:
        with self._lock:
            self._items[d] = run_id
        if self._thread is None:
            self._thread = threading.Thread(target=self._loop, name="ladder-heartbeat", daemon=True)
            self._thread.start()

    def remove(self, d: str) -> None:
        with self._lock:
            self._items.pop(d, None)

    def _loop(self) -> None:
        # Beats run under the lock, so once remove() returns no beat of that step is in flight.
        while not self._stop.wait(self.interval):
            with self._lock:
                for d, run_id in list(self._items.items()):
                    try:
                        if beat(self.store, d, run_id) is False:
                            self._items.pop(d, None)
                    except Exception:  # a transient storage error must not kill the thread
                        pass

    def stop(self) -> None:
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2 * self.interval + 1)
