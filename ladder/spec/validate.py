"""Validation: every problem of a spec collected as one line naming its field."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path

from fits.defaults import TASK_RULES
from fits.laws.registry import single_curve_laws

from .model import (
    BACKTEST_RULES,
    BALANCING,
    COMPUTE_DTYPES,
    COOLDOWN_SHAPES,
    PARALLEL_MODES,
    RULE_KINDS,
    SCHEDULES,
    WANDB_MODES,
    ModelSpec,
    Rule,
    SpecError,
)
from .runs import FINAL_LAW_MIN_RUNGS, LadderSpec, RungSpec
from .validate_checks import check_choice, check_type, number_in, positive_int
from .validate_data import _validate_data
from .validate_scale import resources_scale as _resources_scale
from .validate_switch import switch_problems
from .validate_trainer import validate_run_trainer, validate_trainer


def _validate_rule(problems: list[str], path: str, rule: Rule) -> None:
    check_choice(problems, f"{path}.kind", rule.kind, RULE_KINDS)
    number_in(problems, f"{path}.coef", rule.coef, 0, math.inf, lo_open=True)
    number_in(problems, f"{path}.exponent", rule.exponent, -5, 5)


def _validate_model(problems: list[str], path: str, m: ModelSpec) -> None:
    if not isinstance(m, ModelSpec):
        problems.append(f"{path}: expected a ModelSpec, got {type(m).__name__}")
        return
    for name in ("d_model", "n_layers", "n_heads", "vocab"):
        positive_int(problems, f"{path}.{name}", getattr(m, name))
    if isinstance(m.d_model, int) and isinstance(m.n_heads, int) and m.n_heads > 0 and m.d_model % m.n_heads:
        problems.append(f"{path}.n_heads: d_model {m.d_model} is not divisible by n_heads {m.n_heads}")
    elif isinstance(m.d_model, int) and isinstance(m.n_heads, int) and m.n_heads > 0 and m.head_dim % 2:
        problems.append(f"{path}.n_heads: head dimension {m.head_dim} must be even for RoPE")
    if check_type(problems, f"{path}.d_ff", m.d_ff, (int,), "a non-negative integer") and m.d_ff < 0:
        problems.append(f"{path}.d_ff: must be >= 0, got {m.d_ff}")
    for name in ("n_kv_heads", "expert_latent", "shared_d_ff"):
        value = getattr(m, name)
        if check_type(problems, f"{path}.{name}", value, (int,), "a non-negative integer") and value < 0:
            problems.append(f"{path}.{name}: must be >= 0, got {value}")
    if isinstance(m.n_kv_heads, int) and m.n_kv_heads > 0 and isinstance(m.n_heads, int) and m.n_heads % m.n_kv_heads:
        problems.append(f"{path}.n_kv_heads: n_heads {m.n_heads} is not a multiple of n_kv_heads {m.n_kv_heads}")
    number_in(problems, f"{path}.z_loss", m.z_loss, 0, 1)
    check_choice(problems, f"{path}.balancing", m.balancing, BALANCING)
    check_choice(problems, f"{path}.compute_dtype", m.compute_dtype, COMPUTE_DTYPES)
    if not check_type(problems, f"{path}.n_experts", m.n_experts, (int,), "a non-negative integer"):
        return
    if m.n_experts < 0:
        problems.append(f"{path}.n_experts: must be >= 0, got {m.n_experts}")
        return
    if m.n_experts == 0:
        if m.top_k or m.n_shared or m.expert_d_ff:
            problems.append(f"{path}.n_experts: 0 (dense) but top_k/n_shared/expert_d_ff are set; set n_experts")
        return
    positive_int(problems, f"{path}.top_k", m.top_k)
    positive_int(problems, f"{path}.expert_d_ff", m.expert_d_ff)
    if isinstance(m.top_k, int) and m.top_k > m.n_experts:
        problems.append(f"{path}.top_k: {m.top_k} exceeds n_experts {m.n_experts}")
    if check_type(problems, f"{path}.n_shared", m.n_shared, (int,), "a non-negative integer") and m.n_shared < 0:
        problems.append(f"{path}.n_shared: must be >= 0, got {m.n_shared}")
    number_in(problems, f"{path}.capacity_factor", m.capacity_factor, 1.0, 64.0)
    number_in(problems, f"{path}.bias_update_rate", m.bias_update_rate, 0, 1)
    number_in(problems, f"{path}.aux_loss_coef", m.aux_loss_coef, 0, 10)


def _validate_changes(problems: list[str], path: str, r: RungSpec) -> None:
    from .runs import RunChange

    for i, c in enumerate(r.changes or ()):
        where = f"{path}.changes[{i}]"
        if not isinstance(c, RunChange):
            problems.append(f"{where}: expected RunChange(step, what, note), got {type(c).__name__}")
            continue
        if not isinstance(c.step, int) or c.step <= 0:
            problems.append(f"{where}.step: {c.step!r} must be a positive step")
        elif isinstance(r.batch_size, int) and isinstance(r.tokens, int) and r.seq_len and c.step >= r.steps:
            problems.append(f"{where}.step: {c.step} is beyond the run's {r.steps} steps; give the step the change was made at")
        if not isinstance(c.what, str) or not c.what.strip():
            problems.append(f"{where}.what: say what changed (e.g. 'data mix')")


def _validate_rung(problems: list[str], path: str, r: RungSpec) -> None:
    if not isinstance(r, RungSpec):
        problems.append(f"{path}: expected a RungSpec, got {type(r).__name__}")
        return
    if not isinstance(r.name, str) or not r.name or not r.name.replace("_", "").replace("-", "").isalnum():
        problems.append(f"{path}.name: {r.name!r} must be a non-empty name of letters, digits, '_' or '-'")
    _validate_model(problems, f"{path}.model", r.model)
    positive_int(problems, f"{path}.tokens", r.tokens)
    positive_int(problems, f"{path}.seq_len", r.seq_len)
    _validate_changes(problems, path, r)
    if isinstance(r.batch_size, Rule):
        _validate_rule(problems, f"{path}.batch_size", r.batch_size)
    else:
        positive_int(problems, f"{path}.batch_size", r.batch_size)
    o = r.optim
    if isinstance(o.lr, Rule):
        _validate_rule(problems, f"{path}.optim.lr", o.lr)
    else:
        number_in(problems, f"{path}.optim.lr", o.lr, 0, 1e6, lo_open=True)
    number_in(problems, f"{path}.optim.b1", o.b1, 0, 1)
    number_in(problems, f"{path}.optim.b2", o.b2, 0, 1)
    number_in(problems, f"{path}.optim.eps", o.eps, 0, 1, lo_open=True)
    number_in(problems, f"{path}.optim.weight_decay", o.weight_decay, 0, 10)
    number_in(problems, f"{path}.optim.grad_clip", o.grad_clip, 0, 1e6)
    s = r.schedule
    check_choice(problems, f"{path}.schedule.kind", s.kind, SCHEDULES)
    check_choice(problems, f"{path}.schedule.cooldown_shape", s.cooldown_shape, COOLDOWN_SHAPES)
    number_in(problems, f"{path}.schedule.warmup_frac", s.warmup_frac, 0, 1)
    number_in(problems, f"{path}.schedule.decay_frac", s.decay_frac, 0, 1)
    number_in(problems, f"{path}.schedule.final_lr_frac", s.final_lr_frac, 0, 1)
    if isinstance(s.warmup_frac, float | int) and isinstance(s.decay_frac, float | int):
        if s.warmup_frac + (s.decay_frac if s.kind == "wsd" else 0) > 1:
            problems.append(f"{path}.schedule: warmup_frac + decay_frac exceed 1")
    for i, frac in enumerate(s.branch_fracs):
        number_in(problems, f"{path}.schedule.branch_fracs[{i}]", frac, 0, 1, lo_open=True)
    if s.branch_fracs and s.kind != "wsd":
        problems.append(f"{path}.schedule.branch_fracs: cooldown branches need kind 'wsd', got {s.kind!r}")
    if s.warmup_steps is not None:
        positive_int(problems, f"{path}.schedule.warmup_steps", s.warmup_steps)
    if r.seed is not None:
        check_type(problems, f"{path}.seed", r.seed, (int,), "an integer")
    if not isinstance(r.replica, int) or isinstance(r.replica, bool) or r.replica < 0:
        problems.append(f"{path}.replica: {r.replica!r} must be an integer >= 0 (0: the first run of this size)")
    for name in ("eval_every", "checkpoint_every"):
        v = getattr(r, name)
        if check_type(problems, f"{path}.{name}", v, (int,), "a non-negative integer") and v < 0:
            problems.append(f"{path}.{name}: must be >= 0, got {v}")
    positive_int(problems, f"{path}.log_every", r.log_every)
    positive_int(problems, f"{path}.n_evals", r.n_evals)
    positive_int(problems, f"{path}.n_checkpoints", r.n_checkpoints)
    res = r.resources
    number_in(problems, f"{path}.resources.cpus", res.cpus, 0, 4096)
    number_in(problems, f"{path}.resources.gpus", res.gpus, 0, 4096)
    for key, value in dict(res.custom).items():
        number_in(problems, f"{path}.resources.custom[{key}]", value, 0, 1e9)
    check_choice(problems, f"{path}.resources.parallel", res.parallel, PARALLEL_MODES)
    if check_type(problems, f"{path}.resources.devices", res.devices, (int,), "a non-negative integer"):
        if res.devices < 0:
            problems.append(f"{path}.resources.devices: must be >= 0 (0: every device the batch divides over), "
                            f"got {res.devices}")
        elif res.devices and isinstance(r.batch_size, int) and r.batch_size > 0 and r.batch_size % res.devices:
            problems.append(
                f"{path}.resources.devices: batch_size {r.batch_size} does not split over {res.devices} devices; "
                f"make batch_size a multiple of {res.devices} or set devices to a divisor of {r.batch_size}"
            )
    if check_type(problems, f"{path}.resources.cpu_devices", res.cpu_devices, (int,), "a non-negative integer"):
        if not 0 <= res.cpu_devices <= 256:
            problems.append(f"{path}.resources.cpu_devices: must be in [0, 256] (0: one per CPU), "
                            f"got {res.cpu_devices}")
    _resources_scale(problems, path, r)
    if isinstance(r.batch_size, int) and isinstance(r.seq_len, int) and isinstance(r.tokens, int):
        if r.batch_size > 0 and r.seq_len > 0 and 0 < r.tokens < r.batch_size * r.seq_len:
            problems.append(
                f"{path}.tokens: {r.tokens} is less than one batch ({r.batch_size} x {r.seq_len} tokens)"
            )


def validate(spec: LadderSpec, base_dir: Path | None = None) -> None:
    """Raise SpecError listing every problem, one line each; return None when the spec is sound."""
    problems: list[str] = []
    if not isinstance(spec, LadderSpec):
        raise SpecError([f"LADDER: expected a LadderSpec, got {type(spec).__name__}"])
    # '+' joins a ladder and its variant (tiny+dense): each part a name of its own
    if not isinstance(spec.name, str) or not all(p.replace("_", "").replace("-", "").isalnum() for p in spec.name.split("+")):
        problems.append(f"name: {spec.name!r} must be a non-empty name of letters, digits, '_' or '-'")
    if not isinstance(spec.variants, Mapping):
        problems.append(f"variants: expected a mapping of name to overrides, got {type(spec.variants).__name__}")
    if not isinstance(spec.rungs, tuple | list) or not spec.rungs:
        problems.append("rungs: at least one rung is required")
        raise SpecError(problems)
    for i, rung in enumerate(spec.rungs):
        _validate_rung(problems, f"rungs[{i}]", rung)
    if spec.hero is not None:
        _validate_rung(problems, "hero", spec.hero)
    seen: set[str] = set()
    for i, run in enumerate(spec.all_runs()):
        name = getattr(run, "name", None)
        if name in seen:
            where = "hero" if i == len(spec.rungs) else f"rungs[{i}]"
            problems.append(f"{where}.name: duplicate run name {name!r}")
        seen.add(name)
    for i, target in enumerate(spec.targets):
        _validate_model(problems, f"targets[{i}].model", target.model)
        positive_int(problems, f"targets[{i}].tokens", target.tokens)
    _validate_data(problems, "data", spec.data, base_dir)
    validate_trainer(problems, "trainer", spec.trainer)
    for i, run in enumerate(spec.all_runs()):
        where = "hero" if i == len(spec.rungs) else f"rungs[{i}]"
        validate_trainer(problems, f"{where}.trainer", getattr(run, "trainer", None))
        validate_run_trainer(problems, where, spec.trainer_of(run) if isinstance(run, RungSpec) else None, run)
    problems.extend(switch_problems(spec))
    check_choice(problems, "fit.law", spec.fit.law, tuple(FINAL_LAW_MIN_RUNGS))
    if spec.fit.law == "compute_domains" and spec.fit.pin_E is not None:
        problems.append("fit.pin_E: the compute_domains law fits each domain's own E; unset pin_E or use fit.law='compute'")
    problems.extend(e_prior_problems(spec.fit))
    check_choice(problems, "fit.curve_law", spec.fit.curve_law, (*single_curve_laws(), "none"))
    check_choice(problems, "fit.curve_fit", spec.fit.curve_fit, ("auto", "none"))
    check_choice(problems, "fit.disagreement", spec.fit.disagreement, ("band", "report"))
    check_choice(problems, "fit.baseline", spec.fit.baseline, ("none", "marin"))
    for i, task in enumerate(spec.fit.forecast_tasks):
        if not isinstance(task, str) or not task or "/" in task:
            problems.append(f"fit.forecast_tasks[{i}]: {task!r} is not a task name (as in task_acc/<task>)")
    for task, chance in spec.fit.task_chance.items():
        if not isinstance(chance, int | float) or not 0 < chance < 1:
            problems.append(f"fit.task_chance[{task!r}]: {chance!r} is not a probability in (0, 1) (1 / choices)")
    check_choice(problems, "fit.task_rule", spec.fit.task_rule, TASK_RULES)
    if not isinstance(spec.fit.hero_task_evals, int) or spec.fit.hero_task_evals < 1:
        problems.append(f"fit.hero_task_evals: {spec.fit.hero_task_evals!r} is not a positive integer")
    if spec.fit.baseline == "marin":
        runs = [r.name for r in spec.rungs] + ([spec.hero.name] if spec.hero else [])
        missing = [n for n in runs if not spec.fit.baseline_flops_per_step.get(n)]
        if missing:
            problems.append(f"fit.baseline_flops_per_step: no compute per step for {', '.join(missing)}; "
                            "Marin's baseline needs its figure for every rung and the hero")
    if spec.fit.loss_metric == "train_loss":
        # Refused rather than ignored: every law, backtest and hero comparison reads final eval losses,
        # and a run's final train loss is one batch's, too noisy to fit.
        problems.append("fit.loss_metric: 'train_loss' is not supported (the laws fit each run's final eval "
                        "loss on the held-out split); remove the field or set it to 'eval_loss'")
    else:
        check_choice(problems, "fit.loss_metric", spec.fit.loss_metric, ("eval_loss",))
    if spec.fit.backtest_holdout != 1:
        # Refused rather than ignored: the backtest is set by the hero's extrapolation ratio, not a count.
        problems.append(f"fit.backtest_holdout: {spec.fit.backtest_holdout!r} is not supported (the backtest always "
                        "predicts the largest rung size from the sizes at least the hero's extrapolation ratio "
                        "below it); remove the field or set it to 1")
    if check_type(problems, "fit.bootstrap", spec.fit.bootstrap, (int,), "a non-negative integer"):
        if spec.fit.bootstrap < 0:
            problems.append(f"fit.bootstrap: must be >= 0, got {spec.fit.bootstrap}")
    number_in(problems, "fit.level", spec.fit.level, 0, 1, lo_open=True)
    min_rungs = FINAL_LAW_MIN_RUNGS.get(spec.fit.law, 0)
    if len(spec.rungs) < min_rungs and spec.hero is not None:
        problems.append(f"rungs: the {spec.fit.law} law needs at least {min_rungs} rungs, got {len(spec.rungs)}")
    number_in(problems, "gate.max_backtest_error", spec.gate.max_backtest_error, 0, 10, lo_open=True)
    number_in(problems, "gate.max_interval_width", spec.gate.max_interval_width, 0, 100, lo_open=True)
    check_choice(problems, "gate.backtest_rule", spec.gate.backtest_rule, BACKTEST_RULES)
    number_in(problems, "gate.replica_outlier_level", spec.gate.replica_outlier_level, 0, 1)
    _validate_isoflop(problems, spec)
    check_choice(problems, "wandb.mode", spec.wandb.mode, WANDB_MODES)
    if not (isinstance(spec.wandb.tags, tuple | list) and all(isinstance(t, str) and t for t in spec.wandb.tags)):
        problems.append(f"wandb.tags: {spec.wandb.tags!r} must be a tuple of non-empty strings, e.g. ('marin', 'moe')")
    check_type(problems, "wandb.notes", spec.wandb.notes, (str,), "a string")
    check_type(problems, "seed", spec.seed, (int,), "an integer")
    check_type(problems, "root", spec.root, (str,), "a path or URL")
    if problems:
        raise SpecError(problems)


def _validate_isoflop(problems: list[str], spec: LadderSpec) -> None:
    """The IsoFLOP stage (when declared) and the runs declared by budget, which need one."""
    from .isoflop import IsoFlopSpec

    by_budget = [(("hero" if i == len(spec.rungs) else f"rungs[{i}]"), r) for i, r in enumerate(spec.all_runs())
                 if isinstance(r, RungSpec)]
    orphans = []
    for where, run in by_budget:
        if check_type(problems, f"{where}.budget", run.budget, (int, float), "a number of FLOPs (0: sized by hand)"):
            if not math.isfinite(run.budget) or run.budget < 0:
                problems.append(f"{where}.budget: {run.budget} must be a finite number of FLOPs >= 0")
            elif run.budget > 0 and spec.isoflop is None:
                orphans.append(where)
    if orphans:  # one mistake (no stage), however many runs it strands: one line
        also = f" (and {', '.join(orphans[1:])})" if orphans[1:] else ""
        problems.append(f"{orphans[0]}.budget{also}: declared by budget but the ladder has no isoflop stage; "
                        "add isoflop=IsoFlopSpec(...) or size the run by hand (budget=0)")
    iso = spec.isoflop
    if iso is None:
        return
    if not isinstance(iso, IsoFlopSpec):
        problems.append(f"isoflop: expected an IsoFlopSpec, got {type(iso).__name__}")
        return
    if not isinstance(iso.family, tuple | list) or not iso.family:
        problems.append("isoflop.family: no models; give the models sizes are picked from, e.g. "
                        "tuple(RECIPE.model(d) for d in (16, 24, 32, 48))")
        return
    for i, m in enumerate(iso.family):
        _validate_model(problems, f"isoflop.family[{i}]", m)
    if problems:
        return
    widths = [m.d_model for m in iso.family]
    if len(set(widths)) != len(widths):
        problems.append(f"isoflop.family: two models share a d_model ({widths}); sizes are named by d_model")
    if [m.params_active for m in iso.family] != sorted(m.params_active for m in iso.family):
        problems.append("isoflop.family: models must go from smallest to largest (active parameters)")
    if not isinstance(iso.template, RungSpec):
        problems.append(f"isoflop.template: expected a RungSpec, got {type(iso.template).__name__}")
    else:
        _validate_rung(problems, "isoflop.template", iso.template)
    if check_type(problems, "isoflop.bootstrap", iso.bootstrap, (int,), "a non-negative integer") and iso.bootstrap < 0:
        problems.append(f"isoflop.bootstrap: must be >= 0, got {iso.bootstrap}")
    if check_type(problems, "isoflop.min_runs", iso.min_runs, (int,), "an integer >= 3") and iso.min_runs < 3:
        problems.append(f"isoflop.min_runs: {iso.min_runs} is too few for a parabola (3 coefficients); give >= 3")
    if not isinstance(iso.budgets, tuple | list) or len(iso.budgets) < 2:
        problems.append(f"isoflop.budgets: {len(iso.budgets) if isinstance(iso.budgets, tuple | list) else 0} "
                        "budgets; the frontier needs at least 2 (3 for L_opt(C)), e.g. "
                        "(IsoFlopBudget(1e12, sizes=(16, 24, 32)), IsoFlopBudget(3e12, sizes=(24, 32, 40)))")
        return
    min_runs = iso.min_runs if isinstance(iso.min_runs, int) else 3
    for i, b in enumerate(iso.budgets):
        p = f"isoflop.budgets[{i}]"
        number_in(problems, f"{p}.flops", b.flops, 0, 1e35, lo_open=True)
        if b.sizes and b.guess:
            problems.append(f"{p}: give sizes or guess (with span), not both")
            continue
        if not b.sizes and not b.guess:
            problems.append(f"{p}.sizes: no sizes; give sizes=(d_model, ...) from isoflop.family or guess=d_model")
            continue
        unknown = [d for d in (b.sizes or (b.guess,)) if d not in widths]
        if unknown:
            field = "sizes" if b.sizes else "guess"
            problems.append(f"{p}.{field}: d_model {', '.join(map(str, unknown))} not in isoflop.family "
                            f"(d_model {', '.join(map(str, widths))})")
            continue
        n = len(set(b.widths(tuple(iso.family))))
        if n < min_runs:
            problems.append(f"{p}.sizes: {n} distinct sizes; a budget's parabola needs at least {min_runs}")


def e_prior_problems(fit) -> list[str]:
    """fit.E_prior: a (mean, sd) pair of positive numbers, on the compute law only, not beside pin_E."""
    prior = fit.E_prior
    if prior is None:
        return []
    if (not isinstance(prior, (tuple, list)) or len(prior) != 2
            or not all(isinstance(v, (int, float)) and not isinstance(v, bool) and v > 0 for v in prior)):
        return [f"fit.E_prior: {prior!r} is not a (mean, sd) pair of positive numbers, e.g. (0.6, 0.2); None fits E free"]
    if fit.law != "compute":
        return [f"fit.E_prior: a prior on the compute law's E, but fit.law is {fit.law!r}; set fit.law='compute' or unset it"]
    if fit.pin_E is not None:
        return ["fit.E_prior: E is pinned (fit.pin_E) and given a prior; keep one"]
    return []

