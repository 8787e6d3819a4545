"""What `ladder plan` prices beyond the steps it runs: every run's size and compute, the hero's too
(also when it trains elsewhere), in our counting convention and, where the spec carries a
baseline's figures (Marin's lm_head-free compute), in theirs; hours on a named accelerator at a
named MFU, and the hero's wall-clock days on a number of those accelerators; and what trains each run
(its trainer, a command's command line). Figures and lines only: ladder.cli.plan prints them.
"""

from __future__ import annotations

from ladder.spec import LadderSpec
from ladder.trainers.builtin.memory_plan import rung_layout


def run_figures(spec: LadderSpec, mfu: float, chip_peak: float, chips: int | None) -> list[dict]:
    theirs = dict(spec.fit.baseline_flops_per_step or {})
    out = []
    for run in spec.all_runs():
        role = "hero" if spec.hero is not None and run.name == spec.hero.name else "rung"
        gang = rung_layout(run)
        row = {"name": run.name, "role": role, "params_active": run.model.params_active,
               "devices": gang.devices, "hosts": gang.processes, "microbatches": gang.microbatches,
               "rows_per_pass": gang.rows_per_pass, "memory_per_device": gang.memory_bytes,
               "params_total": run.model.params_total, "tokens": run.tokens, "steps": run.steps,
               "flops": run.flops, "accelerator_hours": run.flops / (mfu * chip_peak) / 3600,
               "trained_here": role == "rung" or spec.train_hero, "placement": run.placement}
        if run.name in theirs:
            row["flops_baseline"] = float(theirs[run.name]) * run.steps
            row["baseline"] = spec.fit.baseline
            row["accelerator_hours_baseline"] = row["flops_baseline"] / (mfu * chip_peak) / 3600
        if role == "hero" and chips:
            row["chips"] = chips
            row["days"] = row["accelerator_hours"] / chips / 24
            if "accelerator_hours_baseline" in row:
                row["days_baseline"] = row["accelerator_hours_baseline"] / chips / 24
        out.append(row)
    return out


def lines(runs: list[dict], accelerator: str, mfu: float, chips: int | None) -> list[str]:
    out = ["", f"{'run':<8} {'active':>10} {'total':>10} {'tokens':>9} {'FLOPs (ours)':>13} {'FLOPs (baseline)':>17} "
           f"{'accel-h':>10}"]
    for r in runs:
        base = f"{r['flops_baseline']:>17.4g}" if "flops_baseline" in r else f"{'-':>17}"
        out.append(f"{r['name']:<8} {r['params_active']:>10.4g} {r['params_total']:>10.4g} {r['tokens']:>9.3g} "
                   f"{r['flops']:>13.4g} {base} {r['accelerator_hours']:>10.3g}"
                   + ("" if r["trained_here"] else "  (trained elsewhere)")
                   + ("  (size from isoflop: the sweep has not run)" if r["placement"].startswith("pending") else ""))
    out += ["", f"{'run':<8} {'devices':>7} {'hosts':>5} {'microbatches':>12} {'seqs/pass':>9} {'memory/device':>13}"]
    for r in runs:
        out.append(f"{r['name']:<8} {r['devices']:>7} {r['hosts']:>5} {r['microbatches']:>12} {r['rows_per_pass']:>9} "
                   f"{r['memory_per_device'] / 2**30:>10.3g} GiB" + ("  (a gang of JAX processes)" if r["hosts"] > 1 else ""))
    for r in runs:
        if r["role"] != "hero":
            continue
        where = "here" if r["trained_here"] else "elsewhere"
        text = (f"hero {r['name']} (trained {where}): {r['accelerator_hours']:.3g} {accelerator}-hours at MFU {mfu:.0%} "
                f"on our FLOPs ({r['flops']:.3g})")
        if "flops_baseline" in r:
            text += f", {r['accelerator_hours_baseline']:.3g} on {r['baseline']}'s ({r['flops_baseline']:.3g})"
        out.append(text)
        if chips:
            days = f"{r['days']:.1f} days"
            if "days_baseline" in r:
                days += f" ({r['days_baseline']:.1f} on {r['baseline']}'s FLOPs)"
            out.append(f"  on {chips} {accelerator}s: {r['accelerator_hours'] / chips:.4g} hours, {days}")
        else:
            out.append("  give --chips N for its wall-clock days on N accelerators")
    return out


def trainer_rows(spec: LadderSpec, paths: dict[str, str]) -> list[dict]:
    """Each run's trainer: its kind and, for a command, its command line as it would run into ``paths[name]``
    (the step's folder); the template where the run is not resolved yet (an IsoFLOP placement pending)."""
    from ladder.dag.train_steps import run_data
    from ladder.trainers import command
    from ladder.trainers.contract import placeholder_values, run_input

    out = []
    for run in spec.all_runs():
        t = spec.trainer_of(run)
        row = {"name": run.name, "trainer": t.kind}
        if t.kind == "callable":
            row["function"] = t.function
        if t.kind == "command":
            row["argv"] = list(t.command)
            role = "hero" if spec.hero is not None and run.name == spec.hero.name else "rung"
            if isinstance(run.batch_size, int) and run.seed is not None and run.name in paths:
                inp = run_input(run, run_data(spec, role), paths[run.name], role=role, ladder=spec.name, resume=False)
                values = placeholder_values(inp, f"{paths[run.name]}/run.json")
                row["argv"] = command.argv({"command": t.command}, values)
        out.append(row)
    return out


def trainer_lines(rows: list[dict]) -> list[str]:
    """The plan's trainer section: nothing when every run is the built-in trainer's."""
    if all(r["trainer"] == "builtin" for r in rows):
        return []
    import shlex

    out = ["", f"{'run':<8} trainer"]
    for r in rows:
        what = shlex.join(r["argv"]) if "argv" in r else r.get("function", "")
        out.append(f"{r['name']:<8} {r['trainer']:<8} {what}".rstrip())
    return out
