"""`ladder fit`, `predict`, `curve-fit`, `curve-predict`, `fit-rule`: the fits library on CSVs.

Bad input (a missing column, a non-positive or NaN value, too few points, an unreadable file, a
bad option) is one line on stderr naming the file, column or field and the fix, exit code 2, and
nothing written. Only this module imports both ladder and fits; fits never imports ladder.
"""

from __future__ import annotations

import json
import math

import click
import numpy as np
import pandas as pd

EXIT_BAD_INPUT = 2


class FitsInputError(click.ClickException):
    """A user mistake: one line on stderr, exit 2, no traceback."""

    exit_code = EXIT_BAD_INPUT

    def show(self, file=None) -> None:
        click.echo(f"error: {self.format_message()}", err=True)


def _input_errors(fn):
    """Run a command body, turning the library's InputError/ValueError into one line and exit 2."""
    import functools

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        from fits.io import InputError

        try:
            return fn(*args, **kwargs)
        except InputError as exc:
            raise FitsInputError(str(exc)) from exc
    return wrapper


def _level(ctx, param, value):
    if value is not None and not (0.0 < value < 1.0):
        raise click.BadParameter(f"{value} is not a probability; give a level in (0, 1), e.g. 0.9")
    return value


@click.command("fit")
@click.argument("runs_csv", metavar="RUNS.csv", type=click.Path(dir_okay=False))
@click.option("--law", type=click.Choice(["chinchilla", "compute", "isoflop"]), default="chinchilla",
              show_default=True, help="Chinchilla L(N, D), compute L(C), or isoFLOP (Approach 2).")
@click.option("--bootstrap", "n_boot", type=click.IntRange(min=2), default=None,
              help="Resample the runs N times and refit, for percentile intervals.")
@click.option("--seed", type=int, default=0, show_default=True, help="Seed of the bootstrap resamples.")
@click.option("--pin-E", "pin_e", type=click.FloatRange(min=0, min_open=True), default=None,
              help="Fix the asymptote E of the compute law.")
@click.option("--calibrate", is_flag=True,
              help="Measure extrapolation error with nested backtests and widen predicted bands by it.")
@click.option("--json", "as_json", is_flag=True, help="Print the fit as one JSON object.")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write FIT.json here.")
@_input_errors
def fit_cmd(runs_csv, law, n_boot, seed, pin_e, calibrate, as_json, out):
    """Fit a scaling law to RUNS.csv (columns params, tokens, loss; optional flops, active_params)."""
    import fits
    from fits.io import InputError, read_runs, write_text_atomic
    from fits.runs import MIN_POINTS

    if pin_e is not None and law != "compute":
        raise InputError("--pin-E applies to --law compute only; drop it or use --law compute")
    runs = read_runs(runs_csv, min_points=MIN_POINTS[law] if pin_e is None else 2)
    try:
        res = fits.fit(runs, law, pin_E=pin_e)
        if n_boot:
            res = fits.bootstrap(runs, law, n_resamples=n_boot, seed=seed, base=res)
        if calibrate:
            res = fits.calibrate(res, runs)
    except ValueError as exc:  # the data cannot support this law (too few budgets, pinned E too high)
        raise InputError(f"{runs_csv}: {exc}") from exc
    if out:
        write_text_atomic(out, res.to_json())
    if as_json:
        d = res.to_dict()
        d.pop("samples", None)  # kept in FIT.json; too long for a terminal
        d["n_samples"] = len(next(iter(res.samples.values()))) if res.samples else 0
        click.echo(json.dumps(d))
        return
    click.echo(f"law: {res.law}   points: {res.n_points}   starts: {res.n_starts}   "
               f"objective: {res.objective:.7e}   converged: {res.converged}")
    for k, v in res.params.items():
        ci = res.ci.get(k) if res.ci else None
        band = f"   95% [{ci[0]:.6g}, {ci[1]:.6g}]" if ci else ""
        click.echo(f"  {k:>6} = {v:.6g}{band}")
    if res.calibration:
        c = res.calibration
        click.echo(f"calibration: {c['per_decade']:.4f} log-loss per decade beyond the data, "
                   f"run scatter {c['sigma0']:.4f}")
    if out:
        click.echo(f"wrote {out}")


@click.command("predict")
@click.argument("fit_json", metavar="FIT.json", type=click.Path(dir_okay=False))
@click.option("--params", "n_params", type=float, default=None, help="Parameters N of one point.")
@click.option("--tokens", type=float, default=None, help="Tokens D of one point.")
@click.option("--flops", type=float, default=None, help="Compute C of one point (compute/isoflop laws).")
@click.option("--points", type=click.Path(dir_okay=False), default=None,
              help="POINTS.csv with params and tokens (and optionally flops) columns.")
@click.option("--level", type=float, default=0.9, show_default=True, callback=_level,
              help="Probability of the interval.")
@click.option("--json", "as_json", is_flag=True, help="Print predictions as JSON.")
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write PRED.csv here.")
@_input_errors
def predict_cmd(fit_json, n_params, tokens, flops, points, level, as_json, out):
    """Predicted loss with the interval at --level, at one point or at each row of POINTS.csv."""
    from fits.io import InputError, read_fit, read_points, write_csv_atomic
    from fits.uncertainty import prediction_band

    res = read_fit(fit_json)
    if res.law not in ("chinchilla", "compute", "isoflop"):
        raise InputError(f"{fit_json}: a '{res.law}' fit predicts whole curves; use `ladder curve-predict`")
    single = n_params is not None or tokens is not None or flops is not None
    if points and single:
        raise InputError("give either --points POINTS.csv or --params/--tokens, not both")
    if points:
        pts = read_points(points)
    elif flops is not None and n_params is None and tokens is None:
        if res.law == "chinchilla":
            raise InputError("a chinchilla fit needs --params and --tokens, not --flops")
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
    band = prediction_band(res, pts, level)
    table = pts.copy()
    for c in ("loss", "lower", "upper"):
        table[c] = band[c].to_numpy()
    if not res.samples and not res.calibration:
        click.echo("note: the fit has no bootstrap or calibration, so lower = upper = loss; "
                   "refit with --bootstrap N or --calibrate", err=True)
    if out:
        write_csv_atomic(out, table)
    if as_json:
        recs = json.loads(table.assign(level=level).to_json(orient="records"))
        click.echo(json.dumps(recs[0] if not points else recs))
    elif not out:
        for _, r in table.iterrows():
            click.echo(f"loss {r['loss']:.4f}  [{r['lower']:.4f}, {r['upper']:.4f}] at {level:.0%}"
                       f"  (params {r['params']:.4g}, tokens {r['tokens']:.4g}, flops {r['flops']:.4g})")
    else:
        click.echo(f"wrote {out} ({len(table)} rows)")


@click.command("curve-fit")
@click.argument("curves", metavar="CURVE.csv...", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--law", type=click.Choice(["multipower", "tissue"]), default="multipower", show_default=True,
              help="Multi-Power Law (Luo et al. 2025) or the LR-annealing law (Tissue et al. 2024).")
@click.option("--out", type=click.Path(dir_okay=False), required=True, help="Write FIT.json here.")
@click.option("--json", "as_json", is_flag=True, help="Print the fit as one JSON object.")
@_input_errors
def curve_fit_cmd(curves, law, out, as_json):
    """Fit a whole-curve law to one or more CURVE.csv files (columns step, lr, loss)."""
    from fits.curves import MIN_POINTS, fit_curves
    from fits.io import InputError, read_curve, write_text_atomic

    frames = [read_curve(p, need_loss=True) for p in curves]
    total = sum(len(f) for f in frames)
    if total < MIN_POINTS[law]:
        raise InputError(f"{', '.join(curves)}: {total} points in all but the {law} law needs at least "
                         f"{MIN_POINTS[law]}; log the loss at more steps")
    try:
        res = fit_curves(frames, law=law, names=list(curves))
    except ValueError as exc:
        raise InputError(f"{', '.join(curves)}: {exc}") from exc
    write_text_atomic(out, res.to_json())
    if as_json:
        click.echo(res.to_json(indent=None))
        return
    click.echo(f"law: {res.law}   curves: {len(frames)}   points: {res.n_points}   objective: {res.objective:.6e}")
    for k, v in res.params.items():
        click.echo(f"  {k:>6} = {v:.6g}")
    click.echo(f"wrote {out}")


@click.command("curve-predict")
@click.argument("fit_json", metavar="FIT.json", type=click.Path(dir_okay=False))
@click.argument("schedule", metavar="SCHEDULE.csv", type=click.Path(dir_okay=False))
@click.option("--out", type=click.Path(dir_okay=False), default=None, help="Write PRED.csv here.")
@_input_errors
def curve_predict_cmd(fit_json, schedule, out):
    """The loss curve a curve fit predicts for SCHEDULE.csv (columns step, lr)."""
    from fits.curves import predict_schedule
    from fits.io import InputError, read_curve, read_fit, write_csv_atomic

    res = read_fit(fit_json)
    if res.law not in ("multipower", "tissue"):
        raise InputError(f"{fit_json}: a '{res.law}' fit is not a curve law; use `ladder predict`, "
                         "or fit curves with `ladder curve-fit`")
    sched = read_curve(schedule, need_loss=False)
    table = sched.copy()
    table["loss"] = predict_schedule(res, sched)
    if out:
        write_csv_atomic(out, table)
        click.echo(f"wrote {out} ({len(table)} rows)")
    else:
        click.echo(table.to_csv(index=False), nl=False)


@click.command("fit-rule")
@click.argument("sweep_csv", metavar="SWEEP.csv", type=click.Path(dir_okay=False))
@click.option("--x", "x_col", default="lr", show_default=True, help="The swept hyperparameter's column.")
@click.option("--budget", "budget_col", default="flops", show_default=True,
              help="The budget column the rule is a power law in (flops, or params for a rule in N).")
@click.option("--loss", "loss_col", default="final_eval_loss", show_default=True, help="The loss column.")
@click.option("--where", "where", multiple=True, metavar="COL=VALUE",
              help="Keep only rows whose COL equals VALUE (repeatable), e.g. --where sweep=lr.")
@click.option("--json", "as_json", is_flag=True, help="Print the rule as one JSON object.")
@_input_errors
def fit_rule_cmd(sweep_csv, x_col, budget_col, loss_col, where, as_json):
    """Fit x_opt = coef * budget^exponent from a hyperparameter sweep (one row per run)."""
    from fits.hparams import fit_rule
    from fits.io import InputError, positive_column, read_table, require_columns

    df = read_table(sweep_csv, "sweep CSV")
    require_columns(df, (x_col, budget_col, loss_col), sweep_csv)
    for cond in where:
        col, sep, value = cond.partition("=")
        if not sep:
            raise InputError(f"--where {cond!r}: write it as COL=VALUE, e.g. --where sweep=lr")
        require_columns(df, (col,), sweep_csv)
        df = df[df[col].astype(str) == value]
    if df.empty:
        raise InputError(f"{sweep_csv}: no rows left after --where {' '.join(where)}; check the values")
    rule = fit_rule(positive_column(df, budget_col, sweep_csv), positive_column(df, x_col, sweep_csv),
                    pd.to_numeric(df[loss_col], errors="coerce").to_numpy(dtype=float))
    if as_json:
        click.echo(json.dumps(rule.to_dict()))
        return
    click.echo(f"{x_col}_opt = {rule.coef:.4g} * {budget_col}^{rule.exponent:.4f}")
    for name, value in (("coef", rule.coef), ("exponent", rule.exponent)):
        band = f"   90% [{rule.ci[name][0]:.4g}, {rule.ci[name][1]:.4g}]" if name in rule.ci else ""
        click.echo(f"  {name:<8} = {value:.6g}{band}")
    for o in rule.optima:
        where_ = "edge of the sweep: a bound, left out of the fit" if o.at_edge else f"rule {float(rule(o.budget)):.4g}"
        click.echo(f"  {budget_col} {o.budget:.4g}: {x_col}_opt {o.x_opt:.4g}, loss {o.loss_opt:.4f} "
                   f"({o.n_values} values; {where_})")


def register(group: click.Group) -> None:
    """Add the fits commands to the `ladder` group."""
    for cmd in (fit_cmd, predict_cmd, curve_fit_cmd, curve_predict_cmd, fit_rule_cmd):
        group.add_command(cmd)
