"""One compute law per eval domain, summed with the mixture's weights.

A mixture's eval loss is the weighted mean of its domains' losses. When the domains have different
floors and exponents (code against prose), the sum of their power laws is no power law: on a log-log
plot it bends towards the slower domain, so one law fitted to the sum under-predicts past its range.
Fitting each domain on its own and summing keeps that bend (the approach of data-mixing laws, Ye et
al. 2024, applied to one mixture's domains).

L(C) = sum_d w_d (E_d + A_d C^-alpha_d), each domain fitted by fits.compute.fit_compute.
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np

from fits.compute import fit_compute
from fits.laws.domains import LAW, DomainSumLaw
from fits.result import FitResult


def fit_compute_domains(C, L_by_domain: Mapping[str, np.ndarray], weights: Mapping[str, float]) -> FitResult:
    """Fit L_d(C) = E_d + A_d C^-alpha_d per domain; the law predicts sum_d w_d L_d(C).

    weights are the eval mixture's (they are normalised here); every domain of L_by_domain needs one.
    """
    missing = sorted(set(L_by_domain) - set(weights))
    if missing or not L_by_domain:
        raise ValueError(f"per-domain compute law: no weight for domain(s) {', '.join(missing) or '(none given)'}")
    domains = tuple(L_by_domain)
    total = float(sum(weights[d] for d in domains))
    if not total > 0:
        raise ValueError("per-domain compute law: the domains' weights must sum to a positive number")
    fits_ = [fit_compute(C, L_by_domain[d]) for d in domains]
    laws = tuple(r.model() for r in fits_)
    law = DomainSumLaw(domains=domains, weights=tuple(weights[d] / total for d in domains), laws=laws)
    return FitResult(
        law=LAW, params=law.params(), objective=float(sum(r.objective for r in fits_)),
        n_points=int(np.asarray(C).size), n_starts=int(sum(r.n_starts for r in fits_)),
        converged=all(r.converged for r in fits_),
        diagnostics={"loss": "per domain: " + fits_[0].diagnostics["loss"],
                     "objectives": {d: r.objective for d, r in zip(domains, fits_, strict=True)}},
        config={"domains": list(domains), "weights": list(law.weights), "pin_E": None},
    )
