"""`ladder fit` and `ladder predict`: the fits library's point laws on CSVs (the curve commands and
`fit-rule` are in ladder.cli.fits_curves). Part of the base install: numpy, scipy, pandas and click only.

Bad input (a missing column, a non-positive or NaN value, too few points, an unreadable file, a
bad option) raises fits.InputError, which the `ladder` group prints as one line naming the file,
column or field and the fix, exit code 2, with nothing written. Only these modules import both ladder and fits; fits never imports ladder.

Intervals: a fit with --bootstrap is also calibrated by default (nested backtests measure how
the error grows beyond the data, fits.calibrate), so the band `predict` prints is the calibrated
one; every band says how it was made (fits.result.band_method).
"""

from __future__ import annotations

import json
import math

import click

from fits.laws.registry import in_compute, law_entry, law_names
from ladder.cli.options import example, json_option, level_option

POINT_LAWS = law_names("point")


@click.command("fit", epilog=example(
    "ladder fit runs.csv                                   # Chinchilla L(N, D), point estimates",
    "ladder fit runs.csv --bootstrap 200 --out fit.json    # + calibrated intervals, for `ladder predict`",
    "ladder fit runs.csv --law compute --pin-E 1.7 --json",
    "ladder fit runs.csv --law compute --E-prior 0.6,0.2     # E under a stated prior",
))
@click.argument("runs_csv", metavar="RUNS.csv", type=click.Path(dir_okay=False))
@click.option("--law", type=click.Choice(list(POINT_LAWS)), default="chinchilla",
              show_default=True, help="Chinchilla L(N, D), compute L(C), or isoFLOP (Approach 2).")
@click.option("--bootstrap", "n_boot", type=click.IntRange(min=2), default=None,
              help="Resample the runs N times and refit, for intervals (calibrated unless --no-calibrate).")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap resamples.")
@click.option("--pin-E", "pin_e", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Fix the asymptote E of the compute law.")
@click.option("--E-prior", "e_prior", default=None, metavar="MEAN,SD",
              help="A stated normal prior on the compute law's E (e.g. 0.6,0.2), weighed against the runs' scatter.")
@click.option("--calibrate/--no-calibrate", default=None,
              help="Measure extrapolation error with nested backtests and widen predicted bands by it "
                   "[default: on with --bootstrap, where the runs allow it].")
@level_option
@json_option
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write FIT.json here.")
def fit_cmd(runs_csv, law, n_boot, seed, pin_e, e_prior, calibrate, level, as_json, out):
    """Fit a scaling law to RUNS.csv (columns params, tokens, loss; optional flops, active_params)."""
    import fits
    from fits.io import InputError, write_text_atomic
    from fits.result import band_method

    if pin_e is not None and not law_entry(law).pin_E:
        raise InputError("--pin-E applies to --law compute only; drop it or use --law compute")
    prior = _e_prior(e_prior, law, pin_e)
    runs = fits.read_runs(runs_csv, min_points=_min_points(law, pin_e))
    try:
        res = fits.fit(runs, law, pin_E=pin_e, E_prior=prior)
        if n_boot:
            res = fits.bootstrap(runs, law, n_resamples=n_boot, seed=seed, base=res, level=level)
    except ValueError as exc:  # the data cannot support this law (too few budgets, pinned E too high)
        raise InputError(f"{runs_csv}: {exc}") from exc
    res = _calibrated(res, runs, runs_csv, explicit=calibrate, wanted=calibrate or (calibrate is None and n_boot))
    if out:
        write_text_atomic(out, res.to_json())
    if as_json:
        d = res.to_dict()
        d.pop("samples", None)  # kept in FIT.json; too long for a terminal
        d["n_samples"] = len(next(iter(res.samples.values()))) if res.samples else 0
        d["level"] = level
        d["band"] = band_method(res)
        d["out"] = out
        click.echo(json.dumps(d))
        return
    click.echo(res.summary())
    if res.calibration:
        c = res.calibration
        click.echo(f"calibration: {c['per_decade']:.4f} log-loss per decade beyond the data, "
                   f"run scatter {c['sigma0']:.4f}")
    if out:
        click.echo(f"wrote {out}")


def _e_prior(text: str | None, law: str, pin_e) -> tuple[float, float] | None:
    """--E-prior MEAN,SD as a pair, or one line naming what is wrong with it."""
    from fits.io import InputError

    if text is None:
        return None
    if law != "compute" or pin_e is not None:
        raise InputError("--E-prior applies to --law compute without --pin-E; drop one of them")
    try:
        mean, sd = (float(v) for v in text.split(","))
    except ValueError:
        raise InputError(f"--E-prior {text!r}: give MEAN,SD, two numbers, e.g. 0.6,0.2") from None
    if not (mean > 0 and sd > 0):
        raise InputError(f"--E-prior {text!r}: the mean and sd must both be positive")
    return mean, sd


def _min_points(law: str, pin_e) -> int:
    from fits.runs import MIN_POINTS

    return MIN_POINTS[law] if pin_e is None else 2


def _calibrated(res, runs, runs_csv, *, explicit, wanted):
    """The fit with its extrapolation calibration when one is wanted. Asked for by name, a
    calibration the runs cannot support is an error; by default it is a note kept in the fit."""
    import fits
    from fits.io import InputError

    if not wanted:
        return res
    try:
        return fits.calibrate(res, runs)
    except ValueError as exc:
        if explicit:
            raise InputError(f"{runs_csv}: {exc}") from exc
        reason = f"not calibrated: {exc}"
        click.echo(f"note: bands are bootstrap only, {reason}", err=True)
        return res.with_(diagnostics={**res.diagnostics, "uncalibrated": reason})


@click.command("predict", epilog=example(
    "ladder predict fit.json --params 7e10 --tokens 1.4e12",
    "ladder predict fit.json --points high.csv --level 0.9 --out pred.csv",
    "ladder predict fit.json --flops 1e24 --json              # compute or isoflop fits",
))
@click.argument("fit_json", metavar="FIT.json", type=click.Path(dir_okay=False))
@click.option("--params", "n_params", type=float, default=None, help="Parameters N of one point.")
@click.option("--tokens", type=float, default=None, help="Tokens D of one point.")
@click.option("--flops", type=float, default=None, help="Compute C of one point (compute/isoflop laws).")
@click.option("--points", type=click.Path(dir_okay=False), default=None,
              help="POINTS.csv with params and tokens (and optionally flops) columns.")
@level_option
@json_option
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write PRED.csv here.")
def predict_cmd(fit_json, n_params, tokens, flops, points, level, as_json, out):
    """Predicted loss with its interval at --level (calibrated when the fit is), at one point or at
    each row of POINTS.csv; says how the interval was made."""
    from fits.io import InputError, read_fit, write_csv_atomic
    from fits.result import band_method
    from fits.uncertainty import decades_beyond, prediction_band

    res = read_fit(fit_json)
    if res.law not in POINT_LAWS:
        raise InputError(f"{fit_json}: a '{res.law}' fit predicts whole curves; use `ladder curve-predict`")
    pts = _points(res, n_params, tokens, flops, points)
    method = band_method(res)
    band = prediction_band(res, pts, level)
    table = pts.copy()
    table["loss"] = band["loss"].to_numpy()
    no_band = method["kind"] == "none"
    # A bare fit has no interval: empty cells, not a zero-width band that reads as certainty.
    table["lower"] = float("nan") if no_band else band["lower"].to_numpy()
    table["upper"] = float("nan") if no_band else band["upper"].to_numpy()
    if "max_flops" in res.config:
        table["decades_beyond"] = decades_beyond(table, res.config["max_flops"])
    if out:
        write_csv_atomic(out, table)
    if as_json:
        records = json.loads(table.to_json(orient="records"))
        click.echo(json.dumps({"fit": str(fit_json), "law": res.law, "level": level, "interval": method,
                               "predictions": records, "out": out}))
        return
    if out:
        click.echo(f"wrote {out} ({len(table)} rows)")
    else:
        for _, r in table.iterrows():
            interval = "(no interval)" if no_band else f"[{r['lower']:.4f}, {r['upper']:.4f}] at {level:.0%}"
            at = [f"{k} {r[k]:.4g}" for k in ("params", "tokens", "flops") if math.isfinite(r[k])]
            click.echo(f"loss {r['loss']:.4f}  {interval}  ({', '.join(at)})")
    click.echo(f"interval: {method['text']}" + ("; refit with --bootstrap N for one" if no_band else ""))


def _points(res, n_params, tokens, flops, points):
    import numpy as np
    import pandas as pd

    from fits.io import InputError, read_points

    single = n_params is not None or tokens is not None or flops is not None
    if points and single:
        raise InputError("give either --points POINTS.csv or --params/--tokens, not both")
    if points:
        pts = read_points(points)
    elif flops is not None and n_params is None and tokens is None:
        if not in_compute(res.law):
            raise InputError(f"a {res.law} fit needs --params and --tokens, not --flops")
        if not (math.isfinite(flops) and flops > 0):
            raise InputError(f"--flops {flops} must be a finite positive number")
        pts = pd.DataFrame({"flops": [flops], "params": [np.nan], "tokens": [np.nan]})
    else:
        if n_params is None or tokens is None:
            raise InputError("give --params N and --tokens D (or --points POINTS.csv)")
        for name, v in (("--params", n_params), ("--tokens", tokens)):
            if not (math.isfinite(v) and v > 0):
                raise InputError(f"{name} {v} must be a finite positive number")
        pts = pd.DataFrame({"params": [n_params], "tokens": [tokens]})
        if flops is not None:
            pts["flops"] = flops
    if "flops" not in pts.columns:
        pts["flops"] = 6.0 * pts["params"] * pts["tokens"]
    return pts

