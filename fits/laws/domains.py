"""One compute law per eval domain, summed with the mixture's weights; fits.domains fits it."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from fits.laws.compute import ComputeLaw

LAW = "compute_domains"



@dataclass(frozen=True)
class DomainSumLaw:
    """sum_d w_d L_d(C), L_d a ComputeLaw; params are named "<domain>.E", "<domain>.A", "<domain>.alpha"."""

    domains: tuple[str, ...]
    weights: tuple[float, ...]
    laws: tuple[ComputeLaw, ...]

    name = LAW

    def predict(self, C) -> np.ndarray:
        return sum(w * law.predict(C) for w, law in zip(self.weights, self.laws, strict=True))

    def predict_domains(self, C) -> dict[str, np.ndarray]:
        return {d: law.predict(C) for d, law in zip(self.domains, self.laws, strict=True)}

    def params(self) -> dict[str, float]:
        return {f"{d}.{k}": v for d, law in zip(self.domains, self.laws, strict=True) for k, v in law.params().items()}

    @classmethod
    def from_params(cls, params: Mapping[str, float], config: Mapping) -> DomainSumLaw:
        domains = tuple(config["domains"])
        laws = tuple(ComputeLaw(E=params[f"{d}.E"], A=params[f"{d}.A"], alpha=params[f"{d}.alpha"]) for d in domains)
        return cls(domains=domains, weights=tuple(float(w) for w in config["weights"]), laws=laws)
