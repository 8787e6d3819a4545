"""What a running step gets (StepContext) and the Ray task body that runs it (execute_step)."""

from __future__ import annotations

import os
import socket
import threading
import time
import traceback
from collections.abc import Mapping
from typing import Any

from .fresh import drop_previous, set_aside
from .hashing import canonical
from .lease import BLOCKED, DEFAULT_HEARTBEAT, FAILED, STATUS_FILE, SUCCESS, beat, write_final
from .provenance import read_git, step_json_path, worker_environment
from .step import Blocked, Interrupted, resolve_fn
from .store import Store

PROGRESS_FILE = "progress.json"
RESULT_FILE = "result.json"
ERROR_FILE = "error.txt"
STOP_PREFIX = ".stop-"


def stop_path(store: Store, d: str, run_id: str) -> str:
    """The file a stopping driver writes to ask run ``run_id`` to checkpoint and exit."""
    return store.join(d, f"{STOP_PREFIX}{run_id}")


class LeaseLost(RuntimeError):
    """Raised inside a step (from ``ctx.progress``) once another owner has taken the step over."""


class _TaskBeat:
    """The task heartbeats its own RUNNING status too, so a step stays live while the process doing the
    work is alive even when its driver is starved or paused (an overloaded machine, a driver stopped
    with Ctrl-Z). It also notices when the status stops being this run's: the step was taken over."""

    def __init__(self, store: Store, d: str, run_id: str, interval: float):
        self.store, self.d, self.run_id = store, d, run_id
        self.interval = max(0.05, float(interval))
        self.lost = False
        self.stop_requested = False
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name="ladder-task-heartbeat", daemon=True)
        self._thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            try:
                if beat(self.store, self.d, self.run_id) is False:
                    self.lost = True
                    return
                if not self.stop_requested and self.store.exists(stop_path(self.store, self.d, self.run_id)):
                    self.stop_requested = True
            except Exception:  # a transient storage error: try again next beat
                pass

    def stop(self) -> None:
        self._stop.set()
        self._thread.join()


class StepContext:
    """Handed to a step function as its second argument.

    ``out_dir``: the step's directory (a local path or an fsspec URL); ``dep_dirs``: dep name -> its
    out_dir; ``run_id``: this run's id; ``reason``: why it runs; ``runtime``: non-hashed options given
    at submit (e.g. ``{"force_gate": True}``).
    """

    def __init__(self, *, root: str, name: str, hash: str, out_dir: str, dep_dirs: Mapping[str, str],
                 run_id: str, reason: str, runtime: Mapping[str, Any] | None = None, ladder: str = "",
                 progress_interval: float | None = None):
        self.root = root
        self.name = name
        self.hash = hash
        self.ladder = ladder
        self.out_dir = out_dir
        self.dep_dirs = dict(dep_dirs)
        self.run_id = run_id
        self.reason = reason
        self.runtime = dict(runtime or {})
        self.store = Store(root)
        self._dir = self.store.to_path(out_dir)
        self._progress: dict[str, Any] = {}
        self._last_write = 0.0
        self._interval = progress_interval if progress_interval is not None else (0.25 if self.store.local else 2.0)
        self._started = time.time()
        self._beat: _TaskBeat | None = None

    @property
    def lost(self) -> bool:
        """True once another owner took this step over (the step should stop: its outputs are not used)."""
        return bool(self._beat is not None and self._beat.lost)

    @property
    def stop_requested(self) -> bool:
        """True once the driver asked this run to stop (Ctrl-C, SIGTERM): a long step should save what it
        has and raise :class:`Interrupted`; after a bounded wait the driver cancels it anyway."""
        return bool(self._beat is not None and self._beat.stop_requested)

    @property
    def heartbeat_s(self) -> float:
        """Seconds between the task's heartbeats: how often ``stop_requested`` and ``lost`` can change."""
        return self._beat.interval if self._beat is not None else DEFAULT_HEARTBEAT

    @property
    def fs(self):
        """The fsspec filesystem of the store (for steps that write through fsspec)."""
        return self.store.fs

    def path(self, *parts: str) -> str:
        """A file or folder inside this step's directory, as a local path or URL."""
        return self.store.url(self.store.join(self._dir, *parts))

    def dep_path(self, dep: str, *parts: str) -> str:
        base = self.store.to_path(self.dep_dirs[dep])
        return self.store.url(self.store.join(base, *parts))

    def write_json(self, name: str, obj: Any) -> str:
        path = self.store.join(self._dir, name)
        self.store.write_json(path, canonical(obj))
        return self.store.url(path)

    def progress(self, _force: bool = False, **fields: Any) -> None:
        """Record progress (step, total_steps, loss, tokens_per_s, eta_s, ...) in progress.json.

        Writes are throttled (every 0.25 s locally); the last step of a run is always written.
        Raises :class:`LeaseLost` once another owner has taken the step over.
        """
        if self.lost:
            raise LeaseLost(f"{self.name}: another owner took this step over; this run ({self.run_id}) stops")
        self._progress.update(canonical(fields))
        now = time.time()
        step, total = self._progress.get("step"), self._progress.get("total_steps")
        last = step is not None and total is not None and step >= total
        if not (_force or last or now - self._last_write >= self._interval):
            return
        self._last_write = now
        snap = {**self._progress, "time": now, "started": self._started, "run_id": self.run_id}
        if "eta_s" not in fields and step and total and step > 0:
            snap["eta_s"] = max(0.0, (now - self._started) * (total - step) / step)
        self.store.write_json(self.store.join(self._dir, PROGRESS_FILE), snap)


def execute_step(payload: dict) -> dict:
    """The Ray task: run one step and commit its outcome (result.json, step.json, then .status).

    Returns the final status dict, or ``{"status": "LOST"}`` when another owner took the step over.
    """
    store = Store(payload["root"])
    d, run_id = payload["dir"], payload["run_id"]
    current = store.read_json(store.join(d, STATUS_FILE))
    if not isinstance(current, dict) or current.get("run_id") != run_id:
        return {"status": "LOST", "run_id": run_id, "holder": (current or {}).get("run_id")}
    start = time.time()
    prov = dict(payload["provenance"])
    if payload.get("fresh"):
        # Forced: the step starts from nothing; what it had waits aside until this run succeeds.
        prov["previous_outputs"] = set_aside(store, d, payload["aside"])
    prov.update(host=socket.gethostname(), pid=os.getpid(), start=start, end=None, status="RUNNING",
                worker=worker_environment())
    # The code that runs is the worker's checkout as it is now, not as the driver read it at submit: a
    # change made while a ladder runs (or another checkout on another node) is recorded as what ran.
    here = read_git()
    if here is not None and here != prov.get("git"):
        prov["driver_git"], prov["git"] = prov.get("git"), here
    store.write_json(step_json_path(store, d), prov)
    ctx = StepContext(root=payload["root"], name=payload["name"], hash=payload["hash"], out_dir=payload["url"],
                      dep_dirs=payload["dep_dirs"], run_id=run_id, reason=payload["reason"],
                      runtime=payload.get("runtime"), ladder=payload.get("ladder", ""))
    ctx._beat = _TaskBeat(store, d, run_id, float(payload.get("heartbeat") or DEFAULT_HEARTBEAT))
    error, reasons, status = None, None, SUCCESS
    try:
        try:
            fn = resolve_fn(payload["fn"])
            result = fn(canonical(payload["config"]), ctx)
            if ctx.lost:
                raise LeaseLost("taken over")
            if result is not None:
                if not isinstance(result, Mapping):
                    raise TypeError(f"step function returned {type(result).__name__}; expected a dict or None")
                store.write_json(store.join(d, RESULT_FILE), canonical(result))
        finally:
            ctx._beat.stop()
    except LeaseLost:
        # Another owner holds the step now: write nothing more into its directory.
        return {"status": "LOST", "run_id": run_id}
    except Blocked as e:
        status, reasons, error = BLOCKED, e.reasons, "; ".join(e.reasons)
    except Interrupted as e:
        status, error = FAILED, f"interrupted: the driver stopped ({e})"
    except Exception as e:
        status, error = FAILED, f"{type(e).__name__}: {e}"
        store.write_atomic(store.join(d, ERROR_FILE), traceback.format_exc())
    if status == SUCCESS:
        store.remove(store.join(d, ERROR_FILE))  # a failed attempt's traceback is not this run's
        if payload.get("fresh"):
            drop_previous(store, payload["aside"])
            prov["previous_outputs"] = None
    store.remove(stop_path(store, d, run_id))  # a stop request is for this run only
    end = time.time()
    prov.update(end=end, duration_s=end - start, status=status, error=error, reasons=reasons)
    store.write_json(step_json_path(store, d), prov)
    final = write_final(store, d, run_id, status, error=error, reasons=reasons, lineage=payload["lineage"])
    return final if final is not None else {"status": "LOST", "run_id": run_id}
