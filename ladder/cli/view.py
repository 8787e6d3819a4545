"""`ladder report`, `ladder dashboard` and `ladder import-wandb`."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from ladder.cli.common import UserError
from ladder.cli.options import example


def _default_root() -> str:
    return os.environ.get("LADDER_ROOT") or "runs"


def report_command() -> click.Command:
    from ladder.cli.common import EXIT_FAILED, _spec, set_option, spec_argument
    from ladder.cli.options import json_option, root_option

    @click.command(epilog=example(
        "ladder report experiments/tiny.py",
        "ladder report experiments/marin_moe_535b.py --json",
    ))
    @spec_argument
    @root_option
    @json_option
    @set_option
    def report(spec_path, root, as_json, overrides):
        """Predicted against actual: the hero's final loss and curve, the fit, the backtest; writes report.html."""
        from ladder.dag import stages

        spec = _spec(spec_path, overrides, root)
        if not stages.has_outputs(spec):  # reading writes nothing: no report of nothing, no folders made
            others = stages.other_configurations(spec)
            if others:  # the usual cause: the submit had a --set (a seed) that this report does not
                click.echo(f"nothing to report: no step of ladder {spec.name} as configured here has output under "
                           f"{spec.root}, but {len(others)} step folders there (e.g. {others[0]}) were written by "
                           f"another configuration; pass the --set options the submit used")
                return EXIT_FAILED
            click.echo(f"nothing to report: ladder {spec.name} has not run under {spec.root} (no step has written "
                       f"output); run: ladder submit {spec_path} --root {spec.root}")
            return EXIT_FAILED
        rep, html_path = stages.build_report(spec)
        if as_json:
            click.echo(json.dumps(rep, indent=2, default=str))
            return 0
        for line in stages.report_lines(rep):
            click.echo(line)
        if html_path:
            click.echo(f"report: {html_path}")
        return 0

    return report


@click.command(epilog=example("ladder dashboard --root runs", "ladder dashboard --root runs --port 0 --verbose",
                              "ladder dashboard --root runs --port 0 --json &   # a script reads the port off line 1"))
@click.option("--root", default=None, envvar="LADDER_ROOT", show_envvar=True,
              help="Ladder root to show (default: LADDER_ROOT, else ./runs).")
@click.option("--host", default="127.0.0.1", show_default=True,
              help="Address to bind; anything but loopback exposes the (read-only) dashboard to the network.")
@click.option("--port", type=int, default=8765, show_default=True, help="Port (0 picks a free one).")
@click.option("--verbose", is_flag=True, help="Log every request.")
@click.option("--json", "as_json", is_flag=True,
              help="Once listening, print one JSON line (url, api, host, port, pid, root), then serve.")
def dashboard(root, host, port, verbose, as_json):
    """Serve a live, read-only dashboard of every ladder under the root.

    With --json the first line of stdout is {"url", "api", "host", "port", "pid", "root"}, printed only
    once the port accepts connections: a script started with --port 0 learns the port there, reads the
    ladders from `api` (GET, JSON) and stops the server with `kill PID`.
    """
    from ladder.dashboard.server import DashboardServer

    root = root or _default_root()
    if "://" in root:
        raise UserError(f"--root {root}: the dashboard reads a local folder; copy or mount the root locally")
    path = Path(root).expanduser()
    if not path.is_dir():
        raise UserError(f"--root {root}: no such folder; give the folder a ladder was submitted with (--root)")
    if not 0 <= port <= 65535:
        raise UserError(f"--port {port}: must be between 0 and 65535")
    try:
        server = DashboardServer(path, host=host, port=port, quiet=not verbose)
    except OSError as exc:
        raise UserError(f"--host {host} --port {port}: cannot listen ({exc.strerror or exc}); "
                       "pick another port, e.g. --port 0") from exc
    if as_json:
        click.echo(json.dumps({"url": server.url, "api": f"{server.url}api/ladders", "host": server.host,
                               "port": server.port, "pid": os.getpid(), "root": str(path.resolve())}))
    else:
        click.echo(f"dashboard of {path.resolve()} at {server.url}  (Ctrl-C to stop)")
    sys.stdout.flush()
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
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

    out, n = import_run(run_path, name, root=root or _default_root(), ladder=ladder_name, keys=keys,
                        from_csv=from_csv, metric=metric)
    if as_json:
        click.echo(json.dumps({"run": run_path, "name": name, "metric": metric, "rows": n, "path": str(out)}))
        return 0
    click.echo(f"imported {n} rows of {run_path}{f' ({metric})' if metric else ''} as {name}: {out}")
    return 0
