"""Task-accuracy laws (Bhagia et al. 2024, "Establishing Task Scaling Laws via Compute-Efficient Model
Ladders"): accuracy as a sigmoid of a loss, and the chains that carry (N, D) to accuracy.

The laws only predict; fits.tasks fits them and fits.tasks_forecast chooses among them.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from fits.laws.chinchilla import ChinchillaLaw

SIGMOID_PARAMS = ("a", "k", "L0", "b")
BOUNDED_PARAMS = ("k", "L0")
SINGLE_STEP_PARAMS = ("e", "A", "B", "alpha", "beta")


def _expit(z):
    return 0.5 * (1.0 + np.tanh(0.5 * np.asarray(z, dtype=np.float64)))  # overflow-free logistic


@dataclass(frozen=True)
class SigmoidLaw:
    """Acc(L) = a / (1 + exp(-k (L - L0))) + b: the paper's step 2, four free parameters
    (a < 0 makes accuracy fall as the loss rises)."""

    a: float
    k: float
    L0: float
    b: float

    name = "task_sigmoid"

    def predict(self, L) -> np.ndarray:
        return self.a * _expit(self.k * (np.asarray(L, dtype=np.float64) - self.L0)) + self.b

    def params(self) -> dict[str, float]:
        return {k: float(getattr(self, k)) for k in SIGMOID_PARAMS}


@dataclass(frozen=True)
class BoundedSigmoidLaw:
    """Acc(L) = chance + (1 - chance) / (1 + exp(k (L - L0))): the same sigmoid with its floor at the
    task's chance accuracy and its ceiling at 1, so only where it turns (L0) and how fast (k) are
    fitted; a ladder far below the target's accuracy then cannot place the ceiling too low."""

    k: float
    L0: float
    chance: float

    name = "task_sigmoid_bounded"

    def predict(self, L) -> np.ndarray:
        return self.chance + (1.0 - self.chance) * _expit(-self.k * (np.asarray(L, dtype=np.float64) - self.L0))

    def params(self) -> dict[str, float]:
        return {k: float(getattr(self, k)) for k in BOUNDED_PARAMS}


def step2_law(params: dict[str, float], chance: float | None):
    """The step-2 law a FitResult's parameters describe: bounded when a chance level is set."""
    if chance is None:
        return SigmoidLaw(**{k: params[k] for k in SIGMOID_PARAMS})
    return BoundedSigmoidLaw(k=params["k"], L0=params["L0"], chance=float(chance))


@dataclass(frozen=True)
class TaskChainLaw:
    """(N, D) -> a loss (Chinchilla form, step 1) -> accuracy (a sigmoid, step 2). The loss is the
    task's own (bits per byte of the correct continuation) or another intermediate (e.g. C4 loss)."""

    step1: ChinchillaLaw
    step2: SigmoidLaw | BoundedSigmoidLaw

    name = "task_chain"

    def loss(self, N, D) -> np.ndarray:
        return self.step1.predict(N, D)

    def predict(self, N, D) -> np.ndarray:
        return self.step2.predict(self.step1.predict(N, D))

    def params(self) -> dict[str, float]:
        return {**{f"step1_{k}": v for k, v in self.step1.params().items()},
                **{f"step2_{k}": v for k, v in self.step2.params().items()}}

    @classmethod
    def from_params(cls, params: dict[str, float], config: dict) -> TaskChainLaw:
        s1 = ChinchillaLaw(**{k: params[f"step1_{k}"] for k in ("E", "A", "B", "alpha", "beta")})
        s2 = step2_law({k[len("step2_"):]: v for k, v in params.items() if k.startswith("step2_")},
                       config.get("chance"))
        return cls(step1=s1, step2=s2)


@dataclass(frozen=True)
class SingleStepLaw:
    """Acc(N, D) = chance + (1 - chance) / (1 + exp(e + A / N^alpha + B / D^beta)): the paper's
    single-step variant, the Chinchilla form inside a chance-to-1 sigmoid, fitted on the runs' finals
    (the sigmoid's own scale and offset fold into e, A and B)."""

    e: float
    A: float
    B: float
    alpha: float
    beta: float
    chance: float

    name = "task_single_step"

    def predict(self, N, D) -> np.ndarray:
        N = np.asarray(N, dtype=np.float64)
        D = np.asarray(D, dtype=np.float64)
        z = self.e + self.A * N ** -self.alpha + self.B * D ** -self.beta
        return self.chance + (1.0 - self.chance) * _expit(-z)

    def params(self) -> dict[str, float]:
        return {k: float(getattr(self, k)) for k in SINGLE_STEP_PARAMS}

    @classmethod
    def from_params(cls, params: dict[str, float], config: dict) -> SingleStepLaw:
        return cls(**{k: params[k] for k in SINGLE_STEP_PARAMS}, chance=float(config["chance"]))
