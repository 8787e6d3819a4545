"""`ladder plan` (and `submit --dry-run`, `rerun --dry-run`) printed: the steps with their costs, every run's
size and compute, each run's trainer. The figures come from ladder.dag.plan_costs."""

from __future__ import annotations

import json

import click

from ladder.cli.options import table_width
from ladder.dag.plan_costs import lines, run_figures, trainer_lines, trainer_rows


def print_plan(spec, force, mfu=0.4, chip_peak=None, as_json=False, accelerator="H100", chips=None,
                rerun_stale=False) -> None:
    """The plan `ladder plan` (and `submit`/`rerun --dry-run`) prints: each step and its cost, then every run's."""
    from rich.console import Console
    from rich.table import Table

    from ladder.dag import stages
    from ladder.trainers.builtin.peaks import accelerator_peak

    chip_peak = chip_peak or accelerator_peak(accelerator)
    entries = stages.plan_ladder(spec, force=force, rerun_stale=rerun_stale)
    rows = []
    for e in entries:
        hours = e.flops / (mfu * chip_peak) / 3600 if e.flops else 0.0
        rows.append({"step": e.name, "action": e.action, "reason": e.reason, "hash": e.hash, "path": e.path,
                     "flops": e.flops, "accelerator_hours": hours, "stale": e.stale})
    placed = stages.placed(spec)
    runs = run_figures(placed, mfu, chip_peak, chips)
    trainers = trainer_rows(placed, {r["step"]: r["path"] for r in rows})
    by_run = {t["name"]: t for t in trainers}
    for r in rows:
        if r["step"] in by_run:
            r.update({k: v for k, v in by_run[r["step"]].items() if k != "name"})
    from ladder.dag.tokenize import plan_lines, plan_rows

    data = plan_rows(spec, entries)
    if as_json:
        click.echo(json.dumps({"ladder": spec.name, "mfu": mfu, "chip_peak": chip_peak, "accelerator": accelerator,
                               "steps": rows, "runs": runs, **({"data": data} if data else {})}, indent=2))
        return
    table = Table(title=f"plan: {spec.name}  (accelerator-hours at MFU {mfu:.0%} of {accelerator}, {chip_peak:.3g} FLOP/s)")
    for col in ("step", "action", "reason", "hash", "FLOPs", "accel-h", "path"):
        table.add_column(col, overflow="fold")
    for r in rows:
        table.add_row(r["step"], r["action"], r["reason"], r["hash"], f"{r['flops']:.3g}" if r["flops"] else "-",
                      f"{r['accelerator_hours']:.3g}" if r["flops"] else "-", r["path"])
    total = sum(r["flops"] for r in rows)
    Console(width=table_width()).print(table)
    stale = [r["step"] for r in rows if r["stale"] and r["action"] == "skip"]
    if stale:
        click.echo(f"stale (code changed since they ran; --rerun-stale reruns them): {', '.join(stale)}")
    click.echo(f"total FLOPs {total:.3g}; accelerator-hours {total / (mfu * chip_peak) / 3600:.3g}")
    for line in plan_lines(data):
        click.echo(line)
    for line in lines(runs, accelerator, mfu, chips) + trainer_lines(trainers):
        click.echo(line)
