"""Stopping a driver without throwing away compute: SIGTERM handled like Ctrl-C, running steps asked to
checkpoint and exit (a ``.stop-<run_id>`` file their task sees within a heartbeat), a bounded wait
(``Executor.stop_grace``, ``LADDER_STOP_GRACE``), then whatever is left cancelled and released."""

from __future__ import annotations

import logging
import time

from .context import stop_path
from .lease import FAILED, TERMINAL, write_final

log = logging.getLogger("ladder.executor")
DEFAULT_STOP_GRACE = 60.0  # seconds a stopping driver waits for its steps to checkpoint


class TerminateAsInterrupt:
    """While a run is in progress, SIGTERM stops it like Ctrl-C does (tasks asked to checkpoint and exit,
    then cancelled, steps released) instead of leaving leases to go stale. Only from the main thread,
    only over the default handler. Starting Ray installs its own C-level SIGTERM handler (it logs and
    kills the process at once), so :meth:`again` puts ours back once Ray is up."""

    def __init__(self):
        import signal
        import threading

        self.installed = (threading.current_thread() is threading.main_thread()
                          and signal.getsignal(signal.SIGTERM) is signal.SIG_DFL)
        self.again()

    @staticmethod
    def _handler(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")

    def again(self) -> None:
        import signal

        if self.installed:
            signal.signal(signal.SIGTERM, self._handler)

    def restore(self) -> None:
        import signal

        if self.installed:
            signal.signal(signal.SIGTERM, signal.SIG_DFL)


def stop_owned(run) -> None:
    """The driver is stopping (Ctrl-C, SIGTERM, an error): ask our tasks to checkpoint and exit, wait up
    to ``stop_grace`` seconds for them, then cancel what is left; every step we hold is released."""
    if not run.owned:
        return
    import ray

    for name, o in run.owned.items():
        try:
            run.store.write_atomic(stop_path(run.store, run.nodes[name].dir, o.run_id), f"{time.time()}\n")
        except Exception as e:  # the storage is what failed: cancel at once below
            log.warning("could not ask %s to stop: %s", name, e)
    grace = run.ex.stop_grace
    if grace > 0:
        print(f"[ladder] stopping: asked {', '.join(run.owned)} to checkpoint and exit "
              f"(waiting up to {grace:g}s; Ctrl-C again to stop at once)", flush=True)
    done: set = set()
    refs = [o.ref for o in run.owned.values()]
    deadline = time.time() + grace
    try:
        while len(done) < len(refs) and time.time() < deadline:
            ready, _ = ray.wait([r for r in refs if r not in done], num_returns=1,
                                timeout=max(0.0, min(1.0, deadline - time.time())))
            done.update(ready)
    except KeyboardInterrupt:  # asked again: stop now
        pass
    for name, o in list(run.owned.items()):
        node = run.nodes[name]
        run.hb.remove(node.dir)
        if o.ref not in done:
            try:
                ray.cancel(o.ref, force=True)
            except Exception as e:  # the worker may be gone already
                log.warning("could not cancel %s: %s", name, e)
        # A task that saved and stopped wrote FAILED itself; one cancelled here gets it now.
        try:
            st = run.store.read_json(run.store.join(node.dir, ".status"))
            if not (isinstance(st, dict) and st.get("run_id") == o.run_id and st.get("status") in TERMINAL):
                write_final(run.store, node.dir, o.run_id, FAILED, error="interrupted: the driver stopped")
        except Exception as e:
            log.warning("could not release %s: %s", name, e)
