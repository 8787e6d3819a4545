"""The steps a LadderSpec expands to, and the commands that plan, run and train them.

    rung_1 .. rung_k ──data──► fit ──data──► predict ──data──► gate ··order··► hero
          │                     │              │                 │               │
          └──────────data───────┴──────data────┴───────data──────┴──(optional)───► report

Data dependencies are part of a step's hash and refresh it when they rerun; the hero waits for
the gate (order only) and its hash covers the prediction it forecasts against (a hash dependency:
a changed fit or prediction config moves the hero to a new directory, a rerun at the same hash does
not), so `ladder rerun SPEC rung_2` refreshes fit, predict, gate and report without retraining
the hero. The report reads the hero if it exists (an optional dependency),
so a blocked hero still gets a report that says why.

The functions the steps run live in ladder.dag.step_fns (what a finished run's staleness is
judged by), and what reads a ladder's root in ladder.dag.queries.
"""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Sequence
from pathlib import Path

from ladder.dag import kinds
from ladder.dag.inputs import ANALYSIS_CODE, ANALYSIS_PACKAGES, REPORT_CODE, step_inputs
from ladder.dag.tokenize import shard_dirs, tokenize_steps
from ladder.dag.train_steps import run_data, train_config, training_step
from ladder.spec import LadderSpec, RungSpec, to_dict

FIT_FN = "ladder.dag.step_fns:fit_step"
PREDICT_FN = "ladder.dag.step_fns:predict_step"
GATE_FN = "ladder.dag.step_fns:gate_step"
REPORT_FN = "ladder.dag.step_fns:report_step"
IMPORT_FN = "ladder.dag.step_fns:import_step"
# How often `ladder train`'s driver of a gang reads its progress and passes a stop on (seconds).
GANG_POLL_S = 1.0


def build_steps(spec: LadderSpec) -> list:
    """The ladder's DAG as executor Steps (spec must be resolved)."""
    from ladder.dag import isoflop
    from ladder.executor import Dep, Step

    steps = isoflop.sweep_steps(spec)
    spec, reused = isoflop.place(spec, isoflop.read_doc(spec, tokenize_steps(spec) + steps)) if steps else (spec, {})
    steps = tokenize_steps(spec) + steps
    rung_names = [r.name for r in spec.rungs]
    imported = imported_results(spec)
    for rung in spec.rungs:
        if rung.name in imported:
            steps.append(_import_step(spec, rung, imported[rung.name]))
            continue
        if rung.budget > 0:
            steps.append(isoflop.rung_step(spec, rung, reused))
            continue
        steps.append(training_step(spec, rung, "rung"))
    rung_deps = tuple(Dep(n, kind="data", required=False) for n in rung_names)
    hero = to_dict(spec.hero) if spec.hero is not None else None
    analysis = step_inputs(ANALYSIS_PACKAGES)
    steps.append(Step(name="fit", kind=kinds.FIT, fn=FIT_FN, deps=rung_deps, code=ANALYSIS_CODE,
                      config={"fit": to_dict(spec.fit), "rungs": rung_names, "hero": hero, "inputs": analysis}))
    steps.append(Step(name="predict", kind=kinds.PREDICT, fn=PREDICT_FN, deps=(Dep("fit"),), code=ANALYSIS_CODE,
                      config={"fit": to_dict(spec.fit), "hero": hero, "targets": to_dict(spec.targets),
                              "inputs": analysis}))
    steps.append(Step(name="gate", kind=kinds.GATE, fn=GATE_FN,
                      deps=(Dep("fit", required=False), Dep("predict", required=False)) + rung_deps,
                      config={"gate": to_dict(spec.gate), "rungs": rung_names, "advisory": not spec.train_hero,
                              "inputs": analysis}, code=ANALYSIS_CODE))
    hero_step = spec.hero is not None and (spec.train_hero or spec.hero.name in imported)
    if spec.hero is not None and spec.hero.name in imported:
        steps.append(_import_step(spec, spec.hero, imported[spec.hero.name], deps=(Dep("gate", kind="order"),)))
    elif hero_step:
        hero_cfg = {**train_config(spec, spec.hero, "hero"), "forecast_every": spec.hero_forecast_every}
        steps.append(training_step(spec, spec.hero, "hero", config=hero_cfg, description=isoflop.describe(spec.hero),
                                   deps=(Dep("gate", kind="order"), Dep("predict", kind="hash"), Dep("fit", kind="order"))))
    report_deps = (Dep("fit", required=False), Dep("predict", required=False), Dep("gate", required=False)) + rung_deps
    if hero_step:
        report_deps += (Dep(spec.hero.name, kind="data", required=False),)
    if spec.isoflop is not None:
        report_deps += (Dep(isoflop.STEP, kind="data", required=False),)
    from ladder.analysis.tasks import task_settings

    tasks = task_settings(spec.fit)  # only when set: a ladder without task settings keeps its report's hash
    steps.append(Step(name="report", kind=kinds.REPORT, fn=REPORT_FN, deps=report_deps, code=REPORT_CODE,
                      config={"ladder": spec.name, "hero": spec.hero.name if spec.hero else None, "rungs": rung_names,
                              "level": spec.fit.level, **({"tasks": tasks} if tasks else {})}))
    return steps


def imported_results(spec: LadderSpec) -> dict[str, dict]:
    """Recorded results (`ladder import-results`) that stand in for training, by run name."""
    from ladder.imports import results as imported

    return imported.records(spec)


def _import_step(spec: LadderSpec, run: RungSpec, record: dict, deps=()):
    from ladder.executor import Step

    return Step(name=run.name, kind=kinds.IMPORT, fn=IMPORT_FN, deps=deps, config={"rung": to_dict(run), "imported": record},
                description=f"imported {'curve' if 'curve' in record else 'result'} for {run.name}")


def write_imported(spec: LadderSpec, frame) -> Path:
    from ladder.imports import results as imported

    return imported.write(spec, frame)


def _executor(spec: LadderSpec, **kwargs):
    from ladder.executor import Executor

    return Executor(spec.root, spec.name, **kwargs)


def plan_ladder(spec: LadderSpec, force: Sequence[str] = (), steps: list | None = None, rerun_stale: bool = False):
    """The plan of ``steps`` (default: the ladder's own DAG) under the spec's root and name."""
    from ladder.executor import expand_force

    steps = build_steps(spec) if steps is None else steps
    entries = _executor(spec).plan(steps, force=expand_force(steps, force) if force else (), rerun_stale=rerun_stale)
    from ladder.dag.isoflop import STEP, UNPLACED_NOTE

    notes = {s.name: UNPLACED_NOTE for s in steps if s.description.startswith(UNPLACED_NOTE)}
    if any(e.name == STEP and e.action == "run" for e in entries):  # a refit may move what it placed
        notes.update({s.name: "placed again once isoflop has rerun" for s in steps if s.description.startswith("isoflop:")})
    return [dataclasses.replace(e, reason=f"{e.reason}; {notes[e.name]}") if e.name in notes else e for e in entries]


def run_ladder(spec: LadderSpec, force: Sequence[str] = (), *, address: str | None = None,
               max_concurrent: int | None = None, runtime: dict | None = None, show_progress: bool = False,
               steps: list | None = None, rerun_stale: bool = False):
    from ladder.executor import expand_force
    from ladder.trainers.builtin.tokenizer import declared_vocab

    if declared_vocab(spec.data.tokenizer) is not None:  # refused before anything is written
        from ladder.dag import isoflop
        from ladder.dag.tokenize import refuse_declared_training

        first = steps if steps is not None else isoflop.sweep_steps(spec) if spec.isoflop else build_steps(spec)
        refuse_declared_training(spec, plan_ladder(spec, force, first), first)
    executor = _executor(spec, address=address, max_concurrent=max_concurrent, show_progress=show_progress)
    # Runtime options change how a step reports, not what it computes: they stay out of the hashes.
    runtime = {"ladder": spec.name, "wandb": to_dict(spec.wandb), **(runtime or {})}
    done: set[str] = set()
    if steps is None and spec.isoflop is not None:
        # The runs declared by budget are placed from the sweep's fit: run the sweep first, then build
        # the rest of the DAG from what it found (a rerun sweep run re-places what depends on it).
        from ladder.dag import isoflop

        sweep = tokenize_steps(spec) + isoflop.sweep_steps(spec)
        done = {s.name for s in sweep}
        first = executor.run(sweep, force=expand_force(sweep, [f for f in force if f in done]), runtime=runtime,
                             rerun_stale=rerun_stale)
        if isoflop.read_doc(spec, sweep) is None:
            return first
    steps = build_steps(spec) if steps is None else steps
    forced = expand_force(steps, force) - done if force else ()
    return executor.run(steps, force=forced, runtime=runtime, rerun_stale=rerun_stale)


def status_ladder(spec: LadderSpec) -> list[dict]:
    return _executor(spec).status(build_steps(spec))


# ------------------------------------------------------------------------------------------
# Commands outside the DAG.


def train_alone(spec: LadderSpec, rung_name: str, max_steps: int | None = None,
                progress: Callable[[dict], None] | None = None) -> dict:
    """Train one run outside the DAG (``ladder train``); ``progress(row)`` gets its progress rows (step,
    total_steps, loss, tokens_per_s, eta_s). A gang's driver (this process) asks its members to checkpoint
    on SIGTERM, as a one-process run checkpoints itself, then ends by the same signal."""
    from ladder.trainers.builtin import hostdevices
    from ladder.trainers.builtin.mirror import is_remote

    rung = placed(spec).rung(rung_name)
    if is_remote(spec.root):
        out_dir = f"{spec.root.rstrip('/')}/{spec.name}/train-{rung_name}"
    else:
        out_dir = str(Path(spec.root) / spec.name / f"train-{rung_name}")
    role = "hero" if spec.hero is not None and rung_name == spec.hero.name else "rung"
    if spec.trainer_of(rung).kind != "builtin":
        from ladder.dag.train_alone import train_foreign

        return train_foreign(spec, rung, role, out_dir, tokenized=lambda: tokenized(spec), max_steps=max_steps,
                             progress=progress)
    if rung.resources.processes > 1:
        from ladder.trainers.builtin.gang import Watch, connect, train_gang
        from ladder.trainers.builtin.sigterm import Sigterm

        shards = tokenized(spec) if spec.data.tokenizer != "bytes" else {}
        connect()  # before the handler: ray.init sets its own
        sigterm = Sigterm()
        sigterm.install()
        try:
            result = train_gang(rung, run_data(spec, role), out_dir, max_steps=max_steps, shard_dirs=shards,
                                watch=Watch(every=GANG_POLL_S, on_progress=progress, should_stop=lambda: sigterm.flag))
        finally:
            sigterm.uninstall()
        if sigterm.flag and result.get("status") == "INTERRUPTED":  # every member checkpointed: end as asked
            print(f"[ladder.train] {rung_name}: every process of its gang checkpointed at step {result.get('steps')} "
                  "on SIGTERM; the same command resumes", file=sys.stderr, flush=True)
            sigterm.restore_and_reraise()
        return result
    hostdevices.apply_here(rung.resources, rung.name)
    from ladder.trainers.builtin import compile_cache, train  # after apply_here: XLA reads its flags when JAX starts

    compile_cache.enable(out_dir)
    shards = tokenized(spec) if spec.data.tokenizer != "bytes" else {}
    return train(rung, run_data(spec, role), out_dir, max_steps=max_steps, shard_dirs=shards, progress=progress)


def placed(spec: LadderSpec) -> LadderSpec:
    """The spec with its runs declared by budget placed from the IsoFLOP sweep (pending until it has run)."""
    from ladder.dag import isoflop

    return isoflop.placed(spec)[0]


def tokenized(spec) -> dict[str, str]:
    """Each domain's token shards, tokenizing first what is not (the ladder's tokenizer and tokenize steps,
    through the executor, so a run alone shares them with the ladder's rungs)."""
    from ladder.trainers.builtin.data import DataError

    steps = tokenize_steps(spec)
    summary = run_ladder(spec, steps=steps)
    if not summary.ok:
        failed = [f"{name} {o.status}" for name, o in summary.steps.items() if o.status != "SUCCESS"]
        raise DataError(f"tokenize: {', '.join(failed)}; see `ladder status` and the step's error.txt")
    return shard_dirs({e.name: e.path for e in plan_ladder(spec, steps=steps)})
