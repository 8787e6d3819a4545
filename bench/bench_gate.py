"""How often the gate's noise rule blocks a right law: ladders of the default layout redrawn from a known law.

A ladder spec's layout (bench/simulated.py: experiments/tiny.py unless BENCH_SPEC names another, its
sizes, seeds a size, hero distance and true law changeable there), every run's final loss the known law
times its seed's luck, N(0, sigma) in log loss. The band's half-width is q times the spread of the backtest under redrawn
ladders (ladder.analysis.backtests.backtest_noise), and that spread is proportional to the ladder's
measured sigma: so a few ladders go through the tool's own band to measure the ratio (spread over
sigma-hat), and many cheap ladders (a backtest fit and the fit step's sigma-hat each: the replicas' spread, or with
one seed a size the sizes' scatter about the final law) give the block rate with the band as that
ratio, resampled, times their own sigma-hat. Printed: the backtest error's true spread, the block
rate for the normal and the Student-t quantile at the sigma-hat's degrees of freedom, with standard
errors, and the rate among ladders whose sigma-hat came out low.
Environment: BENCH_GATE_LADDERS (default 2000 cheap ladders; the bench prints its own time),
BENCH_GATE_FULL (default 12 ladders through the band), BENCH_GATE_SIGMA
(default 0.007), and bench/simulated.py's. Run: ``python -m bench gate``.
"""

from __future__ import annotations

import math
import os

import numpy as np

from bench.simulated import simulated


def main() -> None:
    from scipy.stats import norm, t

    from ladder.analysis.backtests import backtest_at_ratio, backtest_noise
    from ladder.analysis.finals import fit_final_law
    from ladder.analysis.seeds import seed_noise

    n = int(os.environ.get("BENCH_GATE_LADDERS", "2000"))
    n_full = int(os.environ.get("BENCH_GATE_FULL", "12"))
    sigma = float(os.environ.get("BENCH_GATE_SIGMA", "0.007"))
    sim = simulated(bootstrap=200)
    fit, ratio = sim.fit, sim.hero_ratio
    rng = np.random.default_rng(2026)
    ratios = []
    for _ in range(n_full):
        p = sim.draw(sigma, rng)
        bt = backtest_at_ratio(p, fit, ratio)
        noise = backtest_noise(p, fit, bt, fit_final_law(p, fit), n=64)  # as the fit step draws it
        if noise:
            ratios.append(noise["sigma"] / noise["sigma_run"])
    errors, sigmas, dof, reach = [], [], None, ratio
    for _ in range(n):
        p = sim.draw(sigma, rng)
        try:
            bt = backtest_at_ratio(p, fit, ratio)
        except ValueError:
            continue
        seeds = seed_noise(p, fit_final_law(p, fit))  # as the fit step measures it
        dof, reach = seeds["dof"], bt["compute_ratio"]
        errors.append(math.log1p(bt["relative_error"]))
        sigmas.append(seeds["sigma"])
    err, sig = np.array(errors), np.array(sigmas)
    sd = rng.choice(np.array(ratios), len(err)) * sig
    p_level = 0.5 + fit.level / 2
    print(f"{len(err)} ladders of {sim.describe()}; seed sigma {sigma:.2%} a run, "
          f"backtest at {reach:.1f}x, level {fit.level:.0%}, {dof} degrees of freedom in the measured sigma")
    print(f"backtest log error: true spread {err.std(ddof=1):.4f} ({err.std(ddof=1) / sigma:.2f} sigma); the band's "
          f"spread {np.mean(ratios):.2f} (+- {np.std(ratios):.2f}) x sigma-hat over {len(ratios)} ladders, "
          f"mean {sd.mean():.4f}")
    low = sig < 0.6 * sigma
    print(f"{'quantile':28s} {'q':>6s} {'blocks a right law':>19s} {'sigma-hat < 0.6 sigma (' + format(low.mean(), '.0%') + ')':>28s}")
    for name, q in (("normal (before)", float(norm.ppf(p_level))), (f"Student t, {dof} dof (now)", float(t.ppf(p_level, dof)))):
        blocked = np.abs(err) > q * sd
        se = math.sqrt(blocked.mean() * (1 - blocked.mean()) / len(blocked))
        print(f"{name:28s} {q:6.3f} {blocked.mean():12.1%} +- {se:.1%} {blocked[low].mean():28.0%}")
    print(f"(a right law should be blocked {1 - fit.level:.0%} of the time)")


if __name__ == "__main__":
    main()
