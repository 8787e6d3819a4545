"""The effect of a change read from two ladders (`ladder compare`): each ladder's finals, trained here
or imported, as the runs fits.effect_trend compares, and the heroes' finals where both ran.

A size is the runs of one (model, tokens, seq_len): a rung and its replicas. Two ladders' sizes are
matched by the name of that size's first replica (rung_1 <-> rung_1), so a variant that changes the
model (dense against MoE) still meets its baseline size for size; runs of one resolved seed in both
ladders are a pair (the same data order).
"""

from __future__ import annotations

import json
import math

import pandas as pd

from fits.errors import InputError
from fits.laws.registry import law_entry
from ladder.outputs import layout
from ladder.spec import LadderSpec, RungSpec, to_dict


def size_names(spec: LadderSpec) -> dict[str, str]:
    """Each rung's size: the name of the first replica of its (model, tokens, seq_len)."""
    first: dict[str, RungSpec] = {}
    out = {}
    for rung in spec.rungs:
        key = json.dumps([to_dict(rung.model), rung.tokens, rung.seq_len], sort_keys=True, default=str)
        if key not in first or rung.replica < first[key].replica:
            first[key] = rung
    for rung in spec.rungs:
        key = json.dumps([to_dict(rung.model), rung.tokens, rung.seq_len], sort_keys=True, default=str)
        out[rung.name] = first[key].name
    return out


def _results(spec: LadderSpec) -> dict[str, dict | None]:
    """Each run's result: its step's result.json, else (imported but not submitted yet) the result its
    import step would write; None when neither."""
    from ladder.dag import queries
    from ladder.executor.store import Store
    from ladder.imports import results as imported

    store = Store(spec.root)
    dirs = queries.step_dirs(spec)
    records = imported.records(spec)
    out: dict[str, dict | None] = {}
    for run in spec.all_runs():
        result = store.read_json(store.join(store.to_path(dirs[run.name]), layout.RESULT)) if run.name in dirs else None
        if result is None and run.name in records:
            result = imported.result_for(run, records[run.name])[0]
        out[run.name] = result
    return out


def finished(result: dict | None) -> bool:
    return bool(result) and result.get("status") == "SUCCESS" and not result.get("partial") \
        and result.get("final_eval_loss") is not None


def ladder_runs(spec: LadderSpec, which: str) -> tuple[pd.DataFrame, dict | None]:
    """(the rungs' finals as size, seed, flops, loss, name; the hero's result or None), or InputError
    naming the rungs a ladder has not finished."""
    if spec.isoflop is not None:
        from ladder.dag import stages

        spec = stages.placed(spec)
    results = _results(spec)
    missing = [f"{r.name} ({(results[r.name] or {}).get('status') or 'not run'})" for r in spec.rungs
               if not finished(results[r.name])]
    if missing:
        raise InputError(f"ladder {which} ({spec.name}) is unfinished: {', '.join(missing)} have no final loss; "
                        "finish it (`ladder submit`, or `ladder import-results` for runs trained elsewhere) "
                        "before comparing")
    sizes = size_names(spec)
    rows = [{"size": sizes[r.name], "seed": r.seed, "name": r.name, "flops": float(results[r.name]["flops"]),
             "loss": float(results[r.name]["final_eval_loss"]), "tokens": float(results[r.name]["tokens"])}
            for r in spec.rungs]
    hero = results.get(spec.hero.name) if spec.hero is not None else None
    return pd.DataFrame(rows), (hero if finished(hero) else None)


def analyse_pair(spec_a: LadderSpec, spec_b: LadderSpec, level: float, n_draws: int) -> dict:
    """The effect of B against A (fits.effect_trend.analyse) on the two ladders' outputs."""
    from fits.effect_trend import analyse
    from ladder.analysis.seeds import prior_sigma

    a, hero_a = ladder_runs(spec_a, "A")
    b, hero_b = ladder_runs(spec_b, "B")
    hero_flops = None
    heroes_declared = [h for h in (spec_b.hero, spec_a.hero) if h is not None]
    if heroes_declared:  # B's hero's compute, and A's (each stands in for the other where one has none)
        hero_flops = (float(heroes_declared[0].flops), float(heroes_declared[-1].flops))
    heroes = None
    if hero_a is not None and hero_b is not None:
        heroes = (float(hero_a["final_eval_loss"]), float(hero_a["flops"]), float(hero_b["final_eval_loss"]),
                  float(hero_b["flops"]))
    pin_E = spec_a.fit.pin_E if law_entry(spec_a.fit.law).pin_E else None
    doc = analyse(a, b, hero_flops=hero_flops, heroes=heroes, prior_a=prior_sigma(float(a["tokens"].max())),
                  prior_b=prior_sigma(float(b["tokens"].max())), pin_E=pin_E, level=level, n_draws=n_draws)
    return {**doc, "ladders": {"a": spec_a.name, "b": spec_b.name}}


def after_change(spec_a: LadderSpec, spec_b: LadderSpec, summary_a: dict, effect: dict) -> dict | None:
    """A's hero forecast carried past its declared data-mix switch by the switch's effect measured on the
    rungs: B is A with the switch replayed on every run (data.switch_at), so B's effect at the hero is
    the switch's, and A's rungs-only forecast plus it is the switched hero's forecast. Beside it, the
    band-widening rule's (the forecast's centre kept, `ladder follow`), each scored on A's hero when it
    ran. None when A's hero declares no switch."""
    hero = spec_a.hero
    switch = [c for c in (hero.changes if hero is not None else ()) if c.weights]
    if not switch:
        return None
    from ladder.analysis.change_carry import replays

    frac = switch[0].step / hero.steps
    replayed = replays(spec_b, switch[0], hero.steps)
    doc = {"step": switch[0].step, "frac": frac, "weights": dict(switch[0].weights), "replayed_by_b": replayed}
    at = effect.get("at_hero")
    predicted = summary_a.get("predicted_final_loss")
    if at is None or predicted is None:
        return {**doc, "ok": False, "reason": "A's hero prediction (its predict step) or B's effect at the hero is missing"}
    lo, hi = summary_a.get("lower"), summary_a.get("upper")
    centre = predicted + at["delta"]
    below = math.hypot(predicted - lo, at["delta"] - at["delta_lower"]) if lo is not None else None
    above = math.hypot(hi - predicted, at["delta_upper"] - at["delta"]) if hi is not None else None
    actual = summary_a.get("actual_final_loss")
    out = {**doc, "ok": True, "predicted_final_loss": centre,
           "lower": centre - below if below is not None else None, "upper": centre + above if above is not None else None,
           "unchanged_centre": predicted, "actual_final_loss": actual}
    if actual is not None:
        out["relative_error"] = centre / actual - 1.0
        out["unchanged_relative_error"] = predicted / actual - 1.0
        out["inside"] = out["lower"] is not None and out["lower"] <= actual <= out["upper"]
    return out


def save(spec_a: LadderSpec, spec_b: LadderSpec, record: dict) -> str:
    """`ladder compare`'s result under B's ladder folder, <root>/<B>/compare/<A>.json, written whole (the last
    comparison of the two replaces the one before): what the dashboard's Compare page shows. Returns its path."""
    import time

    from ladder.executor.store import Store

    store = Store(spec_b.root)
    folder = store.join(store.root, spec_b.name, layout.COMPARE_DIR)
    store.makedirs(folder)
    path = store.join(folder, f"{spec_a.name}.json")
    store.write_json(path, {**record, "saved_at": time.time()})
    return store.url(path)
