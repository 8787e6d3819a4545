"""FitResult: what every fit returns, in the manner of scipy.optimize.OptimizeResult.

It carries the fitted parameters, the objective at the optimum, diagnostics (starts, convergence,
points), optional bootstrap samples and percentile intervals, optional extrapolation calibration,
and serialises to JSON (FIT.json) and back so `ladder predict` can rebuild the law.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, field, replace
from typing import Any

import numpy as np

FORMAT_VERSION = 1


@dataclass(frozen=True)
class FitResult:
    """A fitted law.

    law: registry name ("chinchilla", "compute", "isoflop", "multipower", "tissue", "joint_multipower").
    params: the law's parameters by name.
    objective: the fit's loss at the optimum (its definition is in diagnostics["loss"]).
    n_points, n_starts, converged: what the optimiser saw and whether it stopped on its tolerances.
    config: law settings that are not fitted (a pinned E, the flops multiplier, warmup handling).
    samples: bootstrap parameter samples, {name: [values]} (resampled runs, refit each).
    ci: {name: [2.5th, 97.5th percentile]} from samples.
    calibration: the extrapolation-error model of fits.uncertainty.calibrate, if one was fitted.
    """

    law: str
    params: dict[str, float]
    objective: float
    n_points: int
    n_starts: int = 1
    converged: bool = True
    diagnostics: dict[str, Any] = field(default_factory=dict)
    config: dict[str, Any] = field(default_factory=dict)
    samples: dict[str, list[float]] | None = None
    ci: dict[str, list[float]] | None = None
    calibration: dict[str, Any] | None = None

    def model(self):
        """The law object (with .predict) for these parameters."""
        from fits.laws.registry import build_law

        return build_law(self.law, self.params, self.config)

    def sample_models(self) -> list:
        """One law object per bootstrap sample (empty when there are no samples)."""
        from fits.laws.registry import build_law

        if not self.samples:
            return []
        n = len(next(iter(self.samples.values())))
        return [build_law(self.law, {k: v[i] for k, v in self.samples.items()}, self.config) for i in range(n)]

    def predict(self, *args, **kwargs) -> np.ndarray:
        return self.model().predict(*args, **kwargs)

    def summary(self) -> str:
        """A few lines for a reader: the law, what it was fit on, each parameter with its interval,
        and how a predicted band would be made (band_method)."""
        level = (self.diagnostics.get("bootstrap") or {}).get("level")
        lines = [f"{self.law} law on {self.n_points} points: objective {self.objective:.6g}, "
                 f"{self.n_starts} start(s), {'converged' if self.converged else 'NOT converged'}"]
        for k, v in self.params.items():
            ci = (self.ci or {}).get(k)
            pinned = " (pinned)" if k == "E" and self.config.get("pin_E") is not None else ""
            prior = self.config.get("E_prior") if k == "E" else None
            if prior:
                pinned = f" (prior {prior['mean']:g} +- {prior['sd']:g}, weighed at the rungs' scatter {prior['sigma']:.2%})"
            band = f"   {level:.0%} [{ci[0]:.6g}, {ci[1]:.6g}]" if ci and level else ""
            lines.append(f"  {k:>6} = {v:.6g}{pinned}{band}")
        lines.append(f"bands: {band_method(self)['text']}")
        return "\n".join(lines)

    def with_(self, **changes) -> FitResult:
        return replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["format_version"] = FORMAT_VERSION
        return _jsonable(d)

    def to_json(self, indent: int | None = 1) -> str:
        return json.dumps(self.to_dict(), indent=indent, allow_nan=False)

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> FitResult:
        d = dict(d)
        version = d.pop("format_version", FORMAT_VERSION)
        if version != FORMAT_VERSION:
            raise ValueError(f"FIT format_version {version} is not supported (expected {FORMAT_VERSION})")
        missing = {"law", "params", "objective", "n_points"} - d.keys()
        if missing:
            raise ValueError(f"not a fit: missing key(s) {sorted(missing)}")
        known = {f for f in cls.__dataclass_fields__}
        unknown = set(d) - known
        if unknown:
            raise ValueError(f"not a fit: unknown key(s) {sorted(unknown)}")
        # JSON has no NaN: _jsonable wrote unset parameters (e.g. an isoFLOP fit's L_opt law) as null.
        d["params"] = {k: float("nan") if v is None else float(v) for k, v in d["params"].items()}
        return cls(**d)

    @classmethod
    def from_json(cls, text: str) -> FitResult:
        return cls.from_dict(json.loads(text))


def band_method(result: FitResult) -> dict:
    """How prediction_band's interval for this result is made, for a reader of the numbers:
    kind "calibrated" (bootstrap, if any, widened by the measured extrapolation error and the
    scatter of single runs), "bootstrap" (parameter noise only: too narrow far from the data),
    or "none" (a bare fit: lower = upper = loss)."""
    boot = (result.diagnostics or {}).get("bootstrap", {})
    n_boot = int(boot.get("n_resamples", 0)) if result.samples else 0
    cal = result.calibration
    if cal:
        text = (f"calibrated: {'bootstrap over ' + str(n_boot) + ' resamples, ' if n_boot else ''}"
                f"widened by the extrapolation error of {len(cal['cutoffs'])} nested backtests "
                f"({cal['n_predictions']} held-out predictions: {cal['per_decade']:.4f} log-loss per decade "
                f"beyond the fitted runs) and the scatter of single runs ({cal['sigma0']:.4f})")
        return {"kind": "calibrated", "n_resamples": n_boot, "text": text, **{k: cal[k] for k in (
            "per_decade", "sigma0", "n_predictions", "max_flops")}}
    uncal = (result.diagnostics or {}).get("uncalibrated")
    if n_boot:
        text = (f"bootstrap only: {n_boot} resamples of the runs, parameter noise alone; it does not "
                "carry the error of extrapolating, so far beyond the data it is too narrow"
                + (f" ({uncal})" if uncal else ""))
        return {"kind": "bootstrap", "n_resamples": n_boot, "text": text}
    return {"kind": "none", "n_resamples": 0,
            "text": "no interval: the fit has neither a bootstrap nor a calibration (lower = upper = loss)"}


def _jsonable(x):
    """Plain JSON types; non-finite floats become None (JSON has no NaN)."""
    if isinstance(x, dict):
        return {str(k): _jsonable(v) for k, v in x.items()}
    if isinstance(x, (list, tuple)):
        return [_jsonable(v) for v in x]
    if isinstance(x, np.ndarray):
        return _jsonable(x.tolist())
    if isinstance(x, (np.bool_, bool)):
        return bool(x)
    if isinstance(x, (np.integer, int)):
        return int(x)
    if isinstance(x, (np.floating, float)):
        v = float(x)
        return v if math.isfinite(v) else None
    return x
