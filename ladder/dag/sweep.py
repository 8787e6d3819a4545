"""`ladder sweep`: fit the recipe's learning-rate rule on its own rungs, as a resumable DAG.

A rule that is right at the largest rung and wrong at the smallest makes the small rungs worse than
they should be, steepens the fitted law and makes it under-predict the hero (the default ladder's
rungs sat 2-4% above their optimum at the small end). So the rule is measured, not assumed: each
named rung is trained at several multiples of its own learning rate (and optionally at other
batch sizes), then one step collects the runs into sweep.csv and fits lr_opt = coef * C^exponent
(fits.hparams) into rule.json. Runs live under ``<root>/<ladder>-sweep/``, content-addressed like
the ladder's own, so a sweep resumes where it stopped and never touches the ladder's steps.

    rung_1-lr0.5 .. rung_5-lr2 ──data──► sweep (sweep.csv, rule.json)
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

from ladder.dag import kinds
from ladder.dag.isoflop_place import PENDING
from ladder.outputs import layout
from ladder.spec import LadderSpec, RungSpec, SpecError

COLLECT_FN = "ladder.dag.sweep:collect_step"
SWEEP_CSV = "sweep.csv"
RULE_JSON = "rule.json"


def sweep_runs(spec: LadderSpec, rung_names: Sequence[str], lr_mults: Sequence[float],
               batches: Sequence[int] = ()) -> list[tuple[RungSpec, dict]]:
    """Each (variant, what it varies) for the named rungs of a resolved spec."""
    known = [r.name for r in spec.rungs]
    problems = [f"--rungs: no rung named {n!r} (rungs: {', '.join(known)})" for n in rung_names if n not in known]
    problems += [f"--lr: multiple {m:g} must be positive" for m in lr_mults if m <= 0]
    problems += [f"--batch: {b} must be a positive number of sequences" for b in batches if b <= 0]
    problems += [f"--rungs: {n} is declared by budget and the IsoFLOP stage has not placed it yet; run "
                 "`ladder submit` first (its IsoFLOP sweep places it) or sweep a rung of fixed size"
                 for n in rung_names if n in known and spec.rung(n).placement == PENDING]
    if problems:
        raise SpecError(problems)
    out = []
    for name in rung_names:
        rung = spec.rung(name)
        for batch in batches or (rung.batch_size,):
            for mult in lr_mults:
                suffix = f"-lr{mult:g}" + (f"-b{batch}" if batches else "")
                variant = dataclasses.replace(
                    rung, name=rung.name + suffix, batch_size=batch,
                    optim=dataclasses.replace(rung.optim, lr=rung.optim.lr * mult),
                    # Cooldown branches only serve the ladder's two-dimensional fit.
                    schedule=dataclasses.replace(rung.schedule, branch_fracs=()))
                out.append((variant, {"rung": rung.name, "lr_mult": mult, "batch_size": batch,
                                      "batch_setting": str(batch) if batches else "own"}))
    return out


def sweep_spec(spec: LadderSpec) -> LadderSpec:
    """The spec whose name places the sweep's steps beside, not among, the ladder's."""
    return dataclasses.replace(spec, name=f"{spec.name}-sweep")


def build_sweep_steps(spec: LadderSpec, runs: list[tuple[RungSpec, dict]]) -> list:
    from ladder.dag.tokenize import tokenize_steps
    from ladder.dag.train_steps import training_step
    from ladder.executor import Dep, Step

    # code=(): a sweep run is stale after a change to any file, as it always was
    steps = tokenize_steps(spec) + [
        training_step(spec, run, "sweep", code=(), description=f"{meta['rung']} at {meta['lr_mult']:g}x its learning rate")
        for run, meta in runs]
    meta = {run.name: meta for run, meta in runs}
    steps.append(Step(name="sweep", kind=kinds.LR_SWEEP, fn=COLLECT_FN, deps=tuple(Dep(r.name, kind="data") for r, _ in runs),
                      config={"runs": meta}))
    return steps


def run_sweep(spec: LadderSpec, runs, *, address: str | None = None, max_concurrent: int | None = None,
              show_progress: bool = False):
    from ladder.dag.stages import run_ladder

    target = sweep_spec(spec)
    return run_ladder(target, steps=build_sweep_steps(target, runs), address=address, max_concurrent=max_concurrent,
                      show_progress=show_progress)


def plan_sweep(spec: LadderSpec, runs) -> list:
    from ladder.dag.stages import plan_ladder

    target = sweep_spec(spec)
    return plan_ladder(target, steps=build_sweep_steps(target, runs))


def sweep_result(spec: LadderSpec, runs) -> tuple[str, dict]:
    """The collect step's folder and its rule.json (empty until the sweep has run)."""
    from ladder.dag.queries import read_json as _read_json

    out = next(e.path for e in plan_sweep(spec, runs) if e.name == "sweep")
    return out, _read_json(spec.root, out, RULE_JSON)


def collect_step(config: dict, ctx) -> dict:
    """sweep.csv (one row per run) and rule.json (the LR rule, where the sweep supports one)."""
    import pandas as pd

    from fits.hparams import fit_rule
    from fits.io import InputError
    from ladder.dag.step_io import local_dirs

    with local_dirs(ctx.dep_dirs, ctx.out_dir) as (dep_dirs, out_dir):
        rows = []
        for name, meta in config["runs"].items():
            result = layout.read_json(f"{dep_dirs[name]}/result.json")
            rows.append({"run": name, **meta, "lr": result["lr"], "flops": result["flops"],
                         "tokens": result["tokens"], "steps": result["steps"], "seed": result["seed"],
                         "final_eval_loss": result["final_eval_loss"]})
        table = pd.DataFrame(rows)
        layout.write_csv_atomic(f"{out_dir}/{SWEEP_CSV}", table)
        # One rule per batch setting (each rung's own, or one --batch value): the LR optimum moves with it.
        rules = []
        for setting, group in table.groupby("batch_setting"):
            entry = {"batch": setting}
            try:
                entry.update(fit_rule(group["flops"], group["lr"], group["final_eval_loss"]).to_dict())
            except InputError as exc:  # too few values or budgets: the sweep says so instead of failing
                entry["error"] = str(exc)
            rules.append(entry)
        layout.write_json_atomic(f"{out_dir}/{RULE_JSON}", {"x": "lr", "budget": "flops", "rules": rules})
    return {"runs": len(rows), "rules": rules}
