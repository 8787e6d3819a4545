"""The interval of a final-loss prediction, calibrated for extrapolation and carrying seed noise."""

from __future__ import annotations

import math

import numpy as np
from scipy.stats import norm


def prediction_interval(central: float, boot: np.ndarray, backtest: dict, decades: float, level: float,
                        seed: dict | None = None) -> tuple[float, float, dict]:
    """An interval calibrated for extrapolation, in log loss.

    sigma^2 = sigma_boot^2 + (e_bt * decades / decades_bt)^2 + sigma_seed_fit^2 + sigma_seed^2, where
    sigma_boot is the bootstrap's percentile width as a normal sigma, e_bt the log error of the
    backtest at its own distance, sigma_seed the seed noise of one run (the hero is one seed:
    measured from replicas, else the prior of ladder.analysis.seeds) and sigma_seed_fit that noise
    on every rung carried through the refit to the target. Resampling alone captures parameter
    noise, not the error of extrapolating (on Chinchilla a plain bootstrap band covered 18% of
    held-out runs), so the backtest's miss is carried along; and one backtest is one seed's draw,
    so the seed spread is carried beside it rather than assumed zero.
    """
    z = float(norm.ppf(0.5 + level / 2))
    sig_boot = 0.0
    if boot.size > 10:
        lo, hi = np.percentile(np.log(boot), [50 * (1 - level), 50 * (1 + level)])
        sig_boot = float((hi - lo) / (2 * z))
    sig_bt = 0.0
    if backtest.get("ok"):
        e = abs(math.log1p(backtest["relative_error"]))
        sig_bt = max(e, 0.005) * max(decades, 0.0) / max(backtest["decades"], 1e-3)
    seed = seed or {}
    sig_seed = float(seed.get("sigma") or 0.0)
    sig_seed_fit = float(seed.get("sigma_fit") or 0.0)
    sig = math.sqrt(sig_boot ** 2 + sig_bt ** 2 + sig_seed ** 2 + sig_seed_fit ** 2)
    info = {"sigma_bootstrap": sig_boot, "sigma_extrapolation": sig_bt, "sigma_seed": sig_seed,
            "sigma_seed_fit": sig_seed_fit, "seed_source": seed.get("source"), "z": z,
            "method": "bootstrap over rungs (+) backtest log error scaled by extrapolation distance (+) seed noise: "
                      "the target's own seed and every rung's carried through the refit"
                      + (f" ({seed['source']})" if seed.get("source") else "")}
    return central * math.exp(-z * sig), central * math.exp(z * sig), info
