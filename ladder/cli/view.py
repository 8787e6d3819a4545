"""`ladder report` and `ladder dashboard`: a ladder's outputs as a report and as a live page."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from ladder.cli.common import UserError, default_root
from ladder.cli.options import example


def report_command() -> click.Command:
    """`ladder report`, built on the spec argument and options every ladder command shares."""
    from ladder.cli.common import EXIT_FAILED, _spec, set_option, spec_argument, variant_option
    from ladder.cli.options import json_option, root_option

    @click.command(epilog=example(
        "ladder report experiments/tiny.py",
        "ladder report experiments/marin_moe_535b.py --json",
    ))
    @spec_argument
    @root_option
    @json_option
    @set_option
    @variant_option
    def report(spec_path, root, as_json, overrides, variant):
        """Predicted against actual: the hero's final loss and curve, the fit, the backtest; writes report.html."""
        from ladder.dag import queries

        spec = _spec(spec_path, overrides, root, variant)
        if not queries.has_outputs(spec):  # reading writes nothing: no report of nothing, no folders made
            others = queries.other_configurations(spec)
            if others:  # the usual cause: the submit had a --set (a seed) that this report does not
                click.echo(f"nothing to report: no step of ladder {spec.name} as configured here has output under "
                           f"{spec.root}, but {len(others)} step folders there (e.g. {others[0]}) were written by "
                           f"another configuration; pass the --set options the submit used")
                return EXIT_FAILED
            click.echo(f"nothing to report: ladder {spec.name} has not run under {spec.root} (no step has written "
                       f"output); run: ladder submit {spec_path} --root {spec.root}")
            return EXIT_FAILED
        rep, html_path = queries.build_report(spec)
        if as_json:
            click.echo(json.dumps(rep, indent=2, default=str))
            return 0
        from ladder.report.headline import final_lines

        for line in queries.report_lines(rep) + final_lines(rep, html_path, spec, spec_path, overrides):
            click.echo(line)
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

    root = root or default_root()
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

