"""What a ladder's root holds, read without running anything: each step's folder, whether anything
has run, folders left by other configurations, the summary of a run and the report."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

from ladder.dag.stages import plan_ladder
from ladder.dag.step_io import local_dirs
from ladder.outputs import layout
from ladder.spec import LadderSpec


def summary_lines(spec: LadderSpec, summary) -> list[str]:
    lines = []
    for name, outcome in summary.steps.items():
        error = getattr(outcome, "error", None)
        lines.append(f"{name:>10}  {outcome.status}" + (f"  {str(error).splitlines()[-1][:200]}" if error else ""))
    if summary.blocked:
        gate = step_dirs(spec).get("gate")
        verdict = read_json(spec.root, gate, layout.GATE) if gate else {}
        lines.append(f"blocked: {', '.join(summary.blocked)} (rerun with --force to start the hero anyway)")
        lines.extend(f"  - {reason}" for reason in (verdict or {}).get("reasons", []))
    lines.append("ladder complete" if summary.ok else "ladder incomplete: see the statuses above")
    return lines


def read_json(root: str, step_dir: str, name: str) -> dict:
    from ladder.executor.store import Store

    store = Store(root)
    return store.read_json(store.join(store.to_path(step_dir), name)) or {}


def step_dirs(spec: LadderSpec) -> dict[str, str]:
    """Each step's current output dir, from the plan (the hash the spec implies now)."""
    return {e.name: e.path for e in plan_ladder(spec)}


def _written(store, path: str) -> bool:
    """Whether a step folder holds a status or a result (a step that started, or was marked)."""
    return any(store.exists(store.join(path, f)) for f in (layout.STATUS, layout.RESULT))


def has_outputs(spec: LadderSpec) -> bool:
    """Whether any step of the ladder as configured (the report aside) has written its status or result."""
    from ladder.executor.store import Store

    store = Store(spec.root)
    return any(_written(store, store.to_path(d)) for name, d in step_dirs(spec).items() if name != "report")


def other_configurations(spec: LadderSpec) -> list[str]:
    """Folders of this ladder's steps (``<step>-<hash>``) under the root, with output, at hashes the spec
    does not imply: what a submit with another ``--set`` (a seed) left, which a read command without it
    would otherwise call "not run"."""
    from ladder.executor.store import Store

    store = Store(spec.root)
    current = {name: store.to_path(d) for name, d in step_dirs(spec).items()}
    mine = {os.path.basename(d.rstrip("/")) for d in current.values()}
    found = []
    for parent in sorted({os.path.dirname(d.rstrip("/")) for d in current.values()}):
        for base in sorted(store.listdir(parent)):
            step, _, digest = base.rpartition("-")
            if step in current and digest and base not in mine and _written(store, store.join(parent, base)):
                found.append(base)
    return found


def build_report(spec: LadderSpec) -> tuple[dict, str | None]:
    """The report from whatever the ladder has produced so far, written beside the report step's."""
    from ladder.report.build import write_report

    dirs = step_dirs(spec)
    dep_dirs = {k: v for k, v in dirs.items() if k != "report"}
    config = {"ladder": spec.name, "hero": spec.hero.name if spec.hero else None,
              "rungs": [r.name for r in spec.rungs], "level": spec.fit.level,
              "hero_changes": [dataclasses.asdict(c) for c in (spec.hero.changes if spec.hero else ())]}
    from ladder.analysis.tasks import task_settings

    tasks = task_settings(spec.fit)  # as the report step's config has them
    if tasks:
        config["tasks"] = tasks
    with local_dirs(dep_dirs, dirs["report"]) as (local_deps, out_dir):
        rep, html_path = write_report(config, local_deps, out_dir)
    if html_path and out_dir != dirs["report"]:  # the temp copy is gone: name the uploaded file
        html_path = f"{dirs['report'].rstrip('/')}/{Path(html_path).name}"
    return rep, html_path


def report_lines(rep: dict) -> list[str]:
    from ladder.report.build import report_lines as lines

    return lines(rep)
