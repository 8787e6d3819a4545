"""The simulated ladders bench_intervals and bench_gate draw: a ladder spec's layout (its sizes, seeds a
size and the hero's distance, read from the spec) with every run's final loss a known law times its
seed's luck, N(0, sigma) in log loss, fitted with the spec's own fit settings and judged by its gate's.

Environment (each optional; unset, the spec's own):
  BENCH_SPEC            the ladder spec the layout is read from (default experiments/tiny.py)
  BENCH_SIZES           how many of its sizes, smallest first
  BENCH_SEEDS_PER_SIZE  runs a size (the spec's: its rungs of one size, replicas included)
  BENCH_HERO_RATIO      the hero's compute over the largest rung's (its tokens scaled to reach it)
  BENCH_LAW             the true law: "compute:E,A,alpha" (L = E + A C^-alpha) or
                        "chinchilla:E,A,alpha,B,beta" (L = E + A N^-alpha + B D^-beta); default the compute
                        law fitted to a 16-run draw of the default ladder before issue 55 (DEFAULT_LAW)
"""

from __future__ import annotations

import dataclasses
import math
import os
from dataclasses import dataclass

import numpy as np
import pandas as pd

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
DEFAULT_SPEC = os.path.join(REPO, "experiments", "tiny.py")
DEFAULT_LAW = "compute:0.72,119.3,0.1769"


@dataclass(frozen=True)
class Simulated:
    """A ladder layout to redraw: its runs, the hero's target, the true law, the spec's fit and gate."""

    spec_path: str
    points: pd.DataFrame  # one row a run: name, size, kind, params, tokens, flops, flops_per_token
    hero: tuple[float, float, float]  # params, tokens, flops
    law: tuple[str, tuple[float, ...]]
    fit: object  # ladder.spec.FitSpec, with no whole-curve law (the runs have finals only)
    gate: dict

    @property
    def hero_ratio(self) -> float:
        return self.hero[2] / float(self.points["flops"].max())

    @property
    def seeds_per_size(self) -> int:
        return int(self.points.groupby("size").size().max())

    def describe(self) -> str:
        kind, values = self.law
        return (f"{os.path.relpath(self.spec_path, REPO)}'s layout: {self.points['size'].nunique()} sizes, "
                f"{self.seeds_per_size} seeds a size, the hero {self.hero_ratio:.1f}x past the largest rung, "
                f"true law {kind} {','.join(f'{v:g}' for v in values)}, fit {self.fit.law}"
                + (f" with a prior on E {tuple(self.fit.E_prior)}" if self.fit.E_prior else ""))

    def true_loss(self, params, tokens, flops) -> np.ndarray:
        kind, v = self.law
        if kind == "compute":
            return v[0] + v[1] * np.asarray(flops, float) ** -v[2]
        return v[0] + v[1] * np.asarray(params, float) ** -v[2] + v[3] * np.asarray(tokens, float) ** -v[4]

    def draw(self, sigma: float, rng: np.random.Generator) -> pd.DataFrame:
        """The layout's runs with final losses drawn as the true law times each run's luck."""
        p = self.points
        law = self.true_loss(p["params"], p["tokens"], p["flops"])
        return p.assign(loss=law * np.exp(rng.normal(0.0, sigma, len(p))))

    def hero_actual(self, sigma: float, rng: np.random.Generator) -> float:
        return float(self.true_loss(*self.hero)) * math.exp(rng.normal(0.0, sigma))


def parse_law(text: str) -> tuple[str, tuple[float, ...]]:
    kind, _, values = text.partition(":")
    numbers = tuple(float(x) for x in values.split(",") if x.strip())
    want = {"compute": 3, "chinchilla": 5}.get(kind)
    if want is None or len(numbers) != want:
        raise SystemExit(f"BENCH_LAW={text!r}: give compute:E,A,alpha or chinchilla:E,A,alpha,B,beta")
    return kind, numbers


def simulated(bootstrap: int) -> Simulated:
    """The layout of BENCH_SPEC (default experiments/tiny.py) with the environment's changes."""
    from ladder.spec import to_dict
    from ladder.spec.load import load_spec

    path = os.path.abspath(os.environ.get("BENCH_SPEC", DEFAULT_SPEC))
    spec = load_spec(path)
    rows = pd.DataFrame([{"name": r.name, "size": f"{r.model.params_active}x{r.tokens}", "kind": "final",
                          "params": float(r.model.params_active), "tokens": float(r.tokens), "flops": float(r.flops),
                          "flops_per_token": r.flops / r.tokens} for r in spec.rungs])
    sizes = list(rows.sort_values("flops")["size"].drop_duplicates())
    sizes = sizes[:int(os.environ["BENCH_SIZES"])] if os.environ.get("BENCH_SIZES") else sizes
    rows = rows[rows["size"].isin(sizes)]
    if os.environ.get("BENCH_SEEDS_PER_SIZE"):
        first = rows.drop_duplicates("size")
        k = int(os.environ["BENCH_SEEDS_PER_SIZE"])
        rows = pd.concat([first.assign(name=first["name"] + f"_s{j}") for j in range(k)], ignore_index=True)
    rows = rows.reset_index(drop=True)
    hero = (float(spec.hero.model.params_active), float(spec.hero.tokens), float(spec.hero.flops))
    if os.environ.get("BENCH_HERO_RATIO"):
        scale = float(os.environ["BENCH_HERO_RATIO"]) * float(rows["flops"].max()) / hero[2]
        hero = (hero[0], hero[1] * scale, hero[2] * scale)
    fit = dataclasses.replace(spec.fit, curve_law="none", bootstrap=bootstrap)
    return Simulated(spec_path=path, points=rows, hero=hero, law=parse_law(os.environ.get("BENCH_LAW", DEFAULT_LAW)),
                     fit=fit, gate=to_dict(spec.gate))
