"""The driver: runs a ladder's steps as Ray tasks, resumably, with leases shared with other drivers.

The driver holds no state that matters: every decision is re-derived from the step directories, so it
may be killed at any moment and started again (or run twice at once). Ray starts only when some step
actually has to run on this submit.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .context import ERROR_FILE, execute_step, stop_path
from .fresh import aside_dir
from .hashing import canonical, hashed_config
from .lease import (
    BLOCKED,
    DEFAULT_HEARTBEAT,
    DEFAULT_LEASE_TIMEOUT,
    DEP_FAILED,
    FAILED,
    SUCCESS,
    TERMINAL,
    Heartbeater,
    mark,
    new_run_id,
    read_state,
    try_claim,
    write_final,
)
from .plan import (
    BLOCK,
    RUN,
    SKIP,
    WAIT,
    Node,
    PlanEntry,
    assess,
    build_graph,
    dependents,
    ladder_dir,
    make_plan,
    record_inputs,
    stale_steps,
)
from .progress import read_progress
from .provenance import environment, read_index, step_json_path, write_index
from .step import Step
from .store import ConfigError, Store

log = logging.getLogger("ladder.executor")
DEFAULT_STOP_GRACE = 60.0


@dataclass
class StepOutcome:
    name: str
    status: str  # SUCCESS | FAILED | DEP_FAILED | BLOCKED
    path: str
    action: str  # ran | skipped | waited (another driver ran it) | propagated (never started)
    run_id: str | None = None
    reason: str = ""
    error: str | None = None
    start: float | None = None
    end: float | None = None


@dataclass
class RunSummary:
    steps: dict[str, StepOutcome] = field(default_factory=dict)
    elapsed_s: float = 0.0
    ray_started: bool = False

    @property
    def statuses(self) -> dict[str, str]:
        return {n: o.status for n, o in self.steps.items()}

    @property
    def ok(self) -> bool:
        """Every step ended SUCCESS (run now, run before, or run by another driver)."""
        return all(o.status == SUCCESS for o in self.steps.values())

    @property
    def failed(self) -> list[str]:
        return [n for n, o in self.steps.items() if o.status in (FAILED, DEP_FAILED)]

    @property
    def blocked(self) -> list[str]:
        return [n for n, o in self.steps.items() if o.status == BLOCKED]

    @property
    def ran(self) -> list[str]:
        return [n for n, o in self.steps.items() if o.action == "ran"]

    @property
    def skipped(self) -> list[str]:
        return [n for n, o in self.steps.items() if o.action == "skipped"]

    def to_dict(self) -> dict:
        return {"ok": self.ok, "elapsed_s": self.elapsed_s, "ray_started": self.ray_started,
                "steps": {n: vars(o) for n, o in self.steps.items()}}


def expand_force(steps: Sequence[Step], names: Iterable[str]) -> set[str]:
    """``names`` plus their transitive data dependents (not order-only ones): what ``ladder rerun`` forces."""
    names = list(names)
    known = {s.name for s in steps}
    unknown = [n for n in names if n not in known]
    if unknown:
        raise ValueError(f"unknown step(s) {', '.join(map(repr, unknown))}; steps are: {', '.join(sorted(known))}")
    by_name = {s.name: s for s in steps}
    out = set(names)
    changed = True
    while changed:
        changed = False
        for s in by_name.values():
            if s.name not in out and any(d.step in out and d.kind == "data" for d in s.deps):
                out.add(s.name)
                changed = True
    return out


@dataclass
class _Owned:
    ref: Any
    run_id: str
    reason: str
    start: float


def _resources(step: Step) -> dict:
    res = canonical(step.resources) if step.resources else {}
    opts: dict[str, Any] = {
        "num_cpus": float(res.get("cpus", 1)),
        "num_gpus": float(res.get("gpus", 0)),
        "max_retries": int(res.get("max_retries", 2)),
        "retry_exceptions": False,
    }
    if res.get("custom"):
        opts["resources"] = {k: float(v) for k, v in res["custom"].items()}
    if res.get("memory"):
        opts["memory"] = float(res["memory"])
    if res.get("env"):  # read when the worker starts (e.g. XLA_FLAGS): Ray gives such a step its own worker
        opts["runtime_env"] = {"env_vars": {k: str(v) for k, v in res["env"].items()}}
    return opts


_remote_fn = None


def _remote():
    global _remote_fn
    import ray

    if _remote_fn is None:
        _remote_fn = ray.remote(execute_step)
    return _remote_fn


class Executor:
    """Runs, plans and reports one ladder's steps under ``<root>/<ladder>/``."""

    def __init__(self, root: str, ladder: str, *, address: str | None = None, max_concurrent: int | None = None,
                 lease_timeout: float = DEFAULT_LEASE_TIMEOUT, heartbeat: float = DEFAULT_HEARTBEAT,
                 show_progress: bool = False, stop_grace: float | None = None):
        if not ladder or "/" in ladder:
            raise ValueError(f"ladder: {ladder!r} must be a non-empty name without '/'")
        if max_concurrent is not None and max_concurrent < 1:
            raise ConfigError(f"max_concurrent: must be >= 1, got {max_concurrent}")
        self.store = Store(root)
        self.root = root
        self.ladder = ladder
        self.address = address
        self.max_concurrent = max_concurrent
        # Explicit arguments win; otherwise LADDER_LEASE_TIMEOUT / LADDER_HEARTBEAT override the defaults.
        if lease_timeout == DEFAULT_LEASE_TIMEOUT:
            lease_timeout = _env_float("LADDER_LEASE_TIMEOUT", lease_timeout)
        if heartbeat == DEFAULT_HEARTBEAT:
            heartbeat = _env_float("LADDER_HEARTBEAT", heartbeat)
        if heartbeat >= lease_timeout:
            raise ConfigError(f"heartbeat ({heartbeat}s, LADDER_HEARTBEAT) must be shorter than lease_timeout "
                              f"({lease_timeout}s, LADDER_LEASE_TIMEOUT)")
        self.lease_timeout = float(lease_timeout)
        self.heartbeat = float(heartbeat)
        self.show_progress = show_progress
        # How long a stopping driver waits for running steps to checkpoint before it cancels them.
        self.stop_grace = float(stop_grace if stop_grace is not None else _env_float("LADDER_STOP_GRACE", DEFAULT_STOP_GRACE))
        self.poll = 0.1 if self.store.local else 1.0
        self.base = ladder_dir(self.store, ladder)
        self.code_dir: str | None = None  # the checkout whose commits step.json records (default: ours)

    # ------------------------------------------------------------------ queries
    def graph(self, steps: Sequence[Step]) -> dict[str, Node]:
        return build_graph(self.store, self.ladder, steps)

    def plan(self, steps: Sequence[Step], force: Iterable[str] = (), rerun_stale: bool = False) -> list[PlanEntry]:
        """What a submit would do; each finished step the code changed under says so (``stale``), and with
        ``rerun_stale`` those steps and their data dependents are planned to rerun."""
        nodes = self.graph(steps)
        stale = stale_steps(self.store, nodes, self.code_dir)
        force = self._check_force(nodes, force)
        if rerun_stale:
            force |= dependents(nodes, stale)
        return make_plan(self.store, self.ladder, nodes, force, self.lease_timeout, stale)

    def status(self, steps: Sequence[Step]) -> list[dict]:
        nodes = self.graph(steps)
        plan = {e.name: e for e in make_plan(self.store, self.ladder, nodes, (), self.lease_timeout)}
        out = []
        now = time.time()
        for name, node in nodes.items():
            st = read_state(self.store, node.dir)
            s = st.status or {}
            prog = read_progress(self.store, node.dir)
            result = self.store.read_json(self.store.join(node.dir, "result.json"))
            result = result if isinstance(result, dict) else {}
            loss = prog.get("loss")
            if loss is None:
                loss = next((result[k] for k in ("final_loss", "loss", "eval_loss", "train_loss") if k in result), None)
            state = st.state or ("CORRUPT" if st.corrupt else "NEW")
            out.append({
                "name": name, "step": name, "hash": node.short, "path": node.url, "status": state,
                "live": st.live(self.lease_timeout, now),
                "stale": state == "RUNNING" and not st.live(self.lease_timeout, now),
                "run_id": s.get("run_id"), "owner": st.holder(), "heartbeat": s.get("heartbeat"),
                "start": s.get("start"), "end": s.get("end"), "error": st.corrupt or s.get("error"),
                "reason": s.get("reason"), "loss": loss, "progress": prog,
                "next": plan[name].action, "next_reason": plan[name].reason,
                "deps": [d.step for d in node.step.deps], "flops": node.step.flops,
            })
        return out

    # ------------------------------------------------------------------ running
    def run(self, steps: Sequence[Step], force: Iterable[str] = (), runtime: Mapping[str, Any] | None = None,
            rerun_stale: bool = False) -> RunSummary:
        """Run what is not done. ``rerun_stale``: also rerun, from nothing, each finished step whose code
        changed since it ran (and its data dependents)."""
        nodes = self.graph(steps)
        force = self._check_force(nodes, force)
        if rerun_stale:
            force |= dependents(nodes, stale_steps(self.store, nodes, self.code_dir))
        record_inputs(self.store, nodes)
        return _Run(self, nodes, force, runtime).go()

    def _check_force(self, nodes: Mapping[str, Node], force: Iterable[str]) -> set[str]:
        force = set(force)
        unknown = force - set(nodes)
        if unknown:
            raise ValueError(f"force: unknown step(s) {', '.join(sorted(map(repr, unknown)))}; "
                             f"steps are: {', '.join(nodes)}")
        return force

    def _check_shared_store(self) -> None:
        """Steps run in Ray worker processes: a root only this process can see would make every step wait
        or fail out of sight (memory:// hangs), so say so before starting anything."""
        protocols = self.store.fs.protocol if isinstance(self.store.fs.protocol, tuple) else (self.store.fs.protocol,)
        if "memory" in protocols:
            raise ConfigError(f"root {self.root}: memory:// lives inside one process and Ray workers cannot see it; "
                             "use a local folder or shared storage (gs://, s3://)")

    def _ensure_ray(self) -> bool:
        """Start (or join) Ray if this process has not; True when it started it."""
        import ray

        if ray.is_initialized():
            return False
        address = self.address or os.environ.get("RAY_ADDRESS") or None
        kwargs: dict[str, Any] = {"logging_level": logging.WARNING}
        if address:
            ray.init(address=address, **kwargs)
        else:
            ray.init(address="local", num_cpus=os.cpu_count() or 1,
                     include_dashboard=os.environ.get("LADDER_RAY_DASHBOARD", "") not in ("", "0"),
                     _temp_dir=os.environ.get("RAY_TMPDIR") or None, **kwargs)
        return True


def _env_float(name: str, default: float) -> float:
    from .lease import env_float

    return env_float(name, default)


class _TerminateAsInterrupt:
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


class _Run:
    """One submit: the scheduling loop."""

    def __init__(self, ex: Executor, nodes: dict[str, Node], force: Iterable[str], runtime):
        self.ex = ex
        self.store = ex.store
        self.nodes = nodes
        self.force = ex._check_force(nodes, force)
        self.runtime = canonical(dict(runtime or {}))
        self.summary = RunSummary()
        self.outcomes = self.summary.steps
        self._order = {name: i for i, name in enumerate(nodes)}
        self.pending: list[str] = sorted(nodes, key=self._priority)
        self.owned: dict[str, _Owned] = {}
        self.watching: dict[str, float] = {}
        self.hb = Heartbeater(self.store, ex.heartbeat)
        self.env: dict | None = None
        self.view = None
        self.sigterm: _TerminateAsInterrupt | None = None

    # -- helpers
    def _done(self, name: str, status: str, action: str, **kw) -> None:
        self.outcomes[name] = StepOutcome(name, status, self.nodes[name].url, action, **kw)

    def go(self) -> RunSummary:
        t0 = time.time()
        if self.ex.show_progress:
            from .progress import ProgressView

            self.view = ProgressView(self.store, title=f"ladder {self.ex.ladder}")
        self.sigterm = _TerminateAsInterrupt()
        try:
            while self.pending or self.owned or self.watching:
                progressed = self._schedule()
                if self.owned:
                    progressed |= self._collect(0.0 if progressed else self.ex.poll)
                progressed |= self._poll_watching()
                if not progressed and not self.owned:
                    time.sleep(self.ex.poll)
                self._render()
        except BaseException:
            self._abort()
            raise
        finally:
            self.sigterm.restore()
            self.hb.stop()
            if self.view is not None:
                self._render(force=True)
                self.view.stop()
        self.summary.elapsed_s = time.time() - t0
        # Report in the steps' order, whatever order they finished in.
        ordered = {n: self.outcomes[n] for n in self.nodes}
        self.outcomes.clear()
        self.outcomes.update(ordered)
        return self.summary

    def _schedule(self) -> bool:
        progressed = False
        for name in list(self.pending):
            node = self.nodes[name]
            deps = node.step.deps
            if any(d.step not in self.outcomes for d in deps):
                continue
            failed = [d.step for d in deps if d.required and self.outcomes[d.step].status in (FAILED, DEP_FAILED)]
            blocked = [d.step for d in deps if d.required and self.outcomes[d.step].status == BLOCKED]
            if failed or blocked:
                status = DEP_FAILED if failed else BLOCKED
                msg = f"dependency failed: {', '.join(failed)}" if failed else f"dependency blocked: {', '.join(blocked)}"
                mark(self.store, node.dir, status, error=msg, timeout=self.ex.lease_timeout)
                self._done(name, status, "propagated", reason=msg, error=msg)
                self.pending.remove(name)
                progressed = True
                continue
            dep_run_ids = {d.step: self.outcomes[d.step].run_id for d in node.step.data_deps}
            a = assess(self.store, self.ex.base, node, forced=name in self.force, dep_run_ids=dep_run_ids,
                       lease_timeout=self.ex.lease_timeout)
            if a.action == SKIP:
                s = a.state.status or {}
                self._done(name, SUCCESS, "skipped", run_id=a.state.run_id, reason=a.reason,
                           start=s.get("start"), end=s.get("end"))
                self.pending.remove(name)
                progressed = True
                continue
            if a.action == WAIT:
                self.watching[name] = time.time()
                self.pending.remove(name)
                progressed = True
                continue
            assert a.action in (RUN, BLOCK)
            if self.ex.max_concurrent and len(self.owned) >= self.ex.max_concurrent:
                continue
            if not self.summary.ray_started:
                self.ex._check_shared_store()
                self.summary.ray_started = self.ex._ensure_ray() or self.summary.ray_started
                self.sigterm.again()
            self._start(node, a)
            self.pending.remove(name)
            progressed = True
        return progressed

    def _start(self, node: Node, a) -> None:
        run_id = new_run_id()
        self.store.makedirs(node.dir)
        # The assessment may be old by now (starting Ray takes seconds, tens of seconds on a loaded
        # machine): claim against what the directory says now, so an owner that was late with a
        # heartbeat but is beating again (or another driver that claimed meanwhile) keeps the step.
        state = read_state(self.store, node.dir)
        if state.live(self.ex.lease_timeout) or state.gen != a.state.gen:
            self.watching[node.name] = time.time()
            return
        if not try_claim(self.store, node.dir, state, run_id=run_id, reason=a.reason, heartbeat=self.ex.heartbeat):
            self.watching[node.name] = time.time()  # another driver won the claim: use its result
            return
        self.hb.add(node.dir, run_id)
        self.force.discard(node.name)
        if self.env is None:
            self.env = environment()
        data = {d.step for d in node.step.data_deps}
        lineage = {d: self.outcomes[d].run_id for d in sorted(data)}
        dep_dirs = {d.step: self.nodes[d.step].url for d in node.step.deps}
        prev = read_index(self.store, self.ex.base, node.name)
        provenance = {
            "name": node.name, "ladder": self.ex.ladder, "hash": node.hash, "path": node.url, "fn": node.fn,
            "config": node.config, "hashed_config": hashed_config(node.config), "description": node.step.description,
            "deps": [{"step": d.step, "kind": d.kind, "required": d.required, "path": dep_dirs[d.step],
                      "hash": self.nodes[d.step].short, "run_id": self.outcomes[d.step].run_id}
                     for d in node.step.deps],
            "dep_run_ids": lineage, "run_id": run_id, "reason": a.reason, "config_diff": a.diff,
            "previous": {"path": prev.get("path"), "run_id": prev.get("run_id")} if prev else None,
            "forced": a.reason == "forced", "runtime": self.runtime, "resources": canonical(node.step.resources),
            "flops": node.step.flops, **(self.env or {}),
        }
        write_index(self.store, self.ex.base, node.name, {
            "path": node.url, "hash": node.hash, "fn": node.fn, "config": hashed_config(node.config),
            "deps": node.dep_hashes, "run_id": run_id})
        payload = {
            "root": self.ex.root, "ladder": self.ex.ladder, "name": node.name, "hash": node.hash,
            "dir": node.dir, "url": node.url, "fn": node.step.fn, "config": node.config, "dep_dirs": dep_dirs,
            "run_id": run_id, "reason": a.reason, "runtime": self.runtime, "provenance": provenance,
            "lineage": lineage, "heartbeat": self.ex.heartbeat,
            # A forced step retrains from nothing (its directory's name, the hash, is unchanged).
            "fresh": a.reason == "forced", "aside": aside_dir(self.store, self.ex.base, node.dir, run_id),
        }
        opts = _resources(node.step)
        problem = self._infeasible(opts)
        if problem:
            self.hb.remove(node.dir)
            final = write_final(self.store, node.dir, run_id, FAILED, error=problem) or {}
            self._done(node.name, FAILED, "ran", run_id=run_id, reason=a.reason, error=problem,
                       start=final.get("start"), end=final.get("end"))
            return
        ref = _remote().options(name=f"{self.ex.ladder}/{node.name}", **opts).remote(payload)
        self.owned[node.name] = _Owned(ref, run_id, a.reason, time.time())

    def _infeasible(self, opts: dict) -> str | None:
        """On a local Ray (no cluster address), a step asking for more than the machine has would wait
        forever: fail it with one line instead. On a cluster, an autoscaler may still bring the resources."""
        if self.ex.address or os.environ.get("RAY_ADDRESS"):
            return None
        import ray

        total = ray.cluster_resources()
        need = {"CPU": opts["num_cpus"], "GPU": opts["num_gpus"], **opts.get("resources", {})}
        short = [f"{v:g} {k}" for k, v in need.items() if v and total.get(k, 0.0) < v]
        if not short:
            return None
        have = ", ".join(f"{total.get(k, 0.0):g} {k}" for k, v in need.items() if v)
        return (f"resources: the step needs {', '.join(short)} but the local Ray cluster has {have}; "
                "lower the step's resources or join a cluster with --address / RAY_ADDRESS")

    def _collect(self, timeout: float) -> bool:
        import ray

        by_ref = {o.ref: name for name, o in self.owned.items()}
        refs = list(by_ref)
        ready, rest = ray.wait(refs, num_returns=1, timeout=timeout)
        if ready and rest:
            more, _ = ray.wait(rest, num_returns=len(rest), timeout=0)
            ready += more
        for ref in ready:
            name = by_ref[ref]
            self._finish(name, self.owned.pop(name))
        return bool(ready)

    def _finish(self, name: str, o: _Owned) -> None:
        import ray

        node = self.nodes[name]
        self.hb.remove(node.dir)  # no beat of this step is in flight after this returns
        error = None
        try:
            final = ray.get(o.ref)
        except Exception as e:  # the worker died and retries ran out, or the task was cancelled
            final, error = None, f"{type(e).__name__}: {str(e).strip().splitlines()[-1] if str(e).strip() else ''}"
        if isinstance(final, dict) and final.get("status") == "LOST":
            self.watching[name] = time.time()  # another driver took the step over; use its result
            return
        if not (isinstance(final, dict) and final.get("status") in TERMINAL):
            error = error or f"step task returned {final!r}"
            final = write_final(self.store, node.dir, o.run_id, FAILED, error=error)
            self._record_crash(node, o, error)
            if final is None:
                self.watching[name] = time.time()
                return
        else:
            # The task committed its status; rewrite it in case a heartbeat raced the commit.
            cur = self.store.read_json(self.store.join(node.dir, ".status"))
            if isinstance(cur, dict) and cur.get("run_id") == o.run_id and cur != final:
                self.store.write_json(self.store.join(node.dir, ".status"), final)
        self._done(name, final["status"], "ran", run_id=o.run_id, reason=o.reason, error=final.get("error"),
                   start=final.get("start"), end=final.get("end"))

    def _record_crash(self, node: Node, o: _Owned, error: str) -> None:
        path = step_json_path(self.store, node.dir)
        prov = self.store.read_json(path)
        if isinstance(prov, dict) and prov.get("run_id") == o.run_id:
            prov.update(status=FAILED, error=error, end=time.time())
            self.store.write_json(path, prov)
        self.store.write_atomic(self.store.join(node.dir, ERROR_FILE), error + "\n")

    def _poll_watching(self) -> bool:
        progressed = False
        for name in list(self.watching):
            node = self.nodes[name]
            st = read_state(self.store, node.dir)
            if st.live(self.ex.lease_timeout):
                continue
            del self.watching[name]
            progressed = True
            s = st.status or {}
            settled = st.state in TERMINAL and (
                st.lease is None or s.get("run_id") == st.lease.get("run_id")
                or float(s.get("end") or 0) >= float(st.lease.get("acquired") or 0))
            if settled:
                self._done(name, st.state, "waited", run_id=st.run_id, reason=s.get("reason") or "ran by another driver",
                           error=s.get("error"), start=s.get("start"), end=s.get("end"))
            else:
                self.pending.append(name)  # its owner died: assess again (it will be taken over)
        if progressed:
            self.pending.sort(key=self._priority)
        return progressed

    def _priority(self, name: str) -> tuple[float, int]:
        # Largest step first among those ready (longest-processing-time first): the small rungs then
        # fill the slots the large ones leave, and the rung phase ends sooner than in spec order.
        return (-float(self.nodes[name].step.flops or 0.0), self._order[name])

    def _abort(self) -> None:
        """The driver is stopping (Ctrl-C, SIGTERM, an error): ask our tasks to checkpoint and exit, wait up
        to ``stop_grace`` seconds for them, then cancel what is left; every step we hold is released."""
        if not self.owned:
            return
        import ray

        for name, o in self.owned.items():
            try:
                self.store.write_atomic(stop_path(self.store, self.nodes[name].dir, o.run_id), f"{time.time()}\n")
            except Exception as e:  # the storage is what failed: cancel at once below
                log.warning("could not ask %s to stop: %s", name, e)
        grace = self.ex.stop_grace
        if grace > 0:
            print(f"[ladder] stopping: asked {', '.join(self.owned)} to checkpoint and exit "
                  f"(waiting up to {grace:g}s; Ctrl-C again to stop at once)", flush=True)
        done: set = set()
        refs = [o.ref for o in self.owned.values()]
        deadline = time.time() + grace
        try:
            while len(done) < len(refs) and time.time() < deadline:
                ready, _ = ray.wait([r for r in refs if r not in done], num_returns=1,
                                    timeout=max(0.0, min(1.0, deadline - time.time())))
                done.update(ready)
        except KeyboardInterrupt:  # asked again: stop now
            pass
        for name, o in list(self.owned.items()):
            node = self.nodes[name]
            self.hb.remove(node.dir)
            if o.ref not in done:
                try:
                    ray.cancel(o.ref, force=True)
                except Exception as e:  # the worker may be gone already
                    log.warning("could not cancel %s: %s", name, e)
            # A task that saved and stopped wrote FAILED itself; one cancelled here gets it now.
            try:
                st = self.store.read_json(self.store.join(node.dir, ".status"))
                if not (isinstance(st, dict) and st.get("run_id") == o.run_id and st.get("status") in TERMINAL):
                    write_final(self.store, node.dir, o.run_id, FAILED, error="interrupted: the driver stopped")
            except Exception as e:
                log.warning("could not release %s: %s", name, e)

    def _render(self, force: bool = False) -> None:
        if self.view is None:
            return
        rows = [(n, o.status.lower(), self.nodes[n].dir, o.start) for n, o in self.outcomes.items()
                if o.action == "ran"]
        rows += [(n, "running", self.nodes[n].dir, o.start) for n, o in self.owned.items()]
        rows += [(n, "other driver", self.nodes[n].dir, t) for n, t in self.watching.items()]
        done = sum(1 for o in self.outcomes.values() if o.status == SUCCESS)
        summary = f"{done}/{len(self.nodes)} done"
        if self.summary.failed:
            summary += f", failed: {', '.join(self.summary.failed)}"
        if self.summary.blocked:
            summary += f", blocked: {', '.join(self.summary.blocked)}"
        self.view.update(rows, summary, force=force)


__all__ = ["Executor", "RunSummary", "StepOutcome", "expand_force", "dependents", "PlanEntry"]
