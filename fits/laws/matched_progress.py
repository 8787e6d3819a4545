"""Laws of a run's loss against its fraction of training and its compute: ProgressLaw (one surface)
and PerFractionLaw (one compute law per fraction); fits.matched_progress fits them."""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

LOG_C0 = math.log(1e21)  # centres ln C so the polynomial coefficients are of order one



@dataclass(frozen=True)
class ProgressLaw:
    E: float
    a: tuple[float, ...]  # polynomial in u = ln g, highest power first (numpy.polyval order)
    b: tuple[float, ...]

    def predict(self, frac, flops) -> np.ndarray:
        u = np.log(np.asarray(frac, dtype=float))
        x = np.log(np.asarray(flops, dtype=float)) - LOG_C0
        return self.E + np.exp(np.polyval(self.a, u) + np.polyval(self.b, u) * x)

    @staticmethod
    def from_params(params: dict[str, float], config: dict) -> ProgressLaw:
        k = int(config["degree"])
        return ProgressLaw(E=params["E"], a=tuple(params[f"a{i}"] for i in range(k + 1)),
                           b=tuple(params[f"b{i}"] for i in range(k + 1)))



@dataclass(frozen=True)
class PerFractionLaw:
    E: float
    fracs: tuple[float, ...]
    log_A: tuple[float, ...]
    alpha: tuple[float, ...]

    def predict(self, frac, flops) -> np.ndarray:
        g = np.asarray(frac, dtype=float)
        la = np.interp(g, self.fracs, self.log_A)
        al = np.interp(g, self.fracs, self.alpha)
        return self.E + np.exp(la - al * np.log(np.asarray(flops, dtype=float)))

    @staticmethod
    def from_params(params: dict[str, float], config: dict) -> PerFractionLaw:
        return PerFractionLaw(E=params["E"], fracs=tuple(config["fracs"]), log_A=tuple(config["log_A"]),
                              alpha=tuple(config["alpha"]))
