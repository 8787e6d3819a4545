"""Whole-curve laws: loss as a function of the learning-rate schedule.

- Multi-Power Law (Luo et al. 2025, "A Multi-Power Law for Loss Curve Prediction Across Learning
  Rate Schedules", ICLR 2025):
      L(t) = L0 + A (S1(t) + S_W)^-alpha - LD(t),
      LD(t) = B sum_k (eta_{k-1} - eta_k) G(eta_k^-gamma S_k(t)),  G(x) = 1 - (C x + 1)^-beta,
      S_k(t) = sum_{tau=k..t} eta_tau.
  Here S1(t) + S_W is the running sum of lr from step 0, warmup included, and the sum over k runs
  over the decay after the peak lr.
- LR-annealing law (Tissue et al. 2024, "Scaling Law with Learning Rate Annealing"):
      L(s) = L0 + A S1^-alpha - C S2,  S1 = sum_{i<=s} eta_i,  S2 = sum_{i<=s} m_i,
      m_i = lam m_{i-1} + (eta_{i-1} - eta_i)   (lam = 0.999 by default, not fitted).

Both are fit on one or more (step, lr, loss) curves with the paper's loss: Huber (delta 1e-3) on
log loss residuals, summed over points, parameters in log space (all are positive), L-BFGS with
analytic gradients from a small grid of starts; and predict the curve of any other schedule.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass, field

import numpy as np
import pandas as pd

from fits.chinchilla import HUBER_DELTA
from fits.lbfgs import best_starts, multistart
from fits.result import FitResult
from fits.schedule import Schedule, area_since, build

MULTIPOWER_PARAMS = ("L0", "A", "alpha", "B", "C", "beta", "gamma")
TISSUE_PARAMS = ("L0", "A", "alpha", "C")
MIN_POINTS = {"multipower": 8, "tissue": 5}
DEFAULT_BLOCK = 16  # steps per drop event: finer than any logging interval worth fitting


@dataclass(frozen=True)
class MultiPowerLaw:
    """Multi-Power Law, Luo et al. 2025 (ICLR), eq. (4) of the paper; see the module docstring."""

    L0: float
    A: float
    alpha: float
    B: float
    C: float
    beta: float
    gamma: float
    warmup: str = "linear"
    block: int = DEFAULT_BLOCK

    name = "multipower"

    def params(self) -> dict[str, float]:
        return {k: float(getattr(self, k)) for k in MULTIPOWER_PARAMS}

    def predict(self, step, lr, at=None) -> np.ndarray:
        """Loss at each step of `at` (default: the given steps) for the schedule (step, lr)."""
        c = prepare_curve(step, lr, None, at=at, law="multipower", warmup=self.warmup, block=self.block)
        # A parameter the fit drove below float range is stored as 0: its log is exactly -inf, and the law
        # gives that parameter's limit, so the division by zero is no error (it warned on every predict).
        with np.errstate(divide="ignore"):
            theta = np.log([getattr(self, k) for k in MULTIPOWER_PARAMS])
        return np.exp(mpl_logpred(theta, c)[0])


@dataclass(frozen=True)
class TissueLaw:
    """LR-annealing law, Tissue et al. 2024, L = L0 + A S1^-alpha - C S2; see the module docstring."""

    L0: float
    A: float
    alpha: float
    C: float
    lam: float = 0.999
    warmup: str = "linear"

    name = "tissue"

    def params(self) -> dict[str, float]:
        return {k: float(getattr(self, k)) for k in TISSUE_PARAMS}

    def predict(self, step, lr, at=None) -> np.ndarray:
        c = prepare_curve(step, lr, None, at=at, law="tissue", warmup=self.warmup, lam=self.lam)
        with np.errstate(divide="ignore"):  # a parameter stored as 0, as in MultiPowerLaw.predict
            theta = np.log([getattr(self, k) for k in TISSUE_PARAMS])
        return np.exp(tissue_logpred(theta, c)[0])


def curve_law(name: str, params: dict[str, float], config: dict | None = None):
    config = config or {}
    if name == "multipower":
        return MultiPowerLaw(**{k: params[k] for k in MULTIPOWER_PARAMS}, warmup=config.get("warmup", "linear"),
                             block=int(config.get("block", DEFAULT_BLOCK)))
    if name == "tissue":
        return TissueLaw(**{k: params[k] for k in TISSUE_PARAMS}, lam=float(config.get("lam", 0.999)),
                         warmup=config.get("warmup", "linear"))
    raise ValueError(f"unknown curve law {name!r}; choose multipower or tissue")


@dataclass(frozen=True)
class PreparedCurve:
    """A curve reduced to what a law's objective needs at its evaluation steps."""

    t: np.ndarray  # evaluation steps
    logL: np.ndarray | None  # log loss at t (None for a pure prediction)
    S1: np.ndarray  # running lr sum at t
    # multipower: drop-event sizes, log eta at events, and S_k(t) (n_t, n_events), 0 where k > t
    delta: np.ndarray = field(default_factory=lambda: np.zeros(0))
    log_eta: np.ndarray = field(default_factory=lambda: np.zeros(0))
    Sk: np.ndarray = field(default_factory=lambda: np.zeros((0, 0)))
    S2: np.ndarray = field(default_factory=lambda: np.zeros(0))  # tissue
    # Derived from Sk: the rows with some event reached, and Sk on them. Before the decay (most of a
    # WSD curve's points) a row's annealing term is exactly 0, so the law's matrix work skips it:
    # on the default ladder's curves 20% of rows, its curve fit 14.6 -> 7.1 s, bit-identical.
    reached_rows: np.ndarray = field(init=False, repr=False)
    Sk_reached: np.ndarray = field(init=False, repr=False)

    def __post_init__(self):
        rows = np.flatnonzero((self.Sk > 0).any(axis=1))
        object.__setattr__(self, "reached_rows", rows)
        object.__setattr__(self, "Sk_reached", self.Sk[rows])


def prepare_curve(step, lr, loss=None, *, at=None, law="multipower", warmup="linear", block=DEFAULT_BLOCK,
                  lam=0.999) -> PreparedCurve:
    step = np.asarray(step, dtype=np.int64)
    t = step if at is None else np.asarray(at, dtype=np.int64)
    sched: Schedule = build(step, lr, warmup=warmup, block=block, until=int(t.max()))
    logL = None if loss is None else np.log(np.asarray(loss, dtype=np.float64))
    S1 = sched.cum[t]
    if law == "tissue":
        d = np.zeros_like(sched.eta)
        d[1:] = sched.eta[:-1] - sched.eta[1:]
        d[: sched.peak + 1] = 0.0  # the warmup's rise is not annealing
        m = momentum(d, lam)
        return PreparedCurve(t=t, logL=logL, S1=S1, S2=np.cumsum(m)[t])
    # Only events that some evaluation step has reached matter. A drop to an lr of exactly 0 adds
    # nothing: the model no longer moves, so no loss drop develops from it (S_k = 0; for gamma < 1 also
    # the law's limit of a vanishing lr). Kept, eta_k^-gamma S_k was 0 * inf: NaN in the gradient.
    keep = (sched.ev_k <= t.max()) & (sched.ev_eta > 0)
    k = sched.ev_k[keep]
    return PreparedCurve(t=t, logL=logL, S1=S1, delta=sched.ev_delta[keep], log_eta=np.log(sched.ev_eta[keep]),
                         Sk=area_since(sched, k, t))


def momentum(d: np.ndarray, lam: float) -> np.ndarray:
    """m_i = lam m_{i-1} + d_i (m_{-1} = 0), the annealing momentum of Tissue et al.

    A first-order recursion, solved in closed form block by block: inside a block starting at s,
    m_{s+j} = lam^j (m_{s-1} lam + sum_{i<=j} lam^-i d_{s+i}). Blocks are short enough that
    lam^-j stays below 1e8, so the cumulative sum loses no more than a Python loop would. (This
    replaces scipy.signal.lfilter, whose import alone cost about a second of every command.)
    """
    d = np.asarray(d, dtype=np.float64)
    out = np.empty_like(d)
    if not 0.0 < lam < 1.0:
        raise ValueError(f"lam must lie in (0, 1), got {lam}")
    block = max(1, int(np.log(1e8) / -np.log(lam)))
    powers = lam ** np.arange(min(block, d.size), dtype=np.float64)
    carry = 0.0
    for s in range(0, d.size, block):
        seg = d[s:s + block]
        p = powers[: seg.size]
        out[s:s + seg.size] = p * (carry * lam + np.cumsum(seg / p))
        carry = out[s + seg.size - 1]
    return out


def mpl_logpred(theta: np.ndarray, c: PreparedCurve, want_grad: bool = False):
    """log prediction at c.t and (optionally) d log pred / d theta, theta = log params (7,)."""
    L0, A, alpha, B, C, beta, gamma = np.exp(theta)
    logS = np.log(c.S1)
    powA = A * np.exp(-alpha * logS)
    rows = c.reached_rows
    LD = np.zeros_like(logS)
    if rows.size:  # the annealing term, on the rows where some drop has been reached (0 elsewhere)
        x = c.Sk_reached * np.exp(-gamma * c.log_eta)[None, :]  # eta_k^-gamma S_k(t)
        u = 1.0 + C * x
        logu = np.log(u)
        u_mb = np.exp(-beta * logu)  # u^-beta
        reached = c.Sk_reached > 0
        # The product on the whole (t, k) matrix, zero rows included: BLAS rounds a row's dot product
        # by where it falls in the matrix, and the degenerate ridges of these fits amplify that.
        G = np.zeros(c.Sk.shape)
        G[rows] = np.where(reached, 1.0 - u_mb, 0.0)
        LD = B * (G @ c.delta)
    pred = L0 + powA - LD
    logpred = np.log(pred)
    if not want_grad:
        return logpred, None
    J = np.zeros((pred.size, 7))
    J[:, 0] = L0
    J[:, 1] = powA
    J[:, 2] = -powA * logS * alpha
    if rows.size:
        w = np.where(reached, u_mb / u, 0.0) * c.delta[None, :]  # delta_k u^{-beta-1}
        bx = beta * x * w
        J[:, 3] = -LD
        J[rows, 4] = -B * C * bx.sum(axis=1)
        J[rows, 5] = -B * beta * (np.where(reached, u_mb, 0.0) * logu * c.delta[None, :]).sum(axis=1)
        # dx/dgamma = -log(eta_k) x
        J[rows, 6] = B * C * gamma * (bx * c.log_eta[None, :]).sum(axis=1)
    return logpred, J / pred[:, None]


def tissue_logpred(theta: np.ndarray, c: PreparedCurve, want_grad: bool = False):
    L0, A, alpha, C = np.exp(theta)
    logS = np.log(c.S1)
    powA = A * np.exp(-alpha * logS)
    pred = L0 + powA - C * c.S2
    logpred = np.log(pred)
    if not want_grad:
        return logpred, None
    J = np.stack([np.full_like(pred, L0), powA, -powA * logS * alpha, -C * c.S2], axis=1)
    return logpred, J / pred[:, None]


def _objective_single(theta, curves, logpred_fn, delta=HUBER_DELTA):
    f = 0.0
    g = np.zeros(theta.size)
    with np.errstate(over="ignore", invalid="ignore", divide="ignore"):
        for c in curves:
            lp, J = logpred_fn(theta, c, True)
            r = lp - c.logL
            cl = np.clip(r, -delta, delta)
            f += float(np.sum(cl * (r - 0.5 * cl)))
            g += cl @ J
    if not np.isfinite(f) or not np.all(np.isfinite(g)):
        return np.inf, np.zeros_like(g)
    return f, g


def curve_starts(curves_df: list[pd.DataFrame], law: str) -> np.ndarray:
    """A small grid around a power-law fit of the constant-lr part of the data."""
    loss = np.concatenate([d["loss"].to_numpy(float) for d in curves_df])
    lmin = loss.min()
    rows = []
    if law == "multipower":
        for f0, alpha, B, C, beta, gamma in itertools.product(
            (0.75, 0.9), (0.3, 0.5), (300.0, 600.0), (1.0, 3.0), (0.5,), (0.5,)
        ):
            L0 = f0 * lmin
            A = (loss.max() - L0) * 0.1  # rough: S1 ~ 0.5 at the first logged point
            rows.append(np.log([L0, A, alpha, B, C, beta, gamma]))
    else:
        for f0, alpha, C in itertools.product((0.7, 0.85, 0.95), (0.3, 0.5, 0.8), (1.0, 30.0)):
            L0 = f0 * lmin
            A = (loss.max() - L0) * 0.1
            rows.append(np.log([L0, A, alpha, C]))
    return np.array(rows)


def fit_curves(curves, law: str = "multipower", *, names=None, warmup: str = "linear",
               block: int = DEFAULT_BLOCK, lam: float = 0.999, starts=None, n_polish: int = 4) -> FitResult:
    """Fit a whole-curve law to curves: DataFrames (or dicts) with step, lr, loss.

    Returns a FitResult (law "multipower" or "tissue"); result.model().predict(step, lr) gives
    the loss curve of any schedule, and predict_schedule(result, df) does the same for a frame.
    """
    if law not in MIN_POINTS:
        raise ValueError(f"unknown curve law {law!r}; choose multipower or tissue")
    frames = [pd.DataFrame(c) for c in curves]
    if not frames:
        raise ValueError("no curves given")
    for i, d in enumerate(frames):
        for col in ("step", "lr", "loss"):
            if col not in d.columns:
                raise ValueError(f"curve {i} has no '{col}' column")
    n_points = sum(len(d) for d in frames)
    if n_points < MIN_POINTS[law]:
        raise ValueError(f"{n_points} points; the {law} law needs at least {MIN_POINTS[law]}")
    prepared = [prepare_curve(d["step"], d["lr"], d["loss"], law=law, warmup=warmup, block=block, lam=lam)
                for d in frames]
    logpred_fn = mpl_logpred if law == "multipower" else tissue_logpred
    x0 = curve_starts(frames, law) if starts is None else np.log(np.asarray(starts, dtype=np.float64))

    def fun(X, rows):
        out = [_objective_single(x, prepared, logpred_fn) for x in X]
        return np.array([o[0] for o in out]), np.array([o[1] for o in out])

    # The best few starts are taken to convergence. The batched L-BFGS copes with the non-finite
    # objective of a trial step (a negative prediction), which scipy's line search does not; scipy
    # then polishes the best end point.
    best, best_f, best_ok, batch = multistart(fun, best_starts(fun, x0, n_polish), n_polish=1, max_iter=1000, ftol=1e-12)
    tried = batch.f
    if best is None or not np.isfinite(best_f):
        raise ValueError("no start reached a finite objective; check that losses and learning rates are positive")
    names_ = MULTIPOWER_PARAMS if law == "multipower" else TISSUE_PARAMS
    params = dict(zip(names_, (float(v) for v in np.exp(best)), strict=True))
    config = {"warmup": warmup}
    if law == "multipower":
        config["block"] = int(block)
    else:
        config["lam"] = float(lam)
    return FitResult(
        law=law, params=params, objective=float(best_f), n_points=int(n_points), n_starts=int(len(x0)),
        converged=best_ok,
        diagnostics={"loss": f"sum huber(delta={HUBER_DELTA}) of log residuals", "n_curves": len(frames),
                     "curves": list(names) if names is not None else None,
                     "start_objectives": sorted(float(v) for v in tried)[:5]},
        config=config,
    )


def predict_schedule(result: FitResult, schedule, at=None) -> np.ndarray:
    """Loss predicted by a curve fit at each row (or at `at`) of a schedule frame (step, lr)."""
    df = pd.DataFrame(schedule)
    return result.model().predict(df["step"].to_numpy(), df["lr"].to_numpy(), at=at)
