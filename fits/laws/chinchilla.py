"""Chinchilla L(N, D) = E + A / N^alpha + B / D^beta (Hoffmann et al. 2022): the law; fits.chinchilla fits it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

PARAM_NAMES = ("E", "A", "B", "alpha", "beta")



@dataclass(frozen=True)
class ChinchillaLaw:
    """L(N, D) = E + A / N^alpha + B / D^beta (Hoffmann et al. 2022, eq. 2).

    N is the (active, for MoE) parameter count, D the number of training tokens.
    """

    E: float
    A: float
    B: float
    alpha: float
    beta: float

    name = "chinchilla"

    def predict(self, N, D) -> np.ndarray:
        N = np.asarray(N, dtype=np.float64)
        D = np.asarray(D, dtype=np.float64)
        return self.E + self.A * N ** -self.alpha + self.B * D ** -self.beta

    def compute_optimal(self, C, flops_per_param_token: float = 6.0) -> tuple[np.ndarray, np.ndarray]:
        """N_opt, D_opt minimising L under C = k N D (Hoffmann et al. 2022, Appendix D.2).

        dL/dN = 0 on the constraint gives alpha A N^-alpha = beta B D^-beta, hence
        N_opt = G (C/k)^(beta/(alpha+beta)), D_opt = (C/k)^(alpha/(alpha+beta)) / G,
        G = (alpha A / (beta B))^(1/(alpha+beta)).
        """
        c = np.asarray(C, dtype=np.float64) / flops_per_param_token
        s = self.alpha + self.beta
        G = (self.alpha * self.A / (self.beta * self.B)) ** (1.0 / s)
        return G * c ** (self.beta / s), c ** (self.alpha / s) / G

    def params(self) -> dict[str, float]:
        return {k: float(getattr(self, k)) for k in PARAM_NAMES}

    @classmethod
    def from_theta(cls, theta) -> ChinchillaLaw:
        a, b, e, alpha, beta = (float(v) for v in theta)
        return cls(E=np.exp(e), A=np.exp(a), B=np.exp(b), alpha=alpha, beta=beta)

    def theta(self) -> np.ndarray:
        return np.array([np.log(self.A), np.log(self.B), np.log(self.E), self.alpha, self.beta])
