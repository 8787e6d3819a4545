"""The IsoFLOP law (Hoffmann et al. 2022, Approach 2): N_opt(C), D_opt(C) and L_opt(C); fits.isoflop fits it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PARAM_NAMES = ("a", "b", "N0", "D0", "C0")



@dataclass(frozen=True)
class IsoFlopLaw:
    """N_opt = N0 (C/C0)^a, D_opt = D0 (C/C0)^b (Hoffmann et al. 2022, Approach 2),
    with L_opt(C) = E + A C^-alpha through the parabola minima (when fitted)."""

    a: float
    b: float
    N0: float
    D0: float
    C0: float
    E: float = float("nan")
    A: float = float("nan")
    alpha: float = float("nan")

    name = "isoflop"

    def compute_optimal(self, C) -> tuple[np.ndarray, np.ndarray]:
        c = np.asarray(C, dtype=np.float64) / self.C0
        return self.N0 * c ** self.a, self.D0 * c ** self.b

    def predict(self, C) -> np.ndarray:
        """Loss at the compute-optimal allocation of budget C (from the vertex losses)."""
        if not np.isfinite(self.A):
            raise ValueError("this isoFLOP fit has fewer than 3 budgets, so no L_opt(C) law was fit")
        C = np.asarray(C, dtype=np.float64)
        return self.E + self.A * C ** -self.alpha

    def params(self) -> dict[str, float]:
        return {k: float(getattr(self, k)) for k in ("a", "b", "N0", "D0", "C0", "E", "A", "alpha")}
