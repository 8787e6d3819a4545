"""Every law, registered once: its name, parameters, fit, the law object that predicts, the fewest
points it needs, and (for a ladder's final-loss law) the fewest rung sizes.

The spec's validation, the ladder's fit step, the CLI's choices and FitResult.model() all look laws up
here, so adding a law is one entry. Nothing heavy is imported: fit and build name their modules
("module:function"), loaded on first use.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class LawEntry:
    """name: the registry name (FitResult.law, spec fit.law, --law). kind: "point" (a runs table's
    finals: `ladder fit`), "final" (a ladder's final-loss law only), "curve" (whole loss curves),
    "progress" (matched-progress curves), "task" (accuracy). params: the fitted parameters' names
    (empty when they depend on the data, e.g. one set per domain). fit / build: "module:function";
    build(params, config) returns the law object with .predict. inputs: what predict takes.
    min_points: the fewest points a fit takes. min_rungs: the fewest rung sizes a ladder fits it on
    (final-loss laws only). pin_E: E can be held at a given value (fit.pin_E, --pin-E). resample:
    "module:function" that refits a batch of bootstrap resamples at once (runs, base, weights, n_conf,
    n_refine) -> (params per resample, converged); None: the law's own fit per resample. units: what a
    resample must keep more of than the law has free parameters ("budgets": distinct compute,
    "configurations": distinct (N, D)); None: not checked (a resample that cannot be fit is skipped)."""

    name: str
    kind: str
    params: tuple[str, ...]
    fit: str
    build: str
    inputs: tuple[str, ...]
    min_points: int
    min_rungs: int | None = None
    description: str = ""
    pin_E: bool = False
    resample: str | None = None
    units: str | None = None


def _entries() -> tuple[LawEntry, ...]:
    cc = ("E", "A", "B", "alpha", "beta")
    mp = ("L0", "A", "alpha", "B", "C", "beta", "gamma")
    ts = ("L0", "A", "alpha", "C")
    return (
        LawEntry("chinchilla", "point", cc, "fits.chinchilla:fit_chinchilla", "fits.laws.registry:_chinchilla",
                 ("N", "D"), 5, 3, "L(N, D) = E + A / N^alpha + B / D^beta",
                 resample="fits.uncertainty:resample_chinchilla", units="configurations"),
        LawEntry("chinchilla_tied", "final", ("E", "A", "B", "alpha"), "fits.chinchilla_tied:fit_chinchilla_tied",
                 "fits.laws.registry:_chinchilla_tied", ("N", "D"), 4, 2, "Chinchilla with beta = alpha"),
        LawEntry("compute", "point", ("E", "A", "alpha"), "fits.compute:fit_compute", "fits.laws.registry:_compute",
                 ("C",), 3, 3, "L(C) = E + A C^-alpha", pin_E=True, resample="fits.uncertainty:resample_compute",
                 units="budgets"),
        LawEntry("compute_domains", "final", (), "fits.domains:fit_compute_domains",
                 "fits.laws.domains:DomainSumLaw.from_params", ("C",), 3, 3,
                 "sum over eval domains of w_d (E_d + A_d C^-alpha_d)"),
        LawEntry("isoflop", "point", ("a", "b", "N0", "D0", "C0"), "fits.isoflop:fit_isoflop",
                 "fits.laws.registry:_isoflop", ("C",), 6, None, "N_opt, D_opt ~ C^a, C^b (Approach 2)"),
        LawEntry("multipower", "curve", mp, "fits.curves:fit_curves", "fits.laws.registry:_multipower",
                 ("step", "lr"), 8, None, "Multi-Power law of a loss curve under a schedule"),
        LawEntry("tissue", "curve", ts, "fits.curves:fit_curves", "fits.laws.registry:_tissue",
                 ("step", "lr"), 5, None, "LR-annealing (Tissue et al.) law of a loss curve"),
        LawEntry("joint_multipower", "curve", (), "fits.joint:fit_joint_curves", "fits.laws.registry:_joint_multipower",
                 ("N", "step", "lr"), 8, None, "Multi-Power law across sizes"),
        LawEntry("joint_tissue", "curve", (), "fits.joint:fit_joint_curves", "fits.laws.registry:_joint_tissue",
                 ("N", "step", "lr"), 5, None, "LR-annealing law across sizes"),
        LawEntry("progress", "progress", (), "fits.matched_progress:fit_progress",
                 "fits.laws.matched_progress:ProgressLaw.from_params", ("C", "frac"), 4, None,
                 "matched-progress law: loss at a fraction of training against compute"),
        LawEntry("per_fraction", "progress", (), "fits.matched_progress:fit_per_fraction",
                 "fits.laws.matched_progress:PerFractionLaw.from_params", ("C", "frac"), 3, None,
                 "one compute law per fraction of training"),
        LawEntry("task_chain", "task", (), "fits.tasks:fit_chain", "fits.laws.tasks:TaskChainLaw.from_params",
                 ("N", "D"), 5, None, "(N, D) -> a loss (step 1) -> accuracy by a sigmoid (step 2)"),
        LawEntry("task_single_step", "task", ("e", "A", "B", "alpha", "beta"), "fits.tasks:fit_single_step",
                 "fits.laws.tasks:SingleStepLaw.from_params", ("N", "D"), 6, None,
                 "accuracy = chance + (1 - chance) / (1 + exp(e + A / N^alpha + B / D^beta))"),
        LawEntry("task_sigmoid", "task", ("a", "k", "L0", "b"), "fits.tasks:fit_sigmoid",
                 "fits.laws.registry:_step2", ("L",), 4, None, "accuracy = a / (1 + exp(-k (L - L0))) + b"),
        LawEntry("task_sigmoid_bounded", "task", ("k", "L0"), "fits.tasks:fit_sigmoid",
                 "fits.laws.registry:_step2", ("L",), 2, None,
                 "accuracy = chance + (1 - chance) / (1 + exp(k (L - L0)))"),
    )


REGISTRY: dict[str, LawEntry] = {e.name: e for e in _entries()}


def law_entry(name: str) -> LawEntry:
    entry = REGISTRY.get(name)
    if entry is None:
        raise ValueError(f"unknown law {name!r}; known: {', '.join(REGISTRY)}")
    return entry


def law_names(*kinds: str) -> tuple[str, ...]:
    """Registered names of the given kinds, in registration order (all when none given)."""
    return tuple(n for n, e in REGISTRY.items() if not kinds or e.kind in kinds)


def single_curve_laws() -> tuple[str, ...]:
    """The whole-curve laws of one run (the joint ones fit several sizes at once)."""
    return tuple(n for n in law_names("curve") if not n.startswith("joint_"))


def min_points(name: str) -> int:
    return law_entry(name).min_points


def final_law_min_rungs() -> dict[str, int]:
    """A ladder's final-loss laws and the fewest rung sizes each is fitted on."""
    return {n: e.min_rungs for n, e in REGISTRY.items() if e.min_rungs is not None}


def _load(path: str):
    module, _, attr = path.partition(":")
    obj = importlib.import_module(module)
    for part in attr.split("."):
        obj = getattr(obj, part)
    return obj


def fit_function(name: str):
    return _load(law_entry(name).fit)


def resample_function(name: str):
    """The law's batched bootstrap refit, or None when each resample is refitted by its own fit."""
    path = law_entry(name).resample
    return _load(path) if path else None


def is_power_law_in_compute(name: str | None) -> bool:
    """Whether the law is E + A C^-alpha (the curve the dashboard draws); an unnamed law is the old compute fit."""
    if name is None:
        return True
    entry = REGISTRY.get(name)
    return entry is not None and entry.inputs == ("C",) and set(entry.params) == {"E", "A", "alpha"}


def in_compute(name: str) -> bool:
    """Whether the law predicts from compute C alone (not from N and D)."""
    return law_entry(name).inputs == ("C",)


def build_law(name: str, params: dict[str, float], config: dict[str, Any] | None = None):
    """The law object a FitResult's name, parameters and config describe."""
    return _load(law_entry(name).build)(params, config or {})


def _chinchilla(params, config):
    from fits.laws.chinchilla import ChinchillaLaw

    return ChinchillaLaw(**{k: params[k] for k in ("E", "A", "B", "alpha", "beta")})


def _compute(params, config):
    from fits.laws.compute import ComputeLaw

    return ComputeLaw(**{k: params[k] for k in ("E", "A", "alpha")})


def _isoflop(params, config):
    from fits.laws.isoflop import IsoFlopLaw

    return IsoFlopLaw(**params)


def _chinchilla_tied(params, config):
    return _chinchilla({**params, "beta": params.get("beta", params["alpha"])}, config)


def _multipower(params, config):
    from fits.laws.curves import curve_law

    return curve_law("multipower", params, config)


def _tissue(params, config):
    from fits.laws.curves import curve_law

    return curve_law("tissue", params, config)


def _joint_multipower(params, config):
    from fits.laws.joint import JointCurveLaw

    return JointCurveLaw.from_params("multipower", params, config)


def _joint_tissue(params, config):
    from fits.laws.joint import JointCurveLaw

    return JointCurveLaw.from_params("tissue", params, config)


def _step2(params, config):
    from fits.laws.tasks import step2_law

    return step2_law(params, config.get("chance"))
