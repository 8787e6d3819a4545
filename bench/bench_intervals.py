"""The hero's interval and the gate on ladders redrawn from a known law: coverage, width and false blocks.

A ladder spec's layout (bench/simulated.py: experiments/tiny.py unless BENCH_SPEC names another; its
sizes, seeds a size, hero distance and the true law can each be changed there) with every run's final
loss drawn as the known law times its seed's luck, N(0, sigma) in log loss. Each ladder goes through
the tool's own fit, backtest, seed-noise band and hero interval (ladder.analysis.intervals.
target_intervals, as the predict step calls it); the hero's actual loss is the law's times its own luck.
Printed: the interval's coverage of the hero at the fit's level and its mean width (beside the earlier
bootstrap-plus-whole-miss interval); the gate's false-block rate (every ladder here has a right law, so
every block is false) by the spec's gate rules, each rule's share and any rule's (ladder.analysis.gate:
the backtest against its threshold or seed-noise band, the backtest's reach, the interval's width, a
replica outlier); and how often the hero of a passing ladder lands within 1% and 1.5% of a right law's
forecast (seed noise alone, no bias). Environment: BENCH_INTERVAL_LADDERS (default 30, about 10 s
each), BENCH_INTERVAL_SIGMA (default 0.007, the middle of the 0.47-0.97% measured on the default
ladder's replicas), and bench/simulated.py's. Run: ``python -m bench intervals``.
"""

from __future__ import annotations

import math
import os

import numpy as np

from bench.simulated import Simulated, simulated

BEFORE = "bootstrap + whole miss (before)"
NOW = "the tool's interval (now)"
RULES = ("backtest", "reach", "width", "outlier")


def _ladder(sim: Simulated, sigma: float, rng) -> tuple[dict, dict, float]:
    from ladder.analysis.backtests import backtest_at_ratio, backtest_noise
    from ladder.analysis.finals import bootstrap_fits, fit_final_law, law_predict, predict_samples
    from ladder.analysis.gate import _backtest_reasons, outlier_blocks, reach_reasons, width_reasons
    from ladder.analysis.intervals import prediction_interval, target_intervals
    from ladder.analysis.outliers import replica_outlier
    from ladder.analysis.seeds import propagate_final, seed_noise

    p = sim.draw(sigma, rng)
    fit = sim.fit
    res = fit_final_law(p, fit)
    bt = backtest_at_ratio(p, fit, sim.hero_ratio)
    if bt.get("ok"):
        bt = {**bt, "noise": backtest_noise(p, fit, bt, res, n=32)}
    seeds = seed_noise(p, res)  # as the fit step measures it: one seed a size gives the sizes' scatter about the law
    boot = predict_samples(res, bootstrap_fits(p, fit, res, fit.bootstrap, seed=0), [sim.hero])
    central, lo, hi, _ = target_intervals(p, fit, res, bt, [sim.hero], boot, seeds, fit.level)[0]
    actual = sim.hero_actual(sigma, rng)
    # the earlier interval: the bootstrap summed with the whole backtest miss, the seed spread a prior
    carried = float(propagate_final(p, fit, res, [sim.hero], seeds["sigma"])[0])
    blo, bhi, _ = prediction_interval(law_predict(res, *sim.hero), boot[:, 0], bt, math.log10(sim.hero_ratio), fit.level,
                                      {"sigma": seeds["sigma"], "sigma_fit": carried, "source": "prior"})
    intervals = {BEFORE: (blo <= actual <= bhi, (bhi - blo) / central), NOW: (lo <= actual <= hi, (hi - lo) / central)}
    hero = {"predicted_final_loss": central, "lower": lo, "upper": hi, "level": fit.level}
    gate, ok = sim.gate, bool(bt.get("ok"))
    blocks = {"backtest": bool(_backtest_reasons(bt, gate)) if ok else True,
              "reach": bool(reach_reasons(bt, sim.hero_ratio)) if ok else False,
              "width": bool(width_reasons(hero, gate)), "outlier": outlier_blocks(replica_outlier(p), gate),
              "other rule": bool(_backtest_reasons(bt, {**gate, "backtest_rule": _other(gate)})) if ok else True}
    return intervals, blocks, actual / central - 1.0


def _other(gate: dict) -> str:
    return "threshold" if gate.get("backtest_rule", "threshold") == "noise" else "noise"


def main() -> None:
    n = int(os.environ.get("BENCH_INTERVAL_LADDERS", "30"))
    sigma = float(os.environ.get("BENCH_INTERVAL_SIGMA", "0.007"))
    sim = simulated(bootstrap=40)
    gate = sim.gate
    rng = np.random.default_rng(2026)
    intervals: dict[str, list] = {BEFORE: [], NOW: []}
    blocks: dict[str, list] = {}
    errors = []
    for _ in range(n):
        got, blocked, error = _ladder(sim, sigma, rng)
        errors.append(error)
        for k, v in got.items():
            intervals[k].append(v)
        for k, v in blocked.items():
            blocks.setdefault(k, []).append(v)
    print(f"{n} ladders of {sim.describe()}; seed sigma {sigma:.2%} a run, level {sim.fit.level:.0%}")
    print(f"{'hero interval':36s} {'coverage':>9s} {'mean width':>11s} {'width > ' + format(gate['max_interval_width'], '.0%'):>12s}")
    for k, v in intervals.items():
        widths = np.array([w for _, w in v])
        print(f"{k:36s} {np.mean([c for c, _ in v]):9.0%} {widths.mean():11.1%} "
              f"{np.mean(widths > gate['max_interval_width']):12.0%}")
    blocked_any = np.any([blocks[r] for r in RULES], axis=0)
    se = math.sqrt(blocked_any.mean() * (1 - blocked_any.mean()) / n)
    print(f"gate false-block rate (any rule of the spec's gate; every law here is right): {blocked_any.mean():.0%} +- {se:.0%}")
    for rule in RULES:
        print(f"  {rule:34s} {np.mean(blocks[rule]):6.0%}")
    print(f"  {'backtest under ' + repr(_other(gate)) + ' instead':34s} {np.mean(blocks['other rule']):6.0%}"
          f"   (the spec's rule: {gate.get('backtest_rule')!r})")
    # What seed noise alone allows a forecast whose law is exactly right (issue 18 asks 1.5% in each of 3 draws).
    passing = np.array(errors)[~blocked_any]
    if passing.size:
        for tol in (0.01, 0.015):
            share = np.mean(np.abs(passing) <= tol)
            print(f"hero within {tol:.1%} of a right law's forecast (gate passing): {share:.0%} of draws; "
                  f"three draws all within: {share ** 3:.0%}")
        print(f"hero error of a right law (gate passing): sd {np.std(passing):.2%}")


if __name__ == "__main__":
    main()
