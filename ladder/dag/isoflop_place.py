"""The IsoFLOP sweep's runs, and the ladder's runs declared by budget placed on its frontier.

A run with ``budget`` C > 0 is "the compute-optimal run at C". Until the sweep's fit exists it keeps
its declared model, on C / flops_per_token tokens, and says ``size from isoflop`` (the plan shows it;
nothing trains it). Once the fit exists (isoflop.json), the run takes the family's model nearest
N_opt(C) in log N, on the tokens that spend exactly C under the trainer's FLOP count; with
``reuse``, a run at one of the sweep's budgets *is* that budget's best sweep run (the one nearest
its parabola's vertex), so the ladder does not train it twice. Rules (LR, batch) are evaluated on
the placed size, so what is hashed and recorded is the placed run.
"""

from __future__ import annotations

import dataclasses
import math

from ladder.spec import LadderSpec, ModelSpec, RungSpec, resolve_rung

# The placement of a run declared by budget until the sweep has placed it (RungSpec.placement).
PENDING = "pending: size from isoflop"
BUDGET_TOL_DEX = 0.05  # a declared budget within this of a sweep budget is that budget


def sweep_name(k: int, d_model: int) -> str:
    return f"iso{k}-d{d_model}"


def sweep_runs(spec: LadderSpec) -> list[tuple[RungSpec, dict]]:
    """Each sweep run (resolved) and what it is: its budget's index and FLOPs, its width."""
    iso = spec.isoflop
    if iso is None:
        return []
    family = {m.d_model: m for m in iso.family}
    out = []
    for k, budget in enumerate(iso.budgets, 1):
        for d in budget.widths(iso.family):
            model = family[d]
            run = dataclasses.replace(
                iso.template, name=sweep_name(k, d), model=model, budget=float(budget.flops),
                tokens=_tokens(budget.flops, model, iso.template.seq_len),
                placement=f"isoflop sweep: budget {k} ({budget.flops:.3g} FLOPs)",
                description=f"isoflop budget {k} ({budget.flops:.3g} FLOPs), d_model {d}")
            out.append((resolve_rung(run, spec.seed), {"budget": k, "flops": float(budget.flops), "d_model": d}))
    return out


def _tokens(flops: float, model: ModelSpec, seq_len: int) -> int:
    return max(1, int(flops / model.flops_per_token(seq_len)))


def n_opt(doc: dict, flops: float) -> float:
    fit = doc["fit"]
    return float(fit["N0"]["value"] * (flops / fit["C0"]["value"]) ** fit["a"]["value"])


def nearest(family: tuple[ModelSpec, ...], n: float) -> ModelSpec:
    return min(family, key=lambda m: abs(math.log(m.params_active) - math.log(n)))


def _sweep_budget(spec: LadderSpec, flops: float) -> int | None:
    for k, budget in enumerate(spec.isoflop.budgets, 1):
        if abs(math.log10(budget.flops) - math.log10(flops)) <= BUDGET_TOL_DEX:
            return k
    return None


def place(spec: LadderSpec, doc: dict | None) -> tuple[LadderSpec, dict[str, str]]:
    """(the spec with every run declared by budget placed, {rung: the sweep run it reuses}).

    ``doc``: the isoflop step's isoflop.json, None until it has run. Runs already placed are kept.
    """
    if spec.isoflop is None:
        return spec, {}
    reused: dict[str, str] = {}
    sweep = {run.name: run for run, _ in sweep_runs(spec)}

    def one(run: RungSpec, may_reuse: bool) -> RungSpec:
        if run.budget <= 0 or run.placement:
            return run
        if doc is None:
            pending = dataclasses.replace(run, tokens=_tokens(run.budget, run.model, run.seq_len), placement=PENDING)
            return resolve_rung(pending, spec.seed)
        k = _sweep_budget(spec, run.budget) if may_reuse and spec.isoflop.reuse else None
        best = next((b.get("best_run") for b in doc["budgets"] if b["index"] == k), None) if k else None
        if best in sweep:
            reused[run.name] = best
            return dataclasses.replace(sweep[best], name=run.name, description=run.description,
                                       placement=f"isoflop: reuses {best}, budget {k}'s run nearest N_opt")
        target = n_opt(doc, run.budget)
        model = nearest(spec.isoflop.family, target)
        edge = ""
        if target > spec.isoflop.family[-1].params_active * 1.5 or target < spec.isoflop.family[0].params_active / 1.5:
            edge = " (beyond the family: its nearest member)"
        placed = dataclasses.replace(
            run, model=model, tokens=_tokens(run.budget, model, run.seq_len),
            placement=f"isoflop: N_opt({run.budget:.3g}) = {target:.4g}, nearest d_model {model.d_model} "
                      f"({model.params_active} active){edge}")
        return resolve_rung(placed, spec.seed)

    rungs = tuple(one(r, True) for r in spec.rungs)
    hero = one(spec.hero, False) if spec.hero is not None else None
    return dataclasses.replace(spec, rungs=rungs, hero=hero), reused


def pending(spec: LadderSpec) -> list[str]:
    """Names of the runs whose size waits on the sweep."""
    return [r.name for r in spec.all_runs() if r.placement == PENDING]
