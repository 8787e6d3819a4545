"""`ladder compare`'s effect on pairs of ladders drawn with a known effect: how often each verdict is
called, how often the band at the hero holds the true multiplier, and how often one measured pair of
heroes lands in the pair band and the backtest's largest size in its band.

The default ladder's layout (experiments/tiny.py: seven sizes at one seed each, the hero 4.75x past
the largest) with A's finals drawn on a known compute law (bench_intervals' E 0.72, A 119, alpha 0.177)
and B's on the same law at multiplier(C) x C; each run's luck, N(0, sigma) in log loss, is shared by
the two runs of one seed (the same data order) plus a paired difference N(0, pair sigma). With one seed
a size the paired sigma is measured on the sizes' scatter about the trend (fits/effect_noise.py), so the
"band has true" column is that rule's coverage at the hero. Scenarios: a constant 1.2x ("holds"), a gain
of 1.3x at 1e12 FLOPs falling 17% a decade ("shrinks"), and no effect. Environment: BENCH_EFFECT_LADDERS
(default 50 a scenario), BENCH_EFFECT_SIGMA (0.007), BENCH_EFFECT_PAIR_SIGMA (0.002), BENCH_EFFECT_DRAWS (100).
Run: ``python -m bench effect``.
"""

from __future__ import annotations

import math
import os

import numpy as np
import pandas as pd

E, A, ALPHA = 0.72, 119.3, 0.1769
REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
SCENARIOS = {
    "constant 1.2x": lambda c: 1.2,
    "1.3x shrinking": lambda c: 1.3 * (c / 1e12) ** -0.08,
    "no effect": lambda c: 1.0,
}


def law(c):
    return E + A * np.asarray(c, dtype=float) ** -ALPHA


def draw_pair(spec, multiplier, sigma, pair_sigma, rng):
    """(A's runs, B's runs, the heroes' (loss_a, flops_a, loss_b, flops_b)) drawn as the docstring says."""
    rows_a, rows_b = [], []
    for r in spec.rungs:
        luck = rng.normal(0.0, sigma)
        size = r.name.split("_r")[0]
        rows_a.append({"size": size, "seed": r.replica, "flops": r.flops, "loss": float(law(r.flops)) * math.exp(luck)})
        rows_b.append({"size": size, "seed": r.replica, "flops": r.flops,
                       "loss": float(law(r.flops * multiplier(r.flops))) * math.exp(luck + rng.normal(0.0, pair_sigma))})
    h = spec.hero.flops
    luck = rng.normal(0.0, sigma)
    heroes = (float(law(h)) * math.exp(luck), h,
              float(law(h * multiplier(h))) * math.exp(luck + rng.normal(0.0, pair_sigma)), h)
    return pd.DataFrame(rows_a), pd.DataFrame(rows_b), heroes


def main() -> None:
    from fits.effect_trend import analyse
    from ladder.spec.load import load_spec

    n = int(os.environ.get("BENCH_EFFECT_LADDERS", "50"))
    sigma = float(os.environ.get("BENCH_EFFECT_SIGMA", "0.007"))
    pair_sigma = float(os.environ.get("BENCH_EFFECT_PAIR_SIGMA", "0.002"))
    draws = int(os.environ.get("BENCH_EFFECT_DRAWS", "100"))
    spec = load_spec(os.path.join(REPO, "experiments", "tiny.py"))
    hero = spec.hero.flops
    seeds = len({r.replica for r in spec.rungs})
    print(f"{n} ladder pairs a scenario, {len(spec.rungs)} runs ({seeds} seed(s) a size); seed sigma {sigma:.2%}, "
          f"paired difference {pair_sigma:.2%}, {draws} redraws; 90% bands")
    print(f"{'scenario':<16} {'true x':>7} {'holds':>6} {'shrinks':>8} {'grows':>6} {'band has true':>14} "
          f"{'width':>7} {'heroes in pair band':>20} {'backtest in band':>17} {'noise':>22}")
    for name, multiplier in SCENARIOS.items():
        rng = np.random.default_rng(0)
        words, covered, widths, heroes_in, bt_in, bt_n, sources = [], 0, [], 0, 0, 0, []
        true = multiplier(hero)
        for _ in range(n):
            a, b, heroes = draw_pair(spec, multiplier, sigma, pair_sigma, rng)
            doc = analyse(a, b, hero_flops=(hero, hero), heroes=heroes, n_draws=draws, seed=int(rng.integers(1 << 31)))
            words.append(doc["trend"]["verdict"])
            sources.append(doc["noise"]["pair_source"] or doc["noise"]["mode"])
            h = doc["at_hero"]
            covered += h["lower"] <= true <= h["upper"]
            widths.append(math.log(h["upper"] / h["lower"]))
            heroes_in += bool(doc["heroes"]["inside"])
            if doc["backtest"]["ok"]:
                bt_n += 1
                bt_in += bool(doc["backtest"]["inside"])
        count = {w: words.count(w) / n for w in ("holds", "shrinks", "grows")}
        print(f"{name:<16} {true:>7.3f} {count['holds']:>6.0%} {count['shrinks']:>8.0%} {count['grows']:>6.0%} "
              f"{covered / n:>14.0%} {float(np.mean(widths)):>7.3f} {heroes_in / n:>20.0%} "
              f"{(bt_in / bt_n if bt_n else float('nan')):>17.0%} "
              f"{', '.join(f'{k} {sources.count(k)}' for k in sorted(set(sources))):>22}")
    print("width: mean log(upper / lower) of the hero's multiplier band; noise: where the paired sigma came from "
          "(residuals: the sizes' scatter about the trend; replicas), or the unpaired mode")


if __name__ == "__main__":
    main()
