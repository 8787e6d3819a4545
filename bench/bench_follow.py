"""Live bands of `ladder follow` on the 535B case, offline: each snapshot of the hero's visible points
(5%, 10% ... 27.7% of its run) scored on the visible points after it, the earlier rule (an imported hero's
snapshots before issue 55, kept here as _earlier_rule) beside the horizon rule (ladder.analysis.follow_forecast,
now every hero's: followed, trained here or imported) and
Marin's curve on the same points; and the horizon band on every rung snapshot, each (pair) scored with
a profile measured on the other pairs only. Also the band's half-width over the points the issue's
table scored (28-55% of the run, after the mix switch), which this repository does not hold. Then each of
Marin's 16 Paloma domains: its band's coverage on the largest rung's backtest (ladder.analysis.domain_forecasts);
and the training-dynamics envelopes over fresh draws of the smoke rungs (bench/follow_envelopes.py).
"""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import pandas as pd

REPO = Path(__file__).resolve().parents[1]
SPEC = str(REPO / "experiments" / "marin_moe_535b.py")
Z90 = 1.6448536269514722


def _cli(*args: str) -> None:
    env = {**os.environ, "RAY_AUTH_MODE": "disabled"}
    proc = subprocess.run([str(Path(sys.executable).parent / "ladder"), *args], capture_output=True, text=True,
                          timeout=600, cwd=REPO, env=env)
    if proc.returncode not in (0, 1):
        raise RuntimeError(f"ladder {args[0]} failed: {proc.stderr[-500:]}")


def _floor_ratio(curve: pd.DataFrame, later: pd.DataFrame, at: float, rungs: dict, decades: float) -> float:
    """The band's log half-width over the rungs' measured snapshot error at each later point's horizon (mean):
    1 is a band at its floor, which no tightening may go under."""
    from ladder.analysis.follow_bands import rungs_sigma

    f = later["frac"].to_numpy(float)
    band = np.log(np.interp(f, curve["frac"], curve["upper"]) / np.interp(f, curve["frac"], curve["loss"]))
    floor = Z90 * rungs_sigma(rungs, np.log(f / at), decades)
    return float(np.mean(band / floor))


def _score(curve: pd.DataFrame, later: pd.DataFrame, marin: pd.DataFrame) -> dict:
    f, y = later["frac"].to_numpy(float), later["loss"].to_numpy(float)
    p = np.interp(f, curve["frac"], curve["loss"])
    lo, hi = np.interp(f, curve["frac"], curve["lower"]), np.interp(f, curve["frac"], curve["upper"])
    half = np.log(hi / p)
    return {"n": len(f), "mae": np.mean(np.abs(p / y - 1)), "inside": np.mean((y >= lo) & (y <= hi)),
            "half": np.mean((hi - lo) / 2 / p), "half_minus_err": np.min(half - np.abs(np.log(p / y))),
            "marin": np.mean(np.abs(np.interp(f, marin["frac"], marin["loss"]) / y - 1))}


def _hidden_half(curve: pd.DataFrame) -> float:
    """A snapshot's mean band half-width over 28-55% of the run: the points after the mix switch, not held here."""
    hidden = curve[(curve["frac"] >= 0.28) & (curve["frac"] <= 0.55)]
    return float(np.mean((hidden["upper"] - hidden["lower"]) / 2 / hidden["loss"]))


def _earlier_rule(fit_dir: str, pts: pd.DataFrame, prior: pd.DataFrame, level: float) -> dict[float, pd.DataFrame]:
    """The rule an imported hero's report used before issue 55, by snapshot fraction (rounded to 0.001): at every
    5% of the run with 2 points before it and at the last point, fits' snapshot with its band calibrated on the
    rungs at that fraction only (fits.matched_progress_forecast.snapshot)."""
    from scipy.stats import norm

    from fits.matched_progress_choice import CANDIDATES, calibration_pairs
    from fits.matched_progress_forecast import snapshot
    from ladder.analysis.curve_laws import POINTS_CSV, axes
    from ladder.outputs import layout

    progress = layout.read_json(Path(fit_dir) / layout.FIT)["progress"]
    points = pd.read_csv(Path(fit_dir) / POINTS_CSV)
    axis = next(a for a in axes(points, progress["hero_totals"]) if a.name == progress["chosen"]["axis"])
    sigma = np.log(prior["upper"].to_numpy(float) / prior["loss"].to_numpy(float)) / float(norm.ppf(0.5 + level / 2))
    last = float(pts["frac"].max())
    fracs = [round(float(g), 6) for g in np.arange(0.05, last + 1e-12, 0.05) if (pts["frac"] <= g + 1e-12).sum() >= 2]
    fracs += [last] if not fracs or last - fracs[-1] > 1e-9 else []
    out = {}
    for at in fracs:
        curve, _ = snapshot(axis, CANDIDATES[progress["chosen"]["candidate"]], pts[["frac", "loss"]], at,
                            prior["frac"].to_numpy(float), level, sigma, float(progress["forecast"]["decades"]),
                            pairs=calibration_pairs(axis.points))
        out[round(at, 3)] = curve
    return out


def main(only_snapshots: bool = False) -> None:
    """The whole bench; only_snapshots: the 535B snapshot table alone (python -c "from bench.bench_follow
    import main; main(only_snapshots=True)"), a few minutes where the whole takes many."""
    from fits import reference
    from fits.matched_progress_choice import calibration_pairs
    from ladder.analysis import follow_forecast as ff
    from ladder.analysis.follow_bands import DECADE_POWER, rung_errors_profile, rung_horizon_errors, rungs_sigma
    from ladder.dag import queries
    from ladder.spec.load import load_spec

    with tempfile.TemporaryDirectory(prefix="bench-follow-") as tmp:
        root = str(Path(tmp) / "root")
        _cli("import-results", SPEC, str(reference.data_dir() / "marin_moe_535b" / "rung_curves.csv"), "--root", root)
        _cli("submit", SPEC, "--root", root, "--no-progress", "--wandb", "disabled")
        spec = dataclasses.replace(load_spec(SPEC), root=root)
        dirs = queries.step_dirs(spec)
        hero = spec.hero
        ctx = ff.load_context(dirs["fit"], dirs["predict"], hero.steps, hero.batch_tokens)
        marin = pd.read_csv(Path(dirs["predict"]) / "baseline_marin.csv")
        ev = reference.marin_hero_eval()
        pts = pd.DataFrame({"step": ev["step"].astype(int), "loss": ev["loss"].astype(float)})
        pts = pts[pts["step"] > 0].assign(frac=lambda d: d["step"] / hero.steps).reset_index(drop=True)
        rungs = ff.rung_profile(ctx)
        prior = ctx.prior
        old = _earlier_rule(dirs["fit"], pts, prior, ctx.level)
        print(f"535B hero, visible points (to 27.7%), {len(pts)} points; Marin's curve on the same points")
        print("snapshot | rule     | later n | mean |err| | inside 90% | mean half-width | min(half - |err|) (log) | Marin |err|"
              " | band / rung floor")
        earlier = []
        for g in (0.05, 0.10, 0.15, 0.20, 0.25, 0.277):
            at_step = int(pts[pts["frac"] <= g + 1e-9]["step"].max())
            curve, s = ff.snapshot(ctx, pts, at_step, earlier, rungs, tuple(hero.changes))
            earlier.append({"at_frac": s["at_frac"], "curve": curve})
            later = pts[pts["step"] > at_step]
            hw_hidden = _hidden_half(curve)
            if later.empty:
                print(f"{s['at_frac']:.1%}   | horizon  | 0 | - | - | - | - | -   (half-width over 28-55%: {hw_hidden:.2%})")
                continue
            new = _score(curve, later, marin)
            ocurve = old.get(round(at_step / hero.steps, 3), old.get(round(g, 3)))
            if ocurve is not None:
                r = _score(ocurve, later, marin)
                print(f"{s['at_frac']:.1%}   | earlier  | {r['n']} | {r['mae']:.2%} | {r['inside']:.0%} | {r['half']:.2%} | "
                      f"{r['half_minus_err']:+.4f} | {r['marin']:.2%}   (half-width over 28-55%: {_hidden_half(ocurve):.2%})")
            print(f"{s['at_frac']:.1%}   | horizon  | {new['n']} | {new['mae']:.2%} | {new['inside']:.0%} | {new['half']:.2%} | "
                  f"{new['half_minus_err']:+.4f} | {new['marin']:.2%} | {_floor_ratio(curve, later, s['at_frac'], rungs, ctx.decades):.2f}"
                  f"   (half-width over 28-55%: {hw_hidden:.2%}; centre: {s.get('centre_rule')}, rung errors "
                  f"{ {k: round(v, 4) for k, v in (s.get('centre_errors') or {}).items()} })")
        if only_snapshots:
            return
        # The change rule on changes inside the visible points: the run-id switches of hero_runs.csv (gate/router
        # weight decay at 58,014, the EP all-to-all and NCCL update at 81,716) declared as changes.
        from ladder.spec import RunChange

        runs = pd.read_csv(reference.data_dir() / "marin_moe_535b" / "hero_runs.csv")
        declared = tuple(RunChange(int(r.first_step), str(r.change)) for r in runs.itertuples() if r.first_step > 0)
        declared += tuple(hero.changes)
        print("\nthe same snapshots with the visible run-id switches declared as changes too "
              f"({', '.join(str(c.step) for c in declared)})")
        earlier = []
        for g in (0.10, 0.15, 0.20, 0.25):
            at_step = int(pts[pts["frac"] <= g + 1e-9]["step"].max())
            curve, s = ff.snapshot(ctx, pts, at_step, earlier, rungs, declared)
            earlier.append({"at_frac": s["at_frac"], "curve": curve})
            r = _score(curve, pts[pts["step"] > at_step], marin)
            print(f"{s['at_frac']:.1%} | {r['n']} | {r['mae']:.2%} | {r['inside']:.0%} | {r['half']:.2%} | "
                  f"{r['half_minus_err']:+.4f} | {r['marin']:.2%} | {s['band_rule'][-70:]}")
        errs = rung_horizon_errors(ctx.axis.points, ctx.fit_fn, calibration_pairs(ctx.axis.points))
        print("\nrung snapshots (every 5% of each rung), each pair's band from the other pairs' horizon profile only,")
        print(f"the error taken per decade ** p of each pair's extrapolation (the rule uses p = {DECADE_POWER})")
        print("p | pair (decades) | points | inside 90% | mean half-width")
        for power in (0.0, 0.5, 1.0):
            held = []
            for (target, fit_on), grp in errs.groupby(["predict", "fit_on"]):
                rest = errs[(errs["predict"] != target) | (errs["fit_on"] != fit_on)]
                sig = rungs_sigma(rung_errors_profile(rest, power), grp["h"].to_numpy(float), float(grp["decades"].iloc[0]))
                inside = np.abs(grp["log_error"].to_numpy(float)) <= Z90 * sig
                held.append(inside)
                print(f"{power} | {fit_on} -> {target} ({grp['decades'].iloc[0]:.2f}) | {len(grp)} | {inside.mean():.0%} | "
                      f"{np.mean(np.expm1(Z90 * sig)):.2%}")
            print(f"{power} | all pairs pooled | {sum(len(h) for h in held)} | {np.mean(np.concatenate(held)):.0%} |")
        _domains(dirs["fit"], Path(tmp) / "domains", ctx.level)
    print("\n=== follow: training-dynamics envelopes ===")
    from bench import follow_envelopes

    follow_envelopes.main()


def _domains(fit_dir: str, cache: Path, level: float) -> None:
    """Each Paloma domain's forecast band, scored on the largest rung's backtest (its band calibrated blind to it)."""
    from fits import reference
    from ladder.analysis.domain_forecasts import forecasts

    curves = pd.read_csv(reference.data_dir() / "marin_moe_535b" / "rung_domain_curves.csv").rename(columns={"rung": "name"})
    rows = forecasts(fit_dir, curves, cache, None, level)
    print(f"\nper-domain bands ({len(rows)} Paloma domains): the largest rung's backtest, band calibrated blind to it")
    print("domain | backtest | mean |err| | points | inside band | calibrated on")
    cover = []
    for r in rows:
        b = r["backtest"]
        cover += [b["band_coverage"]] if b["band_coverage"] is not None else []
        inside = f"{b['band_coverage']:.0%}" if b["band_coverage"] is not None else "-"
        print(f"{r['domain']} | {'+'.join(b['fit_on'])} -> {b['predict']} | {b['mean_abs_rel_error']:.2%} | "
              f"{b['band_points']} | {inside} | {', '.join(b['calibrated_on'] or [])}")
    if cover:
        print(f"inside the {level:.0%} band per domain: min {min(cover):.0%}, mean {np.mean(cover):.0%}, max {max(cover):.0%}")


if __name__ == "__main__":
    main()
