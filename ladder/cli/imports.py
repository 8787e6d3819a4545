"""`ladder import-results` (runs trained elsewhere, from a CSV of finals or curves or a W&B project, that
stand in for rungs or the hero) and `ladder import-wandb` (a W&B run's history, overlaid as an actual curve)."""

from __future__ import annotations

import json
from pathlib import Path

import click

from ladder.cli.common import UserError, _spec, default_root, set_option, spec_argument, variant_option
from ladder.cli.options import example, json_option, root_option


@click.command("import-results", epilog=example(
    "ladder import-results experiments/marin_moe_535b.py rungs.csv",
    "ladder import-results experiments/marin_moe_535b.py rungs.csv --root runs --json",
    "ladder import-results experiments/tiny.py --from-wandb my-team/scaling-ladder --curves",
    "ladder import-results experiments/olmo_7b.py fits/reference_data/olmo_ladder",
))
@spec_argument
@click.argument("results_csv", metavar="[RESULTS.csv | DIR]", type=click.Path(), required=False)
@click.option("--from-wandb", "from_wandb", default=None, metavar="ENTITY/PROJECT",
              help="Read the runs from a W&B project (online, needs `wandb login`) instead of RESULTS.csv.")
@click.option("--metric", default=None, metavar="KEY",
              help="With --from-wandb: the summary/history key read as the loss (default: final_eval_loss, eval/loss, "
                   "eval_loss, eval/lm_loss, the first a run has).")
@click.option("--curves", is_flag=True, help="With --from-wandb: import each run's whole eval curve, not its final.")
@click.option("--timeout", "timeout_s", type=click.FloatRange(min=1), default=30.0, show_default=True,
              help="With --from-wandb: seconds W&B's API may take per request.")
@root_option
@json_option
@set_option
@variant_option
def import_results(spec_path, results_csv, from_wandb, metric, curves, timeout_s, root, as_json, overrides, variant):
    """Record runs trained elsewhere (rungs or the hero), so fit, predict, gate and report run without training.

    RESULTS.csv: finals, with columns `name` (a rung or the hero) and `loss` (final eval loss), optional
    `tokens`, `params` (active) and `flops`; or whole eval curves, with columns `name` (or `rung`), `step`
    and `loss`, several rows per run, optional `tokens` and `flops`. A curve that ends short of its spec's
    steps is recorded partial. Runs in the file replace their earlier imports; others are kept.
    DIR: OLMo's exported evaluations, a CSV per run named <run>.csv with OLMo's column names; each run's
    C4 loss is its curve and its task metrics are kept for the task forecasts (ladder/imports/olmo.py).
    --from-wandb ENTITY/PROJECT reads them from W&B instead (ladder/imports/wandb_project.py: which run is which).
    Then `ladder submit SPEC` fits and predicts from them.
    """
    from ladder.dag import stages
    from ladder.imports import results as imported

    if (results_csv is None) == (from_wandb is None) or (from_wandb is None and (metric or curves)):
        raise UserError("give RESULTS.csv, or --from-wandb ENTITY/PROJECT (with --metric, --curves if needed)")
    spec = _spec(spec_path, overrides, root, variant)
    if "://" in spec.root:
        raise UserError(f"--root {spec.root}: import-results needs a local ladder root")
    if from_wandb is None and Path(results_csv).is_dir():
        from ladder.imports.olmo import read_olmo_dir

        frame, skipped = read_olmo_dir(results_csv, spec)
        frame = imported.check_results(frame, str(results_csv), spec)
    elif from_wandb is None and _has_domain_column(results_csv):  # per-domain curves: kept beside the results
        from ladder.analysis.domain_forecasts import DomainImportError, import_domain_curves

        try:
            frame = import_domain_curves(results_csv, {r.name for r in spec.all_runs()}, Path(spec.root) / spec.name)
        except DomainImportError as exc:
            raise UserError(str(exc)) from None
        click.echo(f"recorded {frame['domain'].nunique()} domains' curves for {frame['name'].nunique()} runs "
                   f"({len(frame)} rows) of {spec.name}; `ladder report {spec_path}` forecasts each domain")
        return 0
    elif from_wandb is None:
        frame, skipped = imported.read_results(results_csv, spec), []
    else:
        from ladder.imports.wandb_project import read_project

        frame, skipped = read_project(from_wandb, spec, metric=metric, curves=curves, timeout_s=timeout_s)
    path = stages.write_imported(spec, frame)
    kind = "curves" if "step" in frame.columns else "results"
    counts = frame.groupby("name", sort=False).size()
    partial = {}
    for name in counts.index:
        record = imported.records(spec)[name]
        if "curve" in record:
            result, _ = imported.result_for(spec.rung(name), record)
            if result.get("partial"):
                partial[str(name)] = result["note"]
    if as_json:
        click.echo(json.dumps({"ladder": spec.name, "path": str(path), "kind": kind, "n_rows": len(frame),
                               "names": [str(n) for n in counts.index], "partial": partial,
                               "source": from_wandb or str(results_csv), "skipped": skipped}))
        return 0
    click.echo(f"recorded {kind} for {len(counts)} runs ({len(frame)} rows) of {spec.name} in {path}; "
               f"now run: ladder submit {spec_path}" + (f" --variant {variant}" if variant else ""))
    for name, note in partial.items():
        click.echo(f"  {name}: {note}")
    for line in skipped:
        click.echo(f"  skipped {line}")
    return 0


@click.command("import-wandb", epilog=example(
    "ladder import-wandb my-team/marin/abc123 --as hero_actual --root runs",
    "ladder import-wandb ent/proj/run --as ref --from-csv history.csv --keys train/loss=loss --json",
))
@click.argument("run_path", metavar="ENTITY/PROJECT/RUN_ID")
@click.option("--as", "name", required=True, help="Name to show the run under (letters, digits, _ . -).")
@click.option("--keys", multiple=True, metavar="KEY[=NAME]",
              help="History keys to import (repeatable or comma-separated); KEY=NAME renames, e.g. "
                   "train/loss=loss. Default: the usual step/tokens/loss keys and every */loss key.")
@click.option("--from-csv", "from_csv", type=click.Path(dir_okay=False), default=None,
              help="Read an exported history CSV instead of calling the W&B API.")
@click.option("--metric", default=None, metavar="NAME",
              help="The metric to import as the loss: a history key (e.g. eval/paloma/macro_loss), or, for a CSV "
                   "with a 'metric' column naming each row's metric, that name (required when it holds several).")
@click.option("--root", default=None, envvar="LADDER_ROOT", show_envvar=True,
              help="Ladder root (default: LADDER_ROOT, else ./runs).")
@click.option("--ladder", "ladder_name", default=None,
              help="Ladder to attach the run to (default: the only ladder under the root).")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead of text.")
def import_wandb(run_path, name, keys, from_csv, metric, root, ladder_name, as_json):
    """Import a W&B run's history as an actual curve the dashboard and report overlay."""
    from ladder.imports.wandb_run import import_run

    out, n = import_run(run_path, name, root=root or default_root(), ladder=ladder_name, keys=keys,
                        from_csv=from_csv, metric=metric)
    if as_json:
        click.echo(json.dumps({"run": run_path, "name": name, "metric": metric, "rows": n, "path": str(out)}))
        return 0
    click.echo(f"imported {n} rows of {run_path}{f' ({metric})' if metric else ''} as {name}: {out}")
    return 0


def _has_domain_column(path: str) -> bool:
    import csv

    try:
        with open(path, newline="", encoding="utf-8-sig") as fh:
            return "domain" in [h.strip() for h in next(csv.reader(fh), [])]
    except (OSError, UnicodeDecodeError, csv.Error):
        return False  # read_results names the problem
