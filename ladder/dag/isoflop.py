"""The IsoFLOP stage of a ladder's DAG (Chinchilla's approach 2, as Marin's ladders start).

    iso1-d16 .. iso3-d40 ──data──► isoflop (isoflop.json, isoflop.csv) ··order··► rungs by budget ─► fit ...
                   └────────data──────► rung_k (a budget's best sweep run, reused: copied, not retrained)

The sweep's runs are training steps like rungs (content-addressed, trained in parallel). The isoflop
step fits each budget's parabola in log N, then N_opt(C) and D_opt(C) as power laws with bootstrap
intervals (fits.isoflop), and names each budget's best run. The ladder's runs declared by budget
are placed from isoflop.json when the driver builds the rest of the DAG (ladder.dag.isoflop_place), so
their placed configs are what is hashed; stages.run_ladder runs the sweep first, then the rest.
"""

from __future__ import annotations

import math

from ladder.dag import kinds
from ladder.dag.isoflop_place import PENDING, place, sweep_runs
from ladder.outputs import layout
from ladder.spec import LadderSpec, to_dict

ISOFLOP_FN = "ladder.dag.isoflop:isoflop_step"
REUSE_FN = "ladder.dag.isoflop:reuse_step"
STEP = "isoflop"
# What a reused rung copies from its sweep run: everything the analysis reads (never checkpoints).
COPIED = (layout.METRICS, layout.EVAL, layout.EVENTS, "branches.jsonl")
# What `ladder plan` says of a run declared by budget while it is still PENDING (not yet placed).
UNPLACED_NOTE = "size from isoflop"


def sweep_steps(spec: LadderSpec) -> list:
    """The sweep's training steps and the isoflop fit step (empty without an isoflop stage)."""
    from ladder.dag.inputs import ANALYSIS_CODE, ANALYSIS_PACKAGES, step_inputs
    from ladder.dag.train_steps import training_step
    from ladder.executor import Dep, Step

    runs = sweep_runs(spec)
    if not runs:
        return []
    steps = [training_step(spec, run, "isoflop") for run, _ in runs]
    iso = spec.isoflop
    config = {"runs": {run.name: meta for run, meta in runs}, "bootstrap": iso.bootstrap, "min_runs": iso.min_runs,
              "level": spec.fit.level, "seed": spec.seed, "inputs": step_inputs(ANALYSIS_PACKAGES)}
    steps.append(Step(name=STEP, kind=kinds.ISOFLOP, fn=ISOFLOP_FN, deps=tuple(Dep(r.name, kind="data", required=False) for r, _ in runs),
                      config=config, code=ANALYSIS_CODE + ("ladder/dag/isoflop",),
                      description=f"isoflop fit of {len(runs)} runs at {len(iso.budgets)} budgets"))
    return steps


def read_doc(spec: LadderSpec, steps: list | None = None) -> dict | None:
    """isoflop.json of the isoflop step at the hash the spec implies now; None until it has succeeded."""
    from ladder.executor import SUCCESS, Executor
    from ladder.executor.lease import read_state

    steps = sweep_steps(spec) if steps is None else steps
    if not steps:
        return None
    executor = Executor(spec.root, spec.name)
    node = executor.graph(steps)[STEP]
    if read_state(executor.store, node.dir).state != SUCCESS:
        return None
    doc = executor.store.read_json(executor.store.join(node.dir, layout.ISOFLOP_JSON))
    return doc if isinstance(doc, dict) else None


def placed(spec: LadderSpec) -> tuple[LadderSpec, dict[str, str]]:
    """The spec with its runs declared by budget placed from the sweep's fit (pending until it exists)."""
    if spec.isoflop is None:
        return spec, {}
    return place(spec, read_doc(spec))


def rung_step(spec: LadderSpec, rung, reused: dict[str, str]):
    """A placed rung's step: a copy of the sweep run it reuses, or a training step waiting on the sweep."""
    from ladder.dag.train_steps import training_step
    from ladder.executor import Dep, Step

    if rung.name in reused:
        of = reused[rung.name]
        return Step(name=rung.name, kind=kinds.REUSE, fn=REUSE_FN, deps=(Dep(of, kind="data"),), config={"of": of, "rung": to_dict(rung)},
                    description=rung.placement, code=("ladder/dag/isoflop.py", "ladder/dag/step_io.py"))
    return training_step(spec, rung, "rung", deps=(Dep(STEP, kind="order"),), description=describe(rung))


def describe(run) -> str:
    """What the plan says of a run declared by budget: pending, or how it was placed."""
    if run.placement == PENDING:
        return f"{UNPLACED_NOTE} (placed when the sweep has run)"
    return run.placement or run.description


# ------------------------------------------------------------------------------------------
# Step functions.


def isoflop_step(config: dict, ctx) -> dict:
    """isoflop.csv (one row per sweep run) and isoflop.json (each budget's vertex, the frontier's laws)."""
    import pandas as pd

    from fits.isoflop import bootstrap_isoflop
    from ladder.dag.step_io import local_dirs

    with local_dirs(ctx.dep_dirs, ctx.out_dir) as (dep_dirs, out_dir):
        rows = []
        for name, meta in config["runs"].items():
            result = layout.read_json(f"{dep_dirs[name]}/result.json") if name in dep_dirs else None
            if not result or result.get("status") != "SUCCESS" or not _finite(result.get("final_eval_loss")):
                continue  # a failed or diverged sweep run: the parabola is fit on the others
            rows.append({"run": name, **meta, "params_active": float(result["params_active"]),
                         "tokens": float(result["tokens"]), "run_flops": float(result["flops"]),
                         "final_eval_loss": float(result["final_eval_loss"])})
        table = pd.DataFrame(rows)
        if table.empty:
            raise RuntimeError("isoflop: no sweep run finished with a finite eval loss")
        try:
            boot = bootstrap_isoflop(table["params_active"], table["tokens"], table["final_eval_loss"], table["flops"],
                                     table["budget"], n_boot=int(config["bootstrap"]), level=float(config["level"]),
                                     seed=int(config["seed"]), min_runs=int(config["min_runs"]))
        except ValueError as exc:
            raise RuntimeError(f"isoflop: {exc}; widen the sizes of the budgets whose runs all fall on one side "
                               "of the optimum") from exc
        doc = _doc(table, boot)
        layout.write_csv_atomic(f"{out_dir}/{layout.ISOFLOP_CSV}", table.assign(
            tokens_per_param=table["tokens"] / table["params_active"], best=table["run"].isin(
                [b["best_run"] for b in doc["budgets"]])).sort_values(["budget", "d_model"]))
        layout.write_json_atomic(f"{out_dir}/{layout.ISOFLOP_JSON}", doc)
    return {"budgets": len(doc["budgets"]), "a": doc["fit"]["a"], "b": doc["fit"]["b"]}


def _finite(x) -> bool:
    return isinstance(x, int | float) and math.isfinite(x)


def _num(x) -> float | None:
    """JSON has no NaN: a number not estimated (an interval without residual freedom) is null."""
    return float(x) if _finite(float(x)) else None


def _doc(table, boot: dict) -> dict:
    """isoflop.json: budgets in the report's shape, the fit's parameters as {value, lower, upper}."""
    import numpy as np

    fit = boot["fit"]
    labels = sorted(table["budget"].unique())  # fits.isoflop labels budgets 0.. in sorted order
    budgets = []
    for v in boot["budgets"]:
        k = int(labels[v["label"]])
        runs = table[table["budget"] == k]
        best = runs.iloc[int(np.argmin(np.abs(np.log(runs["params_active"]) - math.log(v["N_opt"]))))]
        budgets.append({"index": k, "flops": float(runs["flops"].iloc[0]), "n_opt": v["N_opt"], "d_opt": v["D_opt"],
                        "loss_opt": v["L_opt"], "tokens_per_param": v["D_opt"] / v["N_opt"],
                        "tokens_opt": v["D_trained"], "trained_tokens_per_param": v["D_trained"] / v["N_opt"],
                        **{f"{key}_{side}": _num(v[f"{name}_{side}"]) for key, name in
                           (("n_opt", "N_opt"), ("d_opt", "D_opt"), ("loss_opt", "L_opt")) for side in ("lower", "upper")},
                        "runs": int(v["n_runs"]), "best_run": str(best["run"])})
    used = {b["index"] for b in budgets}
    dropped = sorted(int(k) for k in labels if int(k) not in used)
    params = {}
    for k in ("a", "b", "N0", "D0", "C0", "E", "A", "alpha"):
        lo, hi = boot["intervals"].get(k, [float("nan"), float("nan")])
        params[k] = {"value": _num(fit.params[k]), "lower": _num(lo), "upper": _num(hi)}
    return {"budgets": budgets, "fit": params, "level": boot["level"], "interval": boot["method"],
            "n_boot": boot["n_boot"], "n_ok": boot["n_ok"], "dropped_budgets": dropped,
            "law": "N_opt = N0 (C/C0)^a, D_opt = D0 (C/C0)^b through each budget's parabola vertex (D = C / 6N)"}


def reuse_step(config: dict, ctx) -> dict:
    """A rung that is a sweep run: its metrics copied, its result renamed; nothing trained again."""
    import shutil
    from pathlib import Path

    from ladder.dag.step_io import local_dirs

    with local_dirs(ctx.dep_dirs, ctx.out_dir) as (dep_dirs, out_dir):
        src, dst = Path(dep_dirs[config["of"]]), Path(out_dir)
        for name in COPIED:
            if (src / name).exists():
                shutil.copyfile(src / name, dst / f".{name}.tmp")
                (dst / f".{name}.tmp").replace(dst / name)
        result = layout.read_json(src / layout.RESULT) or {}
    return {**result, "name": config["rung"]["name"], "reuses": config["of"]}
