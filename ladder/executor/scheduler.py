"""One submit's scheduling loop: claim ready steps, start them as Ray tasks, collect their outcomes,
wait on steps other drivers hold, and stop cleanly (tasks asked to checkpoint, then cancelled).

The :class:`~ladder.executor.runner.Executor` builds the graph and hands it here; nothing here keeps
state that matters across drivers: every decision is re-read from the step directories.
"""

from __future__ import annotations

import logging
import os
import time
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any, Protocol

from .context import ERROR_FILE
from .fresh import aside_dir
from .hashing import canonical, hashed_config
from .lease import (
    BLOCKED,
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
    assess,
)
from .provenance import environment, read_index, step_json_path, write_index
from .stop import TerminateAsInterrupt, stop_owned
from .tasks import remote_fn, task_options, warm_ranks

log = logging.getLogger("ladder.executor")



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


@dataclass
class _Owned:
    ref: Any
    run_id: str
    reason: str
    start: float


class Driver(Protocol):
    """What a run needs of the Executor that starts it (runner.py), so this module imports nothing of it."""

    store: Any
    root: str
    ladder: str
    base: str
    address: str | None
    max_concurrent: int | None
    lease_timeout: float
    heartbeat: float
    poll: float
    show_progress: bool

    def start_ray(self) -> bool:
        """Check that Ray's workers can see the store, then start or join Ray; True when it started it."""
        ...


class Run:
    """One submit: the scheduling loop over ``nodes``, ``force`` already checked against them."""

    def __init__(self, ex: Driver, nodes: dict[str, Node], force: Iterable[str], runtime):
        self.ex = ex
        self.store = ex.store
        self.nodes = nodes
        self.force = set(force)
        self.runtime = canonical(dict(runtime or {}))
        self.summary = RunSummary()
        self.outcomes = self.summary.steps
        self._order = {name: i for i, name in enumerate(nodes)}
        self._warm_rank = warm_ranks(nodes)
        self.pending: list[str] = sorted(nodes, key=self._priority)
        self.owned: dict[str, _Owned] = {}
        self.watching: dict[str, float] = {}
        self.hb = Heartbeater(self.store, ex.heartbeat)
        self.env: dict | None = None
        self.view = None
        self.sigterm: TerminateAsInterrupt | None = None

    # -- helpers
    def _done(self, name: str, status: str, action: str, **kw) -> None:
        self.outcomes[name] = StepOutcome(name, status, self.nodes[name].url, action, **kw)

    def go(self) -> RunSummary:
        t0 = time.time()
        if self.ex.show_progress:
            from .console import ProgressView

            self.view = ProgressView(self.store, title=f"ladder {self.ex.ladder}")
        self.sigterm = TerminateAsInterrupt()
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
                self.summary.ray_started = self.ex.start_ray() or self.summary.ray_started
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
        opts = task_options(node.step)
        problem = self._infeasible(opts)
        if problem:
            self.hb.remove(node.dir)
            final = write_final(self.store, node.dir, run_id, FAILED, error=problem) or {}
            self._done(node.name, FAILED, "ran", run_id=run_id, reason=a.reason, error=problem,
                       start=final.get("start"), end=final.get("end"))
            return
        ref = remote_fn().options(name=f"{self.ex.ladder}/{node.name}", **opts).remote(payload)
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

    def _priority(self, name: str) -> tuple[int, float, int]:
        # Largest step first among those ready (longest-processing-time first): the small rungs then
        # fill the slots the large ones leave, and the rung phase ends sooner than in spec order. A
        # step whose warm_key an earlier step shares waits for the first of each key (see Step).
        return (self._warm_rank[name], -float(self.nodes[name].step.flops or 0.0), self._order[name])

    def _abort(self) -> None:
        """The driver is stopping (Ctrl-C, SIGTERM, an error): see :func:`stop.stop_owned`."""
        stop_owned(self)

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
