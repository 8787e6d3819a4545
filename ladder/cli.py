"""The `ladder` command line.

Exit codes: 0 ok; 1 a run failed (or the hero was blocked by the gate); 2 bad input, reported as
one line naming the field or file and the fix, with nothing written.
"""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path

import click

from ladder.executor.store import ConfigError
from ladder.spec import LadderSpec, SpecError, load_spec

EXIT_FAILED = 1
EXIT_BAD_INPUT = 2


class UserError(click.ClickException):
    """A user mistake: one line on stderr, exit 2, no traceback."""

    exit_code = EXIT_BAD_INPUT

    def show(self, file=None) -> None:  # one line, no usage block
        click.echo(f"error: {self.format_message()}", err=True)


class LadderGroup(click.Group):
    """Turns every user mistake (spec problems, click usage errors) into one line and exit 2."""

    def main(self, *args, **kwargs):
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
        except SpecError as exc:
            for line in exc.problems:
                click.echo(f"error: {line}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except ConfigError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except click.exceptions.Exit as exc:
            sys.exit(exc.exit_code)
        except click.Abort:
            click.echo("aborted", err=True)
            sys.exit(130)
        except click.ClickException as exc:
            if isinstance(exc, click.UsageError) and exc.ctx is not None:
                message = f"{exc.ctx.command_path}: {exc.format_message()} (see --help)"
            else:
                message = exc.format_message()
            click.echo(f"error: {message}", err=True)
            sys.exit(exc.exit_code)
        sys.exit(rv if isinstance(rv, int) else 0)


@click.group(cls=LadderGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="scaling-ladder")
def main() -> None:
    """Run a scaling ladder as a Ray DAG, fit scaling laws, predict and watch the hero run."""


# ------------------------------------------------------------------------------------------
# Shared options.


def _spec(path: str, overrides: tuple[str, ...], root: str | None) -> LadderSpec:
    import dataclasses

    spec = load_spec(path, overrides)
    if root is not None:
        spec = dataclasses.replace(spec, root=root)
    if os.environ.get("LADDER_ROOT") and root is None:
        spec = dataclasses.replace(spec, root=os.environ["LADDER_ROOT"])
    _check_root(spec.root)
    return spec


def _check_root(root: str) -> None:
    if "://" in root:
        import fsspec

        protocol = root.split("://", 1)[0]
        try:
            fsspec.get_filesystem_class(protocol)
        except (ValueError, ImportError) as exc:
            raise UserError(f"--root {root}: unsupported storage URL ({exc}); use a local path, file://, gs:// or s3://") from exc
        if protocol in ("http", "https"):
            raise UserError(f"--root {root}: http(s) storage is read-only; use a local path, file://, gs:// or s3://")
        try:
            fs, path = fsspec.core.url_to_fs(root)
            fs.exists(path)
        except Exception as exc:  # any backend's failure to connect is a bad --root, reported in one line
            reason = str(exc).splitlines()[0][:160] if str(exc) else type(exc).__name__
            raise UserError(f"--root {root}: cannot reach the storage ({reason}); check the URL and credentials") from exc
        return
    path = Path(root)
    existing = path
    while not existing.exists():
        existing = existing.parent
    if not existing.is_dir():
        raise UserError(f"--root {root}: {existing} is a file, not a folder; give a folder for the ladder's outputs")
    if not os.access(existing, os.W_OK):
        raise UserError(f"--root {root}: {existing} is not writable; give a folder you can write to")


spec_argument = click.argument("spec_path", metavar="SPEC", type=click.Path(dir_okay=False))
set_option = click.option(
    "--set", "overrides", multiple=True, metavar="KEY=VALUE",
    help="Override a spec field, e.g. --set seed=3 or --set rungs[0].tokens=100000 (repeatable).",
)
root_option = click.option("--root", default=None, help="Ladder root: a local folder or an fsspec URL (default: the spec's root).")
json_option = click.option("--json", "as_json", is_flag=True, help="Print machine-readable JSON.")


def _positive(ctx, param, value):
    if value is not None and value <= 0:
        raise click.BadParameter(f"must be positive, got {value}")
    return value


# ------------------------------------------------------------------------------------------
# Ladder commands.


@main.command()
@spec_argument
@root_option
@click.option("--address", default=None, help="Ray cluster address (default: RAY_ADDRESS, else a local Ray).")
@click.option("--dry-run", is_flag=True, help="Print the plan and run nothing.")
@click.option("--max-concurrent", type=int, default=None, callback=_positive, help="At most N steps at once.")
@click.option("--force", "force_gate", is_flag=True, help="Start the hero even if the gate blocks it.")
@click.option("--wandb", "wandb_mode", type=click.Choice(["auto", "online", "offline", "disabled"]), default=None,
              help="W&B mode (default: the spec's).")
@click.option("--progress/--no-progress", default=None, help="Live progress lines (default: on a terminal).")
@click.option("--rerun-stale", is_flag=True,
              help="Also rerun, from nothing, finished steps whose code changed since they ran (see `ladder plan`).")
@set_option
def submit(spec_path, root, address, dry_run, max_concurrent, force_gate, wandb_mode, progress, rerun_stale,
           overrides):
    """Run every step of the ladder that is not already done (resumable)."""
    from ladder import stages

    spec = _spec(spec_path, overrides, root)
    if dry_run:
        _print_plan(spec, force=(), rerun_stale=rerun_stale)
        return 0
    summary = stages.run_ladder(
        spec, address=address or os.environ.get("RAY_ADDRESS"), max_concurrent=max_concurrent,
        runtime={"force_gate": force_gate, "wandb_mode": wandb_mode},
        show_progress=sys.stdout.isatty() if progress is None else progress, rerun_stale=rerun_stale,
    )
    return _finish(spec, summary)


@main.command()
@spec_argument
@click.argument("steps", nargs=-1, required=True)
@root_option
@click.option("--address", default=None, help="Ray cluster address.")
@click.option("--force", "force_gate", is_flag=True, help="Start the hero even if the gate blocks it.")
@click.option("--progress/--no-progress", default=None)
@set_option
def rerun(spec_path, steps, root, address, force_gate, progress, overrides):
    """Force STEPS (e.g. rung_2), then refresh the analysis steps that read them; the hero is not retrained."""
    from ladder import stages

    spec = _spec(spec_path, overrides, root)
    known = {s.name for s in stages.build_steps(spec)}
    for name in steps:
        if name not in known:
            raise UserError(f"rerun: no step named {name!r}; steps are {', '.join(sorted(known))}")
    summary = stages.run_ladder(
        spec, force=steps, address=address or os.environ.get("RAY_ADDRESS"),
        runtime={"force_gate": force_gate}, show_progress=sys.stdout.isatty() if progress is None else progress,
    )
    return _finish(spec, summary)


def _finish(spec: LadderSpec, summary) -> int:
    from ladder import stages

    for line in stages.summary_lines(spec, summary):
        click.echo(line)
    return 0 if summary.ok else EXIT_FAILED


@main.command()
@spec_argument
@root_option
@click.option("--mfu", type=float, default=0.4, show_default=True, callback=_positive,
              help="Assumed model FLOPs utilisation for accelerator-hours.")
@click.option("--chip-peak", type=float, default=989e12, show_default=True, callback=_positive,
              help="Accelerator peak FLOP/s (default: H100 bf16 dense).")
@json_option
@click.option("--rerun-stale", is_flag=True,
              help="Also rerun, from nothing, finished steps whose code changed since they ran (see `ladder plan`).")
@set_option
def plan(spec_path, root, mfu, chip_peak, as_json, rerun_stale, overrides):
    """Dry run: each step's action (run/skip/wait) and why, its output path, FLOPs and accelerator-hours;
    finished steps whose code changed since they ran are marked stale."""
    spec = _spec(spec_path, overrides, root)
    _print_plan(spec, force=(), mfu=mfu, chip_peak=chip_peak, as_json=as_json, rerun_stale=rerun_stale)
    return 0


def _print_plan(spec, force, mfu=0.4, chip_peak=989e12, as_json=False, rerun_stale=False) -> None:
    from rich.console import Console
    from rich.table import Table

    from ladder import stages

    entries = stages.plan_ladder(spec, force=force, rerun_stale=rerun_stale)
    rows = []
    for e in entries:
        hours = e.flops / (mfu * chip_peak) / 3600 if e.flops else 0.0
        rows.append({"step": e.name, "action": e.action, "reason": e.reason, "hash": e.hash, "path": e.path,
                     "flops": e.flops, "accelerator_hours": hours, "stale": e.stale})
    if as_json:
        click.echo(json.dumps({"ladder": spec.name, "mfu": mfu, "chip_peak": chip_peak, "steps": rows}, indent=2))
        return
    table = Table(title=f"plan: {spec.name}  (accelerator-hours at MFU {mfu:.0%} of {chip_peak:.3g} FLOP/s)")
    for col in ("step", "action", "reason", "hash", "FLOPs", "accel-h", "path"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r["step"], r["action"], r["reason"], r["hash"], f"{r['flops']:.3g}" if r["flops"] else "-",
                      f"{r['accelerator_hours']:.3g}" if r["flops"] else "-", r["path"])
    total = sum(r["flops"] for r in rows)
    Console(width=200).print(table)
    stale = [r["step"] for r in rows if r["stale"] and r["action"] == "skip"]
    if stale:
        click.echo(f"stale (code changed since they ran; --rerun-stale reruns them): {', '.join(stale)}")
    click.echo(f"total FLOPs {total:.3g}; accelerator-hours {total / (mfu * chip_peak) / 3600:.3g}")


@main.command()
@spec_argument
@root_option
@json_option
@set_option
def status(spec_path, root, as_json, overrides):
    """Each step's status, output path, start/end and latest loss."""
    from rich.console import Console
    from rich.table import Table

    from ladder import stages

    spec = _spec(spec_path, overrides, root)
    rows = stages.status_ladder(spec)
    if as_json:
        click.echo(json.dumps({"ladder": spec.name, "steps": rows}, indent=2, default=str))
        return 0
    table = Table(title=f"status: {spec.name}")
    for col in ("step", "status", "progress", "loss", "start", "end", "path"):
        table.add_column(col, overflow="fold")
    for r in rows:
        prog = r.get("progress") or {}
        done = f"{prog.get('step', '')}/{prog.get('total_steps', '')}" if prog else ""
        loss = r.get("loss")
        table.add_row(r["step"], r["status"], done, f"{loss:.4f}" if isinstance(loss, float) else "",
                      _when(r.get("start")), _when(r.get("end")), r["path"])
    Console(width=200).print(table)
    return 0


def _when(epoch) -> str:
    import datetime

    if not isinstance(epoch, int | float):
        return ""
    return datetime.datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M:%S")


@main.command()
@spec_argument
@click.argument("rung_name", metavar="RUNG")
@root_option
@click.option("--steps", type=int, default=None, callback=_positive, help="Stop after N optimizer steps.")
@set_option
def train(spec_path, rung_name, root, steps, overrides):
    """Train one rung alone, outside the DAG, with the same outputs (<root>/<ladder>/train-<rung>)."""
    from ladder import stages

    spec = _spec(spec_path, overrides, root)
    names = [r.name for r in spec.all_runs()]
    if rung_name not in names:
        raise UserError(f"train: no rung named {rung_name!r}; runs are {', '.join(names)}")
    try:
        result = stages.train_alone(spec, rung_name, max_steps=steps)
    except Exception as e:
        # Imported only now: they import JAX, which must start after train_alone set XLA's flags.
        from ladder.train.checkpoint import CheckpointRestoreError
        from ladder.train.outputs import TrainConfigMismatch

        if isinstance(e, TrainConfigMismatch):
            raise UserError(f"train: {e}") from None
        if isinstance(e, CheckpointRestoreError):
            click.echo(f"train: {e}", err=True)
            return EXIT_FAILED
        raise
    click.echo(json.dumps({k: v for k, v in result.items() if not isinstance(v, list | dict)}, indent=2, default=str))
    return 0 if result.get("status") == "SUCCESS" else EXIT_FAILED


@main.command()
@spec_argument
@root_option
@json_option
@set_option
def report(spec_path, root, as_json, overrides):
    """Predicted against actual: the hero's final loss and curve, the fit, the backtest; writes report.html."""
    from ladder import stages

    spec = _spec(spec_path, overrides, root)
    rep, html_path = stages.build_report(spec)
    if as_json:
        click.echo(json.dumps(rep, indent=2, default=str))
        return 0
    for line in stages.report_lines(rep):
        click.echo(line)
    if html_path:
        click.echo(f"report: {html_path}")
    return 0


def _numbers(kind):
    def parse(ctx, param, value):
        if value is None:
            return ()
        try:
            return tuple(kind(v) for v in value.split(",") if v.strip())
        except ValueError:
            raise click.BadParameter(f"{value!r}: give comma-separated numbers, e.g. 0.5,1,2") from None
    return parse


@main.command()
@spec_argument
@click.option("--rungs", "rung_names", required=True, help="Comma-separated rungs to sweep, e.g. rung_1,rung_3,rung_5.")
@click.option("--lr", "lr_mults", default="0.5,0.71,1,1.41,2", show_default=True, callback=_numbers(float),
              help="Multiples of each rung's own learning rate.")
@click.option("--batch", "batches", default=None, callback=_numbers(int),
              help="Batch sizes in sequences to cross with --lr (default: each rung's own).")
@root_option
@click.option("--address", default=None, help="Ray cluster address (default: RAY_ADDRESS, else a local Ray).")
@click.option("--dry-run", is_flag=True, help="Print the sweep's steps and run nothing.")
@click.option("--max-concurrent", type=int, default=None, callback=_positive, help="At most N runs at once.")
@json_option
@set_option
def sweep(spec_path, rung_names, lr_mults, batches, root, address, dry_run, max_concurrent, as_json, overrides):
    """Train rungs at several learning rates and fit lr_opt = coef * C^exponent (resumable)."""
    from ladder import sweep as sweep_lib

    spec = _spec(spec_path, overrides, root)
    runs = sweep_lib.sweep_runs(spec, [n.strip() for n in rung_names.split(",") if n.strip()], lr_mults, batches)
    if dry_run:
        for e in sweep_lib.plan_sweep(spec, runs):
            click.echo(f"{e.name:<24} {e.action:<5} {e.path}")
        return 0
    summary = sweep_lib.run_sweep(spec, runs, address=address or os.environ.get("RAY_ADDRESS"),
                                  max_concurrent=max_concurrent, show_progress=sys.stdout.isatty())
    if not summary.ok:
        return _finish(sweep_lib.sweep_spec(spec), summary)
    out, rule = sweep_lib.sweep_result(spec, runs)
    if as_json:
        click.echo(json.dumps({"dir": out, **rule}))
        return 0
    for r in rule["rules"]:
        head = f"batch {r['batch']}: "
        if "error" in r:
            click.echo(head + r["error"])
            continue
        ci = r["ci"].get("exponent")
        click.echo(head + f"lr_opt = {r['coef']:.4g} * C^{r['exponent']:.4f}"
                   + (f"   exponent 90% [{ci[0]:.3f}, {ci[1]:.3f}]" if ci else ""))
        for o in r["optima"]:
            note = "at the edge of the sweep: widen it" if o["at_edge"] else "vertex"
            click.echo(f"  C {o['budget']:.3g}: lr_opt {o['x_opt']:.4g}  loss {o['loss_opt']:.4f}  ({note})")
    click.echo(f"sweep: {out}/{sweep_lib.SWEEP_CSV}")
    return 0


@main.command("import-results")
@spec_argument
@click.argument("results_csv", metavar="RESULTS.csv", type=click.Path(dir_okay=False))
@root_option
@set_option
def import_results(spec_path, results_csv, root, overrides):
    """Record rung (or hero) results trained elsewhere, so fit, predict, gate and report run without training.

    RESULTS.csv has columns `name` (a rung or the hero) and `loss` (final eval loss); optional `tokens`,
    `params` (active) and `flops`. Then `ladder submit SPEC` fits and predicts from them.
    """
    import math

    import pandas as pd

    from ladder import stages

    spec = _spec(spec_path, overrides, root)
    if "://" in spec.root:
        raise UserError(f"--root {spec.root}: import-results needs a local ladder root")
    try:
        frame = pd.read_csv(results_csv)
    except (OSError, pd.errors.ParserError, pd.errors.EmptyDataError, UnicodeDecodeError) as exc:
        raise UserError(f"{results_csv}: cannot read a CSV ({type(exc).__name__}); give a CSV with columns name, loss") from exc
    for col in ("name", "loss"):
        if col not in frame.columns:
            raise UserError(f"{results_csv}: missing column '{col}'; give columns name, loss (optional tokens, params, flops)")
    names = {r.name for r in spec.all_runs()}
    for i, row in frame.iterrows():
        if row["name"] not in names:
            raise UserError(f"{results_csv}: row {i + 1}: name {row['name']!r} is not a run of {spec.name} ({', '.join(sorted(names))})")
        for col in ("loss", "tokens", "params", "flops"):
            if col in frame.columns and not pd.isna(row[col]) and not (isinstance(row[col], int | float) and math.isfinite(row[col]) and row[col] > 0):
                raise UserError(f"{results_csv}: row {i + 1}: {col} must be a positive number, got {row[col]!r}")
        if pd.isna(row["loss"]):
            raise UserError(f"{results_csv}: row {i + 1}: loss is empty")
    path = stages.write_imported(spec, frame)
    click.echo(f"recorded {len(frame)} results for {spec.name} in {path}; now run: ladder submit {spec_path}")
    return 0


def _register_optional() -> None:
    """Commands that live beside their subsystem (fits, publish) register themselves here."""
    import importlib

    for module in ("ladder.fits_cli", "ladder.publish.cli"):
        try:
            mod = importlib.import_module(module)
        except ModuleNotFoundError as exc:
            if exc.name != module:
                raise
            continue
        mod.register(main)


_register_optional()


if __name__ == "__main__":
    main()
