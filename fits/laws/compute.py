"""The compute law L(C) = E + A C^-alpha (Kaplan et al. 2020; Hoffmann et al. 2022's E); fits.compute fits it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PARAM_NAMES = ("E", "A", "alpha")



@dataclass(frozen=True)
class ComputeLaw:
    """L(C) = E + A C^-alpha (Kaplan et al. 2020; Hoffmann et al. 2022's E). C in FLOPs."""

    E: float
    A: float
    alpha: float

    name = "compute"

    def predict(self, C) -> np.ndarray:
        C = np.asarray(C, dtype=np.float64)
        return self.E + self.A * C ** -self.alpha

    def params(self) -> dict[str, float]:
        return {"E": float(self.E), "A": float(self.A), "alpha": float(self.alpha)}
