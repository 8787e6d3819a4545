"""The DAG of steps, their hashes and directories, and what a submit would do to each (the dry run)."""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import asdict, dataclass, field

from .hashing import (
    HASH_LEN,
    INPUTS_KEY,
    canonical,
    config_diff,
    format_diff,
    hashed_config,
    legacy_hash,
    step_hash,
)
from .lease import BLOCKED, DEP_FAILED, FAILED, RUNNING, SUCCESS, DirState, read_state
from .provenance import read_git, read_index
from .stale import stale_reason
from .step import Step, step_kind
from .store import Store

RUN, SKIP, WAIT, BLOCK = "run", "skip", "wait", "blocked"


@dataclass
class Node:
    step: Step
    hash: str  # full sha256 hex
    dir: str  # store path
    url: str  # what users and step functions see
    fn: str
    config: dict  # canonical, cosmetic keys kept (what the step function receives)
    dep_hashes: dict[str, str]  # data and hash deps
    adopted: bool = False  # the directory an earlier release named (its legacy hash): see build_graph

    @property
    def name(self) -> str:
        return self.step.name

    @property
    def short(self) -> str:
        return self.hash[:HASH_LEN]


def ladder_dir(store: Store, ladder: str) -> str:
    return store.join(store.root, ladder)


def build_graph(store: Store, ladder: str, steps: Sequence[Step]) -> dict[str, Node]:
    """Nodes in topological order (dependencies first); ValueError naming the problem otherwise."""
    by_name: dict[str, Step] = {}
    for s in steps:
        if not isinstance(s, Step):
            raise ValueError(f"steps: expected Step objects, got {type(s).__name__}")
        if s.name in by_name:
            raise ValueError(f"steps: duplicate step name {s.name!r}")
        by_name[s.name] = s
    for s in steps:
        for d in s.deps:
            if d.step not in by_name:
                raise ValueError(f"steps[{s.name}].deps: unknown step {d.step!r}")
            if d.step == s.name:
                raise ValueError(f"steps[{s.name}].deps: a step cannot depend on itself")
    order: list[str] = []
    mark: dict[str, int] = {}

    def visit(name: str, path: tuple[str, ...]) -> None:
        if mark.get(name) == 2:
            return
        if mark.get(name) == 1:
            cycle = " -> ".join(path[path.index(name):] + (name,))
            raise ValueError(f"steps: dependency cycle {cycle}")
        mark[name] = 1
        for d in by_name[name].deps:
            visit(d.step, path + (name,))
        mark[name] = 2
        order.append(name)

    for s in steps:
        visit(s.name, ())
    base = ladder_dir(store, ladder)
    nodes: dict[str, Node] = {}
    new: dict[str, str] = {}
    old: dict[str, str] = {}
    for name in order:
        s = by_name[name]
        config = canonical(dict(s.config))
        fn = step_kind(s)
        new[name] = step_hash(fn, config, {d.step: new[d.step] for d in s.hashed_deps})
        # An earlier release hashed data deps only (the hero's hash dep on predict came with inputs).
        old[name] = legacy_hash(fn, config, {d.step: old[d.step] for d in s.data_deps})
        keeps = all(old[d.step] == new[d.step] or nodes[d.step].adopted for d in s.hashed_deps)
        adopted = keeps and old[name] != new[name] and _adopt(store, base, name, new[name], old[name], config)
        h = old[name] if adopted else new[name]
        deps = {d.step: nodes[d.step].hash for d in s.hashed_deps}
        d = store.join(base, f"{name}-{h[:HASH_LEN]}")
        nodes[name] = Node(s, h, d, store.url(d), fn, config, deps, adopted)
    return nodes


INPUTS_FILE = "inputs.json"


def _adopt(store: Store, base: str, name: str, new: str, old: str, config: dict) -> bool:
    """Keep the directory an earlier release named (hashed without ``inputs``) while nothing the step
    depends on changed: the new-style directory has not been started, the old one has, and the inputs
    it recorded (inputs.json, written when it is first kept) are the ones the step has now. A run from
    before inputs were recorded is taken to have had today's inputs (it cannot be checked; from its
    first submit on, it is)."""
    if store.exists(store.join(base, f"{name}-{new[:HASH_LEN]}", ".status")):
        return False
    d = store.join(base, f"{name}-{old[:HASH_LEN]}")
    if not store.exists(store.join(d, ".status")):
        return False
    recorded = store.read_json(store.join(d, INPUTS_FILE))
    return recorded is None or recorded == config.get(INPUTS_KEY)


def record_inputs(store: Store, nodes: Mapping[str, Node]) -> None:
    """Write inputs.json into each kept directory that has none: from now on a change is seen."""
    for node in nodes.values():
        path = store.join(node.dir, INPUTS_FILE)
        if node.adopted and INPUTS_KEY in node.config and store.read_json(path) is None:
            store.write_json(path, node.config[INPUTS_KEY])


def dependents(nodes: Mapping[str, Node], names: Iterable[str], kinds: tuple[str, ...] = ("data",)) -> set[str]:
    """``names`` plus every step that (transitively) depends on them through deps of ``kinds``."""
    out = set(names)
    for name, node in nodes.items():  # topological order: one pass suffices
        if any(d.step in out and d.kind in kinds for d in node.step.deps):
            out.add(name)
    return out


@dataclass
class Assessment:
    action: str
    reason: str
    state: DirState
    diff: dict = field(default_factory=dict)


def _ago(t: float, now: float) -> str:
    return f"{max(0.0, now - t):.0f}s ago"


def _first_line(text: str | None) -> str:
    return (text or "").strip().splitlines()[0][:200] if (text or "").strip() else "no error recorded"


def assess(store: Store, base: str, node: Node, *, forced: bool, dep_run_ids: Mapping[str, str | None],
           changing: Iterable[str] = (), blocked_deps: Iterable[str] = (), lease_timeout: float,
           state: DirState | None = None) -> Assessment:
    """What to do with one step whose deps are settled (or planned): run, skip, wait or blocked."""
    now = time.time()
    st = read_state(store, node.dir) if state is None else state
    if st.live(lease_timeout, now):
        return Assessment(WAIT, f"running elsewhere (owner {st.holder()}, heartbeat {_ago(st.last_beat(), now)})", st)
    if forced:
        return Assessment(RUN, "forced", st)
    if st.corrupt:
        return Assessment(RUN, f"{st.corrupt}; running it again", st)
    status = st.state
    if status == SUCCESS:
        changing = [d for d in changing]
        if changing:
            return Assessment(RUN, "dependency refreshed: " + ", ".join(changing), st)
        lineage = st.status.get("lineage")
        if isinstance(lineage, dict):
            stale = [d for d, rid in dep_run_ids.items() if lineage.get(d) != rid]
            if stale:
                return Assessment(RUN, "dependency refreshed: " + ", ".join(stale), st)
        return Assessment(SKIP, f"done (run {st.run_id})", st)
    blocked_deps = list(blocked_deps)
    if blocked_deps:
        return Assessment(BLOCK, "waits on blocked " + ", ".join(blocked_deps), st)
    if status == BLOCKED and st.run_id is not None:
        return Assessment(BLOCK, f"blocked before: {_first_line(st.status.get('error'))} (re-checked on submit)", st)
    if status in (BLOCKED, DEP_FAILED):  # never started: a dependency failed or was blocked
        return Assessment(RUN, f"not run before ({_first_line(st.status.get('error'))})", st)
    if status == FAILED:
        return Assessment(RUN, f"failed before: {_first_line(st.status.get('error'))}", st)
    if status == RUNNING or st.gen:
        return Assessment(RUN, f"lease expired (owner {st.holder()}, last heartbeat {_ago(st.last_beat(), now)})", st)
    prev = read_index(store, base, node.name)
    if prev and prev.get("hash") != node.hash:
        diff = config_diff(prev.get("config"), hashed_config(node.config))
        parts = []
        if diff:
            parts.append(f"config changed: {format_diff(diff)}")
        changed = sorted(k for k in set(node.dep_hashes) | set(prev.get("deps") or {})
                         if (prev.get("deps") or {}).get(k) != node.dep_hashes.get(k))
        if changed:
            parts.append("dependency changed: " + ", ".join(changed))
        if prev.get("fn") not in (None, node.fn):
            parts.append(f"function changed: {prev.get('fn')} -> {node.fn}")
        return Assessment(RUN, "; ".join(parts) or "config changed", st, diff)
    return Assessment(RUN, "new", st)


@dataclass
class PlanEntry:
    name: str
    hash: str
    path: str
    action: str  # run | skip | wait | blocked
    reason: str
    flops: float
    deps: list[str]
    status: str | None = None  # what .status says now (None: never ran)
    diff: dict = field(default_factory=dict)
    description: str = ""
    stale: str | None = None  # a finished run the code has changed under (see stale.py)

    def to_dict(self) -> dict:
        return asdict(self)


def stale_steps(store: Store, nodes: Mapping[str, Node], code_dir: str | None = None) -> dict[str, str]:
    """name -> why, for each finished step whose code (in the checkout ``code_dir``, default this
    package's) changed since it ran."""
    out: dict[str, str] = {}
    now, diffs = read_git(code_dir), {}
    if now is None:
        return out
    for name, node in nodes.items():
        if read_state(store, node.dir).state != SUCCESS:
            continue
        why = stale_reason(store, node.dir, node.step.code, code_dir, now, diffs)
        if why:
            out[name] = why
    return out


def make_plan(store: Store, ladder: str, nodes: Mapping[str, Node], force: Iterable[str],
              lease_timeout: float, stale: Mapping[str, str] | None = None) -> list[PlanEntry]:
    force = set(force)
    stale = dict(stale or {})
    base = ladder_dir(store, ladder)
    done: dict[str, Assessment] = {}
    entries = []
    for name, node in nodes.items():
        deps = node.step.deps
        # Data deps that will get a new run id on this submit (a blocked gate is re-checked, so it does).
        changing = [d.step for d in deps if d.kind == "data" and (
            done[d.step].action in (RUN, WAIT)
            or (done[d.step].action == BLOCK and done[d.step].state.state == BLOCKED and done[d.step].state.run_id))]
        blocked = [d.step for d in deps if d.required and done[d.step].action == BLOCK]
        dep_run_ids = {d.step: done[d.step].state.run_id for d in deps if d.kind == "data"}
        a = assess(store, base, node, forced=name in force, dep_run_ids=dep_run_ids, changing=changing,
                   blocked_deps=blocked, lease_timeout=lease_timeout)
        done[name] = a
        reason = a.reason + (f"; stale: {stale[name]}" if name in stale and a.action == SKIP else "")
        entries.append(PlanEntry(name, node.short, node.url, a.action, reason, float(node.step.flops),
                                 [d.step for d in deps], a.state.state, a.diff, node.step.description,
                                 stale.get(name)))
    return entries
