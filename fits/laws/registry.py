"""Law name -> law object, so a FitResult (or FIT.json) can rebuild the law it describes."""

from __future__ import annotations

from typing import Any


def build_law(name: str, params: dict[str, float], config: dict[str, Any] | None = None):
    config = config or {}
    if name == "chinchilla":
        from fits.laws.chinchilla import ChinchillaLaw

        return ChinchillaLaw(**{k: params[k] for k in ("E", "A", "B", "alpha", "beta")})
    if name == "compute":
        from fits.laws.compute import ComputeLaw

        return ComputeLaw(**{k: params[k] for k in ("E", "A", "alpha")})
    if name == "compute_domains":
        from fits.laws.domains import DomainSumLaw

        return DomainSumLaw.from_params(params, config)
    if name == "isoflop":
        from fits.laws.isoflop import IsoFlopLaw

        return IsoFlopLaw(**params)
    if name in ("multipower", "tissue"):
        from fits.laws.curves import curve_law

        return curve_law(name, params, config)
    if name == "progress":
        from fits.laws.matched_progress import ProgressLaw

        return ProgressLaw.from_params(params, config)
    if name == "per_fraction":
        from fits.laws.matched_progress import PerFractionLaw

        return PerFractionLaw.from_params(params, config)
    if name in ("task_chain", "task_single_step", "task_sigmoid", "task_sigmoid_bounded"):
        from fits.laws import tasks

        if name == "task_chain":
            return tasks.TaskChainLaw.from_params(params, config)
        if name == "task_single_step":
            return tasks.SingleStepLaw.from_params(params, config)
        return tasks.step2_law(params, config.get("chance"))
    if name.startswith("joint_"):
        from fits.laws.joint import JointCurveLaw

        return JointCurveLaw.from_params(name[len("joint_"):], params, config)
    raise ValueError(f"unknown law {name!r}; known: chinchilla, compute, compute_domains, isoflop, multipower, tissue, "
                     "progress, per_fraction, joint_*")
