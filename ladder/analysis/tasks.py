"""The hero's task accuracies (issue 57): every task the rungs evaluated gets a rungs-only forecast at
the hero's (N, D) by fits.tasks_forecast (the method chosen by size backtests on the rungs, an interval
from both steps and the backtest error), scored against the hero's own accuracy where it has one.

A rung's task points are its eval.jsonl's task_bpb/<task> and task_acc/<task> columns (trained here,
or imported: `ladder import-results SPEC DIR` of OLMo's CSVs), with its eval loss as the intermediate
the chain through another loss uses, its tokens at each eval and its N (params_active in result.json).
The fits take seconds a task, so the rows are cached under <ladder>/tasks/<digest of inputs and code>.json.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pandas as pd

from fits.defaults import DEFAULT_TASK_RULE
from fits.errors import InputError
from ladder.outputs import layout

ACC, BPB = "task_acc/", "task_bpb/"
ROW_KEYS = ("task", "predicted", "lower", "upper", "level", "actual", "error", "inside", "method", "backtest")


def task_settings(fit) -> dict:
    """The spec's task settings that differ from their defaults (the report step's config carries only
    these, so a ladder without task settings keeps its step hashes)."""
    out = {}
    if fit.forecast_tasks:
        out["forecast_tasks"] = list(fit.forecast_tasks)
    if fit.task_chance:
        out["task_chance"] = dict(fit.task_chance)
    if fit.hero_task_evals != 1:
        out["hero_task_evals"] = int(fit.hero_task_evals)
    if fit.task_rule != DEFAULT_TASK_RULE:
        out["task_rule"] = fit.task_rule
    if out:  # the runs' bootstrap of step 1 takes the fit's count (a ladder without task settings: the default)
        out["bootstrap"] = int(fit.bootstrap)
    return out


def chance_of(task: str, settings: dict) -> float | None:
    """A task's chance accuracy: the spec's fit.task_chance, else OLMo's for its own tasks, else unknown."""
    from fits.olmo_tasks import OLMO_TASKS

    given = (settings.get("task_chance") or {}).get(task)
    if given is not None:
        return float(given)
    return OLMO_TASKS[task][1] if task in OLMO_TASKS else None


def rung_points(dep_dirs: dict[str, str], runs: list[str]) -> pd.DataFrame:
    """Every rung eval with task metrics: run, params, tokens, loss, task_bpb/*, task_acc/*."""
    frames = []
    for name in runs:
        d = dep_dirs.get(name)
        result = layout.read_json(Path(d) / layout.RESULT, None) if d else None
        ev = layout.read_jsonl(Path(d) / layout.EVAL) if d else pd.DataFrame()
        cols = [c for c in ev.columns if c.startswith((ACC, BPB))]
        if not result or not cols or "tokens" not in ev.columns:
            continue
        part = ev[["tokens", "eval_loss", *cols]].rename(columns={"eval_loss": "loss"})
        part.insert(0, "params", float(result["params_active"]))
        part.insert(0, "run", name)
        frames.append(part[part["tokens"] > 0])
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def tasks_in(points: pd.DataFrame, settings: dict) -> list[str]:
    found = sorted(c[len(ACC):] for c in points.columns if c.startswith(ACC))
    return list(settings.get("forecast_tasks") or found)


def require_task_points(points: pd.DataFrame, tasks: list[str]) -> None:
    """One InputError for a task no rung has a point of."""
    for task in tasks:
        col = ACC + task
        if col not in points.columns or not np.isfinite(points[col].to_numpy(float)).any():
            raise InputError(f"fit.forecast_tasks: task {task!r} has no points on any rung (no {col} in the rungs' "
                             "evaluations); import or train rungs that evaluate it, or drop it from the list")


def forecasts(points: pd.DataFrame, hero: dict, settings: dict, level: float, cache_dir: Path) -> list[dict]:
    """One row per task at the hero's (params, tokens), cached by the points, the hero and the code."""
    tasks = tasks_in(points, settings)
    if settings.get("forecast_tasks"):
        require_task_points(points, tasks)  # a task the spec names must have points
    else:  # of the tasks found, those with a value somewhere
        tasks = [t for t in tasks if np.isfinite(points[ACC + t].to_numpy(float)).any()]
    inputs = json.dumps([tasks, {t: chance_of(t, settings) for t in tasks}, float(hero["params"]),
                         float(hero["tokens"]), level, settings.get("bootstrap"), settings.get("task_rule", DEFAULT_TASK_RULE),
                         _code_digest()], sort_keys=True)
    key = hashlib.sha256(points.to_csv(index=False).encode() + inputs.encode()).hexdigest()[:16]
    cached = layout.read_json(cache_dir / f"{key}.json", None)
    if cached is not None:
        return cached
    step1: dict = {}  # C4's step-1 fits serve every task's chain through it
    rows = []
    for t in tasks:
        try:
            rows.append(_forecast(points, t, chance_of(t, settings), hero, level, step1, settings))
        except InputError as exc:  # this task's rungs cannot carry a forecast (too few sizes or runs): said in its row
            rows.append({"task": t, "predicted": None, "lower": None, "upper": None, "level": level, "actual": None,
                         "error": None, "inside": None, "method": None, "backtest": None, "note": str(exc)})
    layout.write_json_atomic(cache_dir / f"{key}.json", rows)
    return rows


def _forecast(points: pd.DataFrame, task: str, chance: float | None, hero: dict, level: float, step1: dict,
              settings: dict) -> dict:
    from fits.tasks_forecast import BOOTSTRAP_RESAMPLES, TaskColumns, forecast_task, methods_for

    has_bpb = BPB + task in points.columns and np.isfinite(points[BPB + task].to_numpy(float)).any()
    cols = TaskColumns(task=task, loss=BPB + task, acc=ACC + task, chance=chance if chance is not None else 0.0,
                       intermediate="loss")
    methods = methods_for(cols)
    if chance is None:  # the bounded sigmoids need the floor: the paper's free sigmoids alone
        methods = ("paper_two_step", "two_step")
    if not has_bpb:  # no task loss recorded: only the laws that skip it
        methods = tuple(m for m in methods if m in ("single_step", "intermediate_chain"))
    result = forecast_task(points, cols, float(hero["params"]), float(hero["tokens"]), level=level, methods=methods,
                           step1=step1, n_resamples=int(settings.get("bootstrap", BOOTSTRAP_RESAMPLES)),
                           rule=settings.get("task_rule", DEFAULT_TASK_RULE))
    diag = result.diagnostics
    f, choice = diag["forecast"], diag["choice"]
    bt = pd.DataFrame(diag["backtest"])
    mine = bt[(bt["method"] == diag["method"]) & bt["primary"]]
    return {"task": task, "predicted": f["predicted"], "lower": f["lower"], "upper": f["upper"], "level": level,
            "actual": None, "error": None, "inside": None, "method": diag["method"],
            "backtest": {"rule": choice["backtest"], "mae_by_method": choice["mae"], "weights": choice.get("weights"),
                         "fit_on": sorted(set(points.loc[points["params"] <= float(mine["cut"].max()), "run"]))
                         if len(mine) else [],
                         "predict": mine["run"].tolist(), "errors": mine["error"].round(3).tolist(),
                         "coverage": choice["coverage"]},
            "interval": {k: f[k] for k in ("sigma", "sd_bootstrap", "scatter", "per_decade", "decades", "spread") if k in f},
            "members": f.get("members"), "drawn": f.get("drawn", diag["method"]),
            "chain_loss": f.get("loss"), "chance": chance, "hero": {"params": f["params"], "tokens": f["tokens"]},
            "law": {"name": result.law, "params": result.params, "config": result.config}}


def _code_digest() -> str:
    import fits.laws.tasks
    import fits.tasks
    import fits.tasks_forecast
    import fits.tasks_paper
    import fits.tasks_weighted

    digest = hashlib.sha256(Path(__file__).read_bytes())
    for module in (fits.laws.tasks, fits.tasks, fits.tasks_forecast, fits.tasks_paper, fits.tasks_weighted):
        digest.update(Path(module.__file__).read_bytes())
    return digest.hexdigest()[:16]


def hero_actuals(hero_dir: str | None, k: int) -> dict[str, float]:
    """The hero's task metrics (task_acc/*, task_bpb/*) and eval loss (as `loss`, the points' name for
    it): each the mean of its last k evals that have it."""
    return _last_evals(layout.read_jsonl(Path(hero_dir) / layout.EVAL) if hero_dir else pd.DataFrame(), k)


def imported_hero_actuals(imported_dir: Path, k: int) -> dict[str, float]:
    """The same for a hero recorded elsewhere: the first imported run named hero* (`ladder follow` and
    `import-wandb --as hero_actual` write its rows to imported/<name>/metrics.jsonl), so a followed hero's
    task scores refresh as its evals arrive."""
    names = sorted(d.name for d in imported_dir.iterdir() if d.is_dir()) if imported_dir.is_dir() else []
    for name in (n for n in names if n.startswith("hero")):
        out = _last_evals(layout.read_jsonl(imported_dir / name / layout.METRICS), k)
        if any(c.startswith(ACC) for c in out):
            return out
    return {}


def _last_evals(ev: pd.DataFrame, k: int) -> dict[str, float]:
    if "step" in ev.columns:
        ev = ev.sort_values("step", kind="stable")
    out = {}
    for c in (c for c in ev.columns if c.startswith((ACC, BPB)) or c == "eval_loss"):
        vals = ev[c].dropna()
        if len(vals):
            out["loss" if c == "eval_loss" else c] = float(vals.tail(k).mean())
    return out


def add_tasks(report: dict, prediction: dict, dep_dirs: dict[str, str], config: dict) -> None:
    """report["tasks"]: each task's forecast for the hero, scored where the hero has the task; and
    report["tasks_summary"] over the scored ones. Nothing when no rung recorded a task."""
    hero = (prediction or {}).get("hero") or {}
    predict_dir = dep_dirs.get("predict")
    if not predict_dir or not hero.get("params") or not hero.get("tokens"):
        return
    settings = config.get("tasks") or {}
    points = rung_points(dep_dirs, list(config.get("rungs") or []))
    if points.empty:
        if settings.get("forecast_tasks"):
            require_task_points(points, list(settings["forecast_tasks"]))
        return
    level = float(hero.get("level") or config.get("level") or 0.9)
    rows = forecasts(points, hero, settings, level, Path(predict_dir).parent / "tasks")
    k = int(settings.get("hero_task_evals", 1))
    actual = hero_actuals(dep_dirs.get(config.get("hero") or ""), k)
    if not any(c.startswith(ACC) for c in actual):  # no hero trained or imported as a step: one followed or imported elsewhere
        actual = imported_hero_actuals(Path(predict_dir).parent / "imported", k)
    for r in rows:
        a = actual.get(ACC + r["task"])
        if a is not None and r["predicted"] is not None:
            r.update({"actual": a, "error": 100.0 * (r["predicted"] - a), "inside": bool(r["lower"] <= a <= r["upper"]),
                      "actual_chain_loss": actual.get(((r.get("law") or {}).get("config") or {}).get("loss"))})
    report["tasks"] = rows
    scored = [r for r in rows if r["actual"] is not None]
    if scored:
        err = np.array([abs(r["error"]) for r in scored])
        report["tasks_summary"] = {
            "scored": len(scored), "mean_abs_error_points": float(err.mean()),
            "within_2_points": int(np.sum(err <= 2.0)), "inside_interval": int(sum(r["inside"] for r in scored)),
            "mean_half_width_points": float(np.mean([50.0 * (r["upper"] - r["lower"]) for r in scored])),
            "level": level, "hero_task_evals": int(settings.get("hero_task_evals", 1))}


def check_imported(spec) -> None:
    """Before a submit: a task the spec forecasts that no imported rung has a point of, or one whose
    chance accuracy is unknown, is one InputError. Rungs trained here are checked when they have run."""
    from ladder.imports.results import records

    settings = task_settings(spec.fit)
    tasks = settings.get("forecast_tasks") or []
    for task in tasks:
        if chance_of(task, settings) is None:
            raise InputError(f"fit.task_chance: no chance accuracy for task {task!r}; set fit.task_chance "
                             f"{{{task!r}: 1 / its number of choices}}")
    imported = records(spec)
    if not tasks or not spec.rungs or any(r.name not in imported for r in spec.rungs):
        return
    rows = [row for r in spec.rungs for row in imported[r.name].get("curve", [imported[r.name]])]
    require_task_points(pd.DataFrame(rows), tasks)
