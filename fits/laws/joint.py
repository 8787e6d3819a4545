"""A curve law whose parameters are power laws in N; fits.joint fits it."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fits.laws.curves import MULTIPOWER_PARAMS, TISSUE_PARAMS, curve_law


@dataclass(frozen=True)
class JointCurveLaw:
    """A curve law whose parameters are power laws in N (see the module docstring)."""

    base: str
    ref: dict  # parameter -> value at N_ref
    exps: dict  # varied parameter -> exponent q
    N_ref: float
    config: dict

    def at(self, N: float):
        """The single-size curve law at N."""
        s = float(N) / self.N_ref
        params = {k: v * s ** self.exps.get(k, 0.0) for k, v in self.ref.items()}
        return curve_law(self.base, params, self.config)

    def predict(self, N, step, lr, at=None) -> np.ndarray:
        return self.at(N).predict(step, lr, at=at)

    @classmethod
    def from_params(cls, base: str, params: dict, config: dict) -> JointCurveLaw:
        names = MULTIPOWER_PARAMS if base == "multipower" else TISSUE_PARAMS
        ref = {k: params[k] for k in names}
        exps = {k[: -len("_exp")]: v for k, v in params.items() if k.endswith("_exp")}
        return cls(base=base, ref=ref, exps=exps, N_ref=float(config["N_ref"]), config=config)
