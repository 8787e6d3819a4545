"""The steps a LadderSpec expands to, and the functions they run.

    rung_1 .. rung_k ──data──► fit ──data──► predict ──data──► gate ··order··► hero
          │                     │              │                 │               │
          └──────────data───────┴──────data────┴───────data──────┴──(optional)───► report

Data dependencies are part of a step's hash and refresh it when they rerun; the hero waits for
the gate (order only) and its hash covers the prediction it forecasts against (a hash dependency:
a changed fit or prediction config moves the hero to a new directory, a rerun at the same hash does
not), so `ladder rerun SPEC rung_2` refreshes fit, predict, gate and report without retraining
the hero. The report reads the hero if it exists (an optional dependency),
so a blocked hero still gets a report that says why.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from pathlib import Path

from ladder.dag import kinds
from ladder.dag.inputs import ANALYSIS_CODE, ANALYSIS_PACKAGES, REPORT_CODE, step_inputs
from ladder.dag.step_io import local_dirs
from ladder.dag.tokenize import PREFIX as TOKENIZE_PREFIX
from ladder.dag.tokenize import shard_dirs, tokenize_steps
from ladder.dag.train_steps import run_data, train_config, training_step
from ladder.outputs import layout
from ladder.spec import LadderSpec, RungSpec, data_from_dict, rung_from_dict, to_dict

FIT_FN = "ladder.dag.stages:fit_step"
PREDICT_FN = "ladder.dag.stages:predict_step"
GATE_FN = "ladder.dag.stages:gate_step"
REPORT_FN = "ladder.dag.stages:report_step"
IMPORT_FN = "ladder.dag.stages:import_step"


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
    steps.append(Step(name="report", kind=kinds.REPORT, fn=REPORT_FN, deps=report_deps, code=REPORT_CODE,
                      config={"ladder": spec.name, "hero": spec.hero.name if spec.hero else None, "rungs": rung_names,
                              "level": spec.fit.level}))
    return steps


def imported_results(spec: LadderSpec) -> dict[str, dict]:
    """Recorded results (`ladder import-results`) that stand in for training, by run name."""
    from ladder.imports import results as imported

    return imported.records(spec)


def _import_step(spec: LadderSpec, run: RungSpec, record: dict, deps=()):
    from ladder.executor import Step

    return Step(name=run.name, kind=kinds.IMPORT, fn=IMPORT_FN, deps=deps, config={"rung": to_dict(run), "imported": record},
                description=f"imported {'curve' if 'curve' in record else 'result'} for {run.name}")


def import_step(config: dict, ctx) -> dict:
    """A run trained elsewhere: its recorded final loss or eval curve in the shape of a training result."""
    from ladder.imports import results as imported

    return imported.import_step(config, ctx)


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


def summary_lines(spec: LadderSpec, summary) -> list[str]:
    lines = []
    for name, outcome in summary.steps.items():
        error = getattr(outcome, "error", None)
        lines.append(f"{name:>10}  {outcome.status}" + (f"  {str(error).splitlines()[-1][:200]}" if error else ""))
    if summary.blocked:
        gate = step_dirs(spec).get("gate")
        verdict = _read_json(spec.root, gate, layout.GATE) if gate else {}
        lines.append(f"blocked: {', '.join(summary.blocked)} (rerun with --force to start the hero anyway)")
        lines.extend(f"  - {reason}" for reason in (verdict or {}).get("reasons", []))
    lines.append("ladder complete" if summary.ok else "ladder incomplete: see the statuses above")
    return lines


def _read_json(root: str, step_dir: str, name: str) -> dict:
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


# ------------------------------------------------------------------------------------------
# Step functions (run inside Ray tasks; config is the step's JSON config).


def train_step(config: dict, ctx) -> dict:
    import jax

    from ladder.train.cores import pinned

    rung = rung_from_dict(config["rung"])
    if rung.resources.processes > 1:
        return _gang_step(rung, config, ctx)
    # XLA's CPU client starts seeing every core of the machine, pinned or not: the cores it sees when
    # it starts change its numbers (d24 and d48 rungs moved when pinned first), the pin afterwards does not.
    jax.devices()
    with pinned(rung.resources.cpus):
        return _train_step(rung, config, ctx)


def _train_step(rung: RungSpec, config: dict, ctx) -> dict:
    from ladder.train import compile_cache, train
    from ladder.train.mirror import open_output

    compile_cache.enable(ctx.out_dir)
    data = data_from_dict(config["data"])
    # The trainer mirrors a remote out_dir through a local folder; callbacks that write beside it
    # (the hero's forecasts) write into that folder and are uploaded with the metrics.
    # Token shards are mapped where they are (a remote one is cached once per node), never copied whole.
    shards = shard_dirs(ctx.dep_dirs)
    others = {k: v for k, v in ctx.dep_dirs.items() if not k.startswith(TOKENIZE_PREFIX)}
    with open_output(ctx.out_dir) as out, local_dirs(others, ctx.out_dir) as (dep_dirs, _):
        callbacks = []
        if config.get("role") == "hero":
            from ladder.analysis.forecast import ForecastCallback

            _one_prior(out.local, dep_dirs.get("predict"))
            callbacks.append(ForecastCallback(rung=rung, out_dir=str(out.local), dep_dirs=dep_dirs,
                                              every=config.get("forecast_every", 0)))
        callbacks.extend(_wandb_callbacks(config, ctx))
        result = train(rung, data, out, callbacks=callbacks, progress=lambda row: ctx.progress(**row),
                       should_stop=lambda: ctx.stop_requested, shard_dirs=shards)
    if result.get("status") == "INTERRUPTED":
        from ladder.executor import Interrupted

        raise Interrupted(f"{rung.name} checkpointed at step {result.get('steps')}")
    if result.get("status") != "SUCCESS":
        raise RuntimeError(f"{rung.name} {result.get('status', 'FAILED')}: {result.get('message', 'see result.json')}")
    return result


def _gang_step(rung: RungSpec, config: dict, ctx) -> dict:
    """A run over several JAX processes: one step, one result, its gang on Ray (ladder.train.gang)."""
    from ladder.train.gang import train_gang

    result = train_gang(rung, data_from_dict(config["data"]), ctx.out_dir)
    if result.get("status") != "SUCCESS":
        raise RuntimeError(f"{rung.name} {result.get('status', 'FAILED')}: {result.get('message', 'see result.json')}")
    return result


PRIOR = "forecast_prior.json"


def _one_prior(out: Path, predict_dir: str | None) -> None:
    """One forecasts file per prediction: when the hero resumes against a prediction other than the one
    its forecasts were made against (predict ran again at the same hash), the old snapshots move to
    forecasts-<digest>.jsonl / forecasts-<digest>/ and the file starts over."""
    import hashlib
    import json

    curve = Path(predict_dir) / layout.HERO_CURVE if predict_dir else None
    digest = hashlib.sha256(curve.read_bytes()).hexdigest() if curve is not None and curve.exists() else None
    prior = out / PRIOR
    old = json.loads(prior.read_text()).get("sha256") if prior.exists() else None
    if old is not None and old != digest:
        for name in (layout.FORECASTS, layout.FORECAST_DIR):
            if (out / name).exists():
                stem, dot, ext = name.partition(".")
                (out / name).rename(out / f"{stem}-{old[:12]}{dot}{ext}")
    layout.write_json_atomic(prior, {"sha256": digest, "hero_curve": str(curve) if curve else None})


def _wandb_callbacks(config: dict, ctx) -> list:
    try:
        from ladder.wandb.log import training_callbacks
    except ModuleNotFoundError:
        return []
    return list(training_callbacks(config, ctx))


def _log_ladder_run(ctx) -> None:
    """Mirror the ladder-level tables (fit, prediction, report) to W&B; our files stay the source of truth."""
    try:
        from ladder.wandb.log import log_ladder_step
    except ModuleNotFoundError:
        return
    runtime = ctx.runtime or {}
    log_ladder_step({"wandb": runtime.get("wandb") or {}, "ladder": runtime.get("ladder")}, ctx)


def fit_step(config: dict, ctx) -> dict:
    from ladder.analysis import fit_ladder

    with local_dirs(ctx.dep_dirs, ctx.out_dir) as (dep_dirs, out_dir):
        result = fit_ladder(config, dep_dirs, out_dir)
    _log_ladder_run(ctx)
    return result


def predict_step(config: dict, ctx) -> dict:
    from ladder.analysis import predict_ladder

    with local_dirs(ctx.dep_dirs, ctx.out_dir) as (dep_dirs, out_dir):
        result = predict_ladder(config, dep_dirs["fit"], out_dir)
    _log_ladder_run(ctx)
    return result


def gate_step(config: dict, ctx) -> dict:
    from ladder.analysis import gate_ladder

    with local_dirs(ctx.dep_dirs, ctx.out_dir) as (dep_dirs, out_dir):
        return gate_ladder(config, dep_dirs, out_dir, force=bool((ctx.runtime or {}).get("force_gate")))


def report_step(config: dict, ctx) -> dict:
    from ladder.report.build import write_report

    with local_dirs(ctx.dep_dirs, ctx.out_dir) as (dep_dirs, out_dir):
        report, _ = write_report(config, dep_dirs, out_dir)
    _log_ladder_run(ctx)
    return {"hero": report.get("hero"), "backtest": report.get("backtest")}


# ------------------------------------------------------------------------------------------
# Commands outside the DAG.


def train_alone(spec: LadderSpec, rung_name: str, max_steps: int | None = None) -> dict:
    from ladder.train import hostdevices
    from ladder.train.mirror import is_remote

    rung = placed(spec).rung(rung_name)
    if is_remote(spec.root):
        out_dir = f"{spec.root.rstrip('/')}/{spec.name}/train-{rung_name}"
    else:
        out_dir = str(Path(spec.root) / spec.name / f"train-{rung_name}")
    role = "hero" if spec.hero is not None and rung_name == spec.hero.name else "rung"
    if rung.resources.processes > 1:
        from ladder.train.gang import train_gang

        return train_gang(rung, run_data(spec, role), out_dir, max_steps=max_steps)
    hostdevices.apply_here(rung.resources, rung.name)
    from ladder.train import compile_cache, train  # after apply_here: XLA reads its flags when JAX starts

    compile_cache.enable(out_dir)
    role = "hero" if spec.hero is not None and rung_name == spec.hero.name else "rung"

    shards = tokenized(spec) if spec.data.tokenizer != "bytes" else {}
    return train(rung, run_data(spec, role), out_dir, max_steps=max_steps, shard_dirs=shards)


def build_report(spec: LadderSpec) -> tuple[dict, str | None]:
    """The report from whatever the ladder has produced so far, written beside the report step's."""
    from ladder.report.build import write_report

    dirs = step_dirs(spec)
    dep_dirs = {k: v for k, v in dirs.items() if k != "report"}
    config = {"ladder": spec.name, "hero": spec.hero.name if spec.hero else None,
              "rungs": [r.name for r in spec.rungs], "level": spec.fit.level,
              "hero_changes": [dataclasses.asdict(c) for c in (spec.hero.changes if spec.hero else ())]}
    with local_dirs(dep_dirs, dirs["report"]) as (local_deps, out_dir):
        rep, html_path = write_report(config, local_deps, out_dir)
    if html_path and out_dir != dirs["report"]:  # the temp copy is gone: name the uploaded file
        html_path = f"{dirs['report'].rstrip('/')}/{Path(html_path).name}"
    return rep, html_path


def report_lines(rep: dict) -> list[str]:
    from ladder.report.build import report_lines as lines

    return lines(rep)


def placed(spec: LadderSpec) -> LadderSpec:
    """The spec with its runs declared by budget placed from the IsoFLOP sweep (pending until it has run)."""
    from ladder.dag import isoflop

    return isoflop.placed(spec)[0]


def tokenized(spec) -> dict[str, str]:
    """Each domain's token shards, tokenizing first what is not (the ladder's tokenizer and tokenize steps,
    through the executor, so a run alone shares them with the ladder's rungs)."""
    from ladder.train.data import DataError

    steps = tokenize_steps(spec)
    summary = run_ladder(spec, steps=steps)
    if not summary.ok:
        failed = [f"{name} {o.status}" for name, o in summary.steps.items() if o.status != "SUCCESS"]
        raise DataError(f"tokenize: {', '.join(failed)}; see `ladder status` and the step's error.txt")
    return shard_dirs({e.name: e.path for e in plan_ladder(spec, steps=steps)})
