"""The driver: runs a ladder's steps as Ray tasks, resumably, with leases shared with other drivers.

The driver holds no state that matters: every decision is re-derived from the step directories, so it
may be killed at any moment and started again (or run twice at once). Ray starts only when some step
actually has to run on this submit.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from .console import read_progress
from .lease import (
    DEFAULT_HEARTBEAT,
    DEFAULT_LEASE_TIMEOUT,
    read_state,
)
from .plan import (
    Node,
    PlanEntry,
    build_graph,
    dependents,
    ladder_dir,
    make_plan,
    record_inputs,
    stale_steps,
)
from .scheduler import Run, RunSummary, StepOutcome
from .step import Step
from .stop import DEFAULT_STOP_GRACE
from .store import ConfigError, Store


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
        self.stop_grace = float(stop_grace) if stop_grace is not None else _env_float("LADDER_STOP_GRACE",
                                                                                       DEFAULT_STOP_GRACE)
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
                "note": result.get("note"),  # e.g. an imported run that stopped short of its steps
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
        return Run(self, nodes, force, runtime).go()

    def _check_force(self, nodes: Mapping[str, Node], force: Iterable[str]) -> set[str]:
        force = set(force)
        unknown = force - set(nodes)
        if unknown:
            raise ValueError(f"force: unknown step(s) {', '.join(sorted(map(repr, unknown)))}; "
                             f"steps are: {', '.join(nodes)}")
        return force

    def start_ray(self) -> bool:
        """What the scheduler calls before its first step: the store checked, then Ray started or joined."""
        self._check_shared_store()
        return self._ensure_ray()

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

        from .ray_start import start_ray

        if ray.is_initialized():
            return False
        start_ray(self.address or os.environ.get("RAY_ADDRESS") or None,
                  include_dashboard=os.environ.get("LADDER_RAY_DASHBOARD", "") not in ("", "0"),
                  log=lambda line: print(line, file=sys.stderr, flush=True))
        return True


def _env_float(name: str, default: float) -> float:
    from .lease import env_float

    return env_float(name, default)




__all__ = ["Executor", "RunSummary", "StepOutcome", "expand_force", "dependents", "PlanEntry"]
