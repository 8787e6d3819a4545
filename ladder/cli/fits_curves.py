"""`ladder curve-fit`, `curve-predict` and `fit-rule`: whole-curve laws and hyperparameter rules on CSVs.

curve-predict scores a schedule that has a loss column, per schedule and both ways of averaging
over several: the mean of each schedule's mean error (every schedule counts once, as the
Multi-Power paper and tests/fits/test_curves.py report it) and the mean over all their points
(long schedules count more). The 400M hold-out is 0.189% the first way and 0.266% the second:
one fit, one set of predictions, two averages.
"""

from __future__ import annotations

import json

import click

from fits.laws.registry import single_curve_laws
from ladder.cli.options import example, json_option, level_option

CURVE_LAWS = single_curve_laws()  # the registry's laws of one curve at a time


@click.command("curve-fit", epilog=example(
    "ladder curve-fit cosine_24000.csv constant_24000.csv wsdcon_9.csv --out mpl.json",
    "ladder curve-fit run.csv --law tissue --out tissue.json --json",
))
@click.argument("curves", metavar="CURVE.csv...", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--law", type=click.Choice(list(CURVE_LAWS)), default="multipower", show_default=True,
              help="Multi-Power Law (Luo et al. 2025) or the LR-annealing law (Tissue et al. 2024).")
@click.option("--out", type=click.Path(dir_okay=False), required=True, help="Write FIT.json here.")
@json_option
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


@click.command("curve-predict", epilog=example(
    "ladder curve-predict mpl.json schedule.csv                      # the curve as CSV on stdout",
    "ladder curve-predict mpl.json cosine_72000.csv wsdcon_3.csv --json   # with a loss column: errors",
))
@click.argument("fit_json", metavar="FIT.json", type=click.Path(dir_okay=False))
@click.argument("schedules", metavar="SCHEDULE.csv...", nargs=-1, required=True, type=click.Path(dir_okay=False))
@click.option("--out", type=click.Path(dir_okay=False), default=None,
              help="Write PRED.csv here (a `schedule` column when there are several).")
@json_option
def curve_predict_cmd(fit_json, schedules, out, as_json):
    """The loss curve a curve fit predicts for each SCHEDULE.csv (columns step, lr). A schedule that
    also has a loss column is scored: mean |predicted / actual - 1|, per schedule and overall."""
    import numpy as np
    import pandas as pd

    from fits.curves import predict_schedule
    from fits.io import InputError, read_curve, read_fit, read_table, write_csv_atomic

    res = read_fit(fit_json)
    if res.law not in CURVE_LAWS:
        raise InputError(f"{fit_json}: a '{res.law}' fit is not a curve law; use `ladder predict`, "
                         "or fit curves with `ladder curve-fit`")
    tables, scores = [], []
    for path in schedules:
        scored = "loss" in read_table(path, "SCHEDULE.csv").columns
        sched = read_curve(path, need_loss=scored)
        table = sched[["step", "lr"]].copy()
        table["loss"] = predict_schedule(res, sched)
        if scored:
            table["actual"] = sched["loss"].to_numpy()
            err = np.abs(table["loss"].to_numpy() / table["actual"].to_numpy() - 1)
            scores.append({"schedule": str(path), "n_points": int(err.size), "mean_abs_rel_err": float(err.mean()),
                           "max_abs_rel_err": float(err.max()), "_err": err})
        if len(schedules) > 1:
            table.insert(0, "schedule", str(path))
        tables.append(table)
    table = pd.concat(tables, ignore_index=True)
    summary = _error_summary(scores)
    if out:
        write_csv_atomic(out, table)
    if as_json:
        click.echo(json.dumps({"fit": str(fit_json), "law": res.law, "out": out, "errors": summary,
                               "predictions": json.loads(table.to_json(orient="records"))}))
        return
    if out:
        click.echo(f"wrote {out} ({len(table)} rows)")
    else:
        click.echo(table.to_csv(index=False), nl=False)
    # With the CSV on stdout the scores go to stderr, so the CSV stays readable by a program.
    for line in _error_lines(summary):
        click.echo(line, err=not out)


def _error_summary(scores: list[dict]) -> dict | None:
    import numpy as np

    if not scores:
        return None
    pooled = np.concatenate([s.pop("_err") for s in scores])
    return {"per_schedule": scores,
            "mean_of_schedule_means": float(np.mean([s["mean_abs_rel_err"] for s in scores])),
            "mean_over_points": float(pooled.mean()), "n_points": int(pooled.size)}


def _error_lines(summary: dict | None) -> list[str]:
    if not summary:
        return []
    lines = [f"{s['schedule']}: mean |error| {s['mean_abs_rel_err']:.3%}, max {s['max_abs_rel_err']:.3%} "
             f"over {s['n_points']} points" for s in summary["per_schedule"]]
    if len(summary["per_schedule"]) > 1:
        lines.append(f"mean |error|: {summary['mean_of_schedule_means']:.3%} averaged over schedules (each counts "
                     f"once), {summary['mean_over_points']:.3%} over all {summary['n_points']} points "
                     "(long schedules count more)")
    return lines


@click.command("fit-rule", epilog=example(
    "ladder fit-rule experiments/tiny_sweeps.csv --where sweep=lr",
    "ladder fit-rule sweep.csv --x batch --budget flops --loss final_eval_loss --level 0.8 --json",
))
@click.argument("sweep_csv", metavar="SWEEP.csv", type=click.Path(dir_okay=False))
@click.option("--x", "x_col", default="lr", show_default=True, help="The swept hyperparameter's column.")
@click.option("--budget", "budget_col", default="flops", show_default=True,
              help="The budget column the rule is a power law in (flops, or params for a rule in N).")
@click.option("--loss", "loss_col", default="final_eval_loss", show_default=True, help="The loss column.")
@click.option("--where", "where", multiple=True, metavar="COL=VALUE",
              help="Keep only rows whose COL equals VALUE (repeatable), e.g. --where sweep=lr.")
@level_option
@json_option
def fit_rule_cmd(sweep_csv, x_col, budget_col, loss_col, where, level, as_json):
    """Fit x_opt = coef * budget^exponent from a hyperparameter sweep (one row per run)."""
    import pandas as pd

    from fits.hparams import fit_rule
    from fits.io import InputError, positive_column, read_table, require_columns

    df = read_table(sweep_csv, "sweep CSV")
    require_columns(df, (x_col, budget_col, loss_col), sweep_csv)
    for cond in where:
        col, sep, value = cond.partition("=")
        if not sep:
            raise InputError(f"--where {cond!r}: write it as COL=VALUE, e.g. --where sweep=lr")
        require_columns(df, (col,), sweep_csv)
        df = df[df[col].astype(str).str.strip() == value]
    if df.empty:
        raise InputError(f"{sweep_csv}: no rows left after --where {' '.join(where)}; check the values")
    rule = fit_rule(positive_column(df, budget_col, sweep_csv), positive_column(df, x_col, sweep_csv),
                    pd.to_numeric(df[loss_col], errors="coerce").to_numpy(dtype=float), level=level)
    if as_json:
        click.echo(json.dumps({**rule.to_dict(), "level": level}))
        return
    click.echo(f"{x_col}_opt = {rule.coef:.4g} * {budget_col}^{rule.exponent:.4f}")
    for name, value in (("coef", rule.coef), ("exponent", rule.exponent)):
        band = f"   {level:.0%} [{rule.ci[name][0]:.4g}, {rule.ci[name][1]:.4g}]" if name in rule.ci else ""
        click.echo(f"  {name:<8} = {value:.6g}{band}")
    for o in rule.optima:
        where_ = "edge of the sweep: a bound, left out of the fit" if o.at_edge else f"rule {float(rule(o.budget)):.4g}"
        click.echo(f"  {budget_col} {o.budget:.4g}: {x_col}_opt {o.x_opt:.4g}, loss {o.loss_opt:.4f} "
                   f"({o.n_values} values; {where_})")

