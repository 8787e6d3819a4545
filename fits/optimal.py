"""Compute-optimal allocation (N_opt, D_opt) from a fitted Chinchilla or isoFLOP law."""

from __future__ import annotations

from fits.laws.chinchilla import ChinchillaLaw
from fits.laws.isoflop import IsoFlopLaw
from fits.result import FitResult


def compute_optimal(law, C, flops_per_param_token: float = 6.0):
    """N_opt, D_opt for budget C from a Chinchilla or isoFLOP law (or a FitResult of one)."""
    model = law.model() if isinstance(law, FitResult) else law
    if isinstance(model, ChinchillaLaw):
        return model.compute_optimal(C, flops_per_param_token)
    if isinstance(model, IsoFlopLaw):
        return model.compute_optimal(C)
    raise ValueError(f"compute-optimal allocation needs a chinchilla or isoflop law, not {type(model).__name__}")
