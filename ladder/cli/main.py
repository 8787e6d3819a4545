"""The `ladder` command line.

Exit codes: 0 ok; 1 a run failed (or the hero was blocked by the gate); 2 bad input, reported as
one line naming the field or file and the fix, with nothing written.
"""

from __future__ import annotations

import json
import os
import sys

import click

from ladder.cli import compare, export, fits_curves, follow, imports, show, view
from ladder.cli import fits as fits_commands
from ladder.cli.common import (
    EXIT_FAILED,
    LadderGroup,
    UserError,
    _positive,
    _spec,
    progress_interval,
    set_option,
    spec_argument,
    variant_option,
)
from ladder.cli.options import address_option, example, json_option, root_option, table_width
from ladder.cli.plan import print_plan as _print_plan
from ladder.spec import LadderSpec
from ladder.trainers.builtin.peaks import ACCELERATORS, accelerator_peak


@click.group(cls=LadderGroup, context_settings={"help_option_names": ["-h", "--help"]}, epilog=example(
    "ladder fit runs.csv --bootstrap 200 --out fit.json && ladder predict fit.json --params 7e10 --tokens 1.4e12",
    "ladder submit experiments/tiny.py --root runs && ladder report experiments/tiny.py --root runs",
    "ladder show experiments/tiny.py          # every spec field, its default and meaning",
    "eval \"$(_LADDER_COMPLETE=bash_source ladder)\"   # shell completion (zsh_source, fish_source)",
))
@click.version_option(package_name="scaling-ladder")
def main() -> None:
    """Run a scaling ladder as a Ray DAG, fit scaling laws, predict and watch the hero run."""
    if not sys.stdout.isatty():
        # Ray colours its workers' log prefixes even into a file; a log should hold plain text.
        os.environ.setdefault("RAY_COLOR_PREFIX", "0")


# ------------------------------------------------------------------------------------------
# Ladder commands (shared options and the error handling are in ladder.cli.common).


@main.command(epilog=example(
    "ladder submit experiments/tiny.py --root runs",
    "ladder submit experiments/tiny.py --set seed=3 --address ray://head:10001",
    "ladder submit experiments/tiny.py --dry-run --json",
))
@spec_argument
@root_option
@address_option
@click.option("--dry-run", is_flag=True, help="Print the plan and run nothing.")
@click.option("--max-concurrent", type=int, default=None, callback=_positive, help="At most N steps at once.")
@click.option("--force", "force_gate", is_flag=True, help="Start the hero even if the gate blocks it.")
@click.option("--wandb", "wandb_mode", type=click.Choice(["auto", "online", "offline", "disabled"]), default=None,
              help="W&B mode (default: the spec's).")
@click.option("--progress/--no-progress", default=None,
              help="Progress: a live view on a terminal, else plain lines (start, end, one a minute per training step).")
@click.option("--rerun-stale", is_flag=True,
              help="Also rerun, from nothing, finished steps whose code changed since they ran (see `ladder plan`).")
@json_option
@set_option
@variant_option
def submit(spec_path, root, address, dry_run, max_concurrent, force_gate, wandb_mode, progress, rerun_stale, as_json,
           overrides, variant):
    """Run every step of the ladder that is not already done (resumable)."""
    from ladder.dag import stages

    spec = _spec(spec_path, overrides, root, variant)
    if dry_run:
        _print_plan(spec, force=(), as_json=as_json, rerun_stale=rerun_stale)
        return 0
    progress_interval()  # a bad LADDER_PROGRESS_INTERVAL is one line before anything starts
    from ladder.analysis.tasks import check_imported

    check_imported(spec)  # a forecast task no imported rung evaluated: one line before anything runs
    summary = stages.run_ladder(
        spec, address=address or os.environ.get("RAY_ADDRESS"), max_concurrent=max_concurrent,
        runtime={"force_gate": force_gate, "wandb_mode": wandb_mode},
        show_progress=(not as_json) if progress is None else progress, rerun_stale=rerun_stale,
    )
    return _finish(spec, summary, as_json)


@main.command(epilog=example(
    "ladder rerun experiments/tiny.py rung_2",
    "ladder rerun experiments/tiny.py rung_2 rung_3 --dry-run",
))
@spec_argument
@click.argument("steps", nargs=-1, required=True)
@root_option
@address_option
@click.option("--dry-run", is_flag=True, help="Print the plan with STEPS forced and run nothing.")
@click.option("--max-concurrent", type=int, default=None, callback=_positive, help="At most N steps at once.")
@click.option("--force", "force_gate", is_flag=True, help="Start the hero even if the gate blocks it.")
@click.option("--progress/--no-progress", default=None, help="As for submit.")
@json_option
@set_option
@variant_option
def rerun(spec_path, steps, root, address, dry_run, max_concurrent, force_gate, progress, as_json, overrides, variant):
    """Force STEPS (e.g. rung_2), then refresh the analysis steps that read them; the hero is not retrained."""
    from ladder.dag import stages

    spec = _spec(spec_path, overrides, root, variant)
    known = {s.name for s in stages.build_steps(spec)}
    for name in steps:
        if name not in known:
            raise UserError(f"rerun: no step named {name!r}; steps are {', '.join(sorted(known))}")
    if dry_run:
        _print_plan(spec, force=steps, as_json=as_json)
        return 0
    progress_interval()
    summary = stages.run_ladder(
        spec, force=steps, address=address or os.environ.get("RAY_ADDRESS"), max_concurrent=max_concurrent,
        runtime={"force_gate": force_gate},
        show_progress=(not as_json) if progress is None else progress,
    )
    return _finish(spec, summary, as_json)


def _finish(spec: LadderSpec, summary, as_json: bool = False) -> int:
    from ladder.dag import queries

    if as_json:
        steps = [{"step": o.name, "status": o.status, "action": o.action, "reason": o.reason, "path": o.path,
                  "error": str(o.error).splitlines()[-1][:500] if o.error else None} for o in summary.steps.values()]
        click.echo(json.dumps({"ladder": spec.name, "ok": summary.ok, "failed": summary.failed,
                               "blocked": summary.blocked, "elapsed_s": summary.elapsed_s, "steps": steps}, indent=2))
        return 0 if summary.ok else EXIT_FAILED
    for line in queries.summary_lines(spec, summary):
        click.echo(line)
    return 0 if summary.ok else EXIT_FAILED


@main.command(epilog=example(
    "ladder plan experiments/smoke.py",
    "ladder plan experiments/marin_moe_535b.py --mfu 0.35 --chip-peak 2.5e15 --json",
))
@spec_argument
@root_option
@click.option("--mfu", type=float, default=0.4, show_default=True, callback=_positive,
              help="Assumed model FLOPs utilisation for accelerator-hours.")
@click.option("--accelerator", type=click.Choice(sorted(ACCELERATORS)), default="H100", show_default=True,
              help="Accelerator whose dense bf16 datasheet peak (the table MFU uses) prices the runs.")
@click.option("--chip-peak", type=float, default=None, callback=_positive,
              help="Peak FLOP/s per accelerator (overrides --accelerator's).")
@click.option("--chips", type=int, default=None, callback=_positive,
              help="Accelerators the hero runs on: its wall-clock days (e.g. --accelerator GB200 --chips 792).")
@json_option
@click.option("--rerun-stale", is_flag=True,
              help="Also rerun, from nothing, finished steps whose code changed since they ran (see `ladder plan`).")
@set_option
@variant_option
def plan(spec_path, root, mfu, accelerator, chip_peak, chips, as_json, rerun_stale, overrides, variant):
    """Dry run: each step's action (run/skip/wait) and why, its output path, FLOPs and accelerator-hours;
    finished steps whose code changed since they ran are marked stale."""
    spec = _spec(spec_path, overrides, root, variant)
    _print_plan(spec, force=(), mfu=mfu, chip_peak=chip_peak or accelerator_peak(accelerator), as_json=as_json,
                accelerator=accelerator if chip_peak is None else f"{chip_peak:.3g} FLOP/s", chips=chips,
                rerun_stale=rerun_stale)
    return 0


@main.command(epilog=example(
    "ladder status experiments/tiny.py",
    "ladder status experiments/tiny.py --check --json    # exit 1 when a step failed",
))
@spec_argument
@root_option
@click.option("--check", is_flag=True, help="Exit 1 when a step has FAILED (or its dependency failed).")
@json_option
@set_option
@variant_option
def status(spec_path, root, check, as_json, overrides, variant):
    """Each step's status, output path, start/end and latest loss."""
    from rich.console import Console
    from rich.table import Table

    from ladder.dag import queries, stages

    spec = _spec(spec_path, overrides, root, variant)
    rows = stages.status_ladder(spec)
    failed = [r["step"] for r in rows if r.get("status") in ("FAILED", "DEP_FAILED")]
    code = EXIT_FAILED if check and failed else 0
    # Only when nothing of this configuration ran: then "NEW" everywhere is most likely a missing --set.
    others = queries.other_configurations(spec) if all(r.get("status") == "NEW" for r in rows) else []
    if as_json:
        click.echo(json.dumps({"ladder": spec.name, "failed": failed, "steps": rows, "other_configurations": others},
                              indent=2, default=str))
        return code
    table = Table(title=f"status: {spec.name}")
    for col in ("step", "status", "progress", "loss", "start", "end", "path"):
        table.add_column(col, overflow="fold")
    for r in rows:
        prog = r.get("progress") or {}
        done = f"{prog.get('step', '')}/{prog.get('total_steps', '')}" if prog else ""
        loss = r.get("loss")
        table.add_row(r["step"], r["status"] + (f" ({r['note']})" if r.get("note") else ""), done,
                      f"{loss:.4f}" if isinstance(loss, float) else "", _when(r.get("start")), _when(r.get("end")), r["path"])
    Console(width=table_width()).print(table)
    if others:
        click.echo(f"note: nothing of this configuration has run, but {len(others)} step folders under {spec.root} "
                   f"(e.g. {others[0]}) were written by another one; pass the --set options the submit used")
    if check and failed:
        click.echo(f"failed: {', '.join(failed)}", err=True)
    return code


def _when(epoch) -> str:
    import datetime

    if not isinstance(epoch, int | float):
        return ""
    return datetime.datetime.fromtimestamp(epoch).strftime("%Y-%m-%d %H:%M:%S")


@main.command(epilog=example(
    "ladder train experiments/tiny.py rung_1",
    "ladder train experiments/smoke.py rung_1 --steps 20 --json",
))
@spec_argument
@click.argument("rung_name", metavar="RUNG")
@root_option
@click.option("--steps", type=int, default=None, callback=_positive, help="Stop after N optimizer steps.")
@json_option
@set_option
@variant_option
def train(spec_path, rung_name, root, steps, as_json, overrides, variant):
    """Train one rung alone, outside the DAG, with the same outputs (<root>/<ladder>/train-<rung>)."""
    from ladder.dag import stages

    spec = _spec(spec_path, overrides, root, variant)
    names = [r.name for r in spec.all_runs()]
    if rung_name not in names:
        raise UserError(f"train: no rung named {rung_name!r}; runs are {', '.join(names)}")
    from ladder.executor.console import progress_printer

    progress = progress_printer(rung_name, progress_interval())
    try:
        result = stages.train_alone(spec, rung_name, max_steps=steps, progress=progress)
    except Exception as e:
        # Imported only now: they import JAX, which must start after train_alone set XLA's flags.
        from ladder.trainers.builtin.checkpoint import CheckpointRestoreError
        from ladder.trainers.builtin.outputs import TrainConfigMismatch

        if isinstance(e, TrainConfigMismatch):
            raise UserError(f"train: {e}") from None
        from ladder.trainers.builtin.data import DataError
        from ladder.trainers.builtin.shards import ShardError

        if isinstance(e, CheckpointRestoreError | ShardError | DataError):
            click.echo(f"train: {e}", err=True)
            return EXIT_FAILED
        raise
    if result.get("status") == "FAILED" and "params_total" not in result:  # a foreign trainer's failure: its line
        click.echo(f"train: {rung_name} FAILED: {result.get('message')}", err=True)
        return EXIT_FAILED
    flat = {k: v for k, v in result.items() if not isinstance(v, list | dict)}
    if as_json:
        click.echo(json.dumps(flat, indent=2, default=str))
    else:
        for k, v in flat.items():
            click.echo(f"{k}: {v}")
    return 0 if result.get("status") == "SUCCESS" else EXIT_FAILED


def _numbers(kind):
    def parse(ctx, param, value):
        if value is None:
            return ()
        try:
            return tuple(kind(v) for v in value.split(",") if v.strip())
        except ValueError:
            raise click.BadParameter(f"{value!r}: give comma-separated numbers, e.g. 0.5,1,2") from None
    return parse


@main.command(epilog=example(
    "ladder sweep experiments/tiny.py --rungs rung_1,rung_3,rung_5 --lr 0.5,0.71,1,1.41,2",
    "ladder sweep experiments/tiny.py --rungs rung_1,rung_3 --batch 16,32 --dry-run --json",
))
@spec_argument
@click.option("--rungs", "rung_names", required=True, help="Comma-separated rungs to sweep, e.g. rung_1,rung_3,rung_5.")
@click.option("--lr", "lr_mults", default="0.5,0.71,1,1.41,2", show_default=True, callback=_numbers(float),
              help="Multiples of each rung's own learning rate.")
@click.option("--batch", "batches", default=None, callback=_numbers(int),
              help="Batch sizes in sequences to cross with --lr (default: each rung's own).")
@root_option
@address_option
@click.option("--dry-run", is_flag=True, help="Print the sweep's steps and run nothing.")
@click.option("--max-concurrent", type=int, default=None, callback=_positive, help="At most N runs at once.")
@json_option
@set_option
@variant_option
def sweep(spec_path, rung_names, lr_mults, batches, root, address, dry_run, max_concurrent, as_json, overrides, variant):
    """Train rungs at several learning rates and fit lr_opt = coef * C^exponent (resumable)."""
    from ladder.dag import stages
    from ladder.dag import sweep as sweep_lib
    spec = stages.placed(_spec(spec_path, overrides, root, variant))  # budget rungs sized by the IsoFLOP fit
    runs = sweep_lib.sweep_runs(spec, [n.strip() for n in rung_names.split(",") if n.strip()], lr_mults, batches)
    if dry_run:
        entries = sweep_lib.plan_sweep(spec, runs)
        if as_json:
            click.echo(json.dumps({"ladder": spec.name, "steps": [
                {"step": e.name, "action": e.action, "reason": e.reason, "path": e.path} for e in entries]}, indent=2))
            return 0
        for e in entries:
            click.echo(f"{e.name:<24} {e.action:<5} {e.path}")
        return 0
    progress_interval()
    summary = sweep_lib.run_sweep(spec, runs, address=address or os.environ.get("RAY_ADDRESS"),
                                  max_concurrent=max_concurrent, show_progress=True)
    if not summary.ok:
        return _finish(sweep_lib.sweep_spec(spec), summary, as_json)
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


# Every other command, one module a group of them (each imports only click and what `--help` needs).
for _command in (
    fits_commands.fit_cmd, fits_commands.predict_cmd,
    fits_curves.curve_fit_cmd, fits_curves.curve_predict_cmd, fits_curves.fit_rule_cmd,
    imports.import_results, imports.import_wandb,
    show.show, show.env_cmd,
    compare.compare, export.export,
    follow.follow,
    view.report_command(), view.dashboard,
):
    main.add_command(_command)


if __name__ == "__main__":
    main()
