"""Whole-curve laws, loss against step under a learning-rate schedule: the Multi-Power Law (Luo et al.
2025) and the LR-annealing law (Tissue et al. 2024), and the curve reduced to what they read
(PreparedCurve). fits.curves fits them; see its docstring for the equations."""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from fits.schedule import Schedule, area_since, build

MULTIPOWER_PARAMS = ("L0", "A", "alpha", "B", "C", "beta", "gamma")

TISSUE_PARAMS = ("L0", "A", "alpha", "C")

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
    # WSD curve's points) a row's annealing term is exactly 0, so the law's matrix work skips it
    # (bit-identical results, a fraction of the work on a WSD curve).
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
