"""The functions a ladder's steps run, inside Ray tasks (config is the step's JSON config).

They are named by ``Step.fn`` ("ladder.dag.step_fns:<name>"); a step's hash does not depend on
where its function lives (ladder.dag.kinds). Kept apart from building the DAG so that editing how
steps are built or planned leaves no finished run stale (ladder.dag.inputs names this file as code).
"""

from __future__ import annotations

from pathlib import Path

from ladder.dag.step_io import local_dirs
from ladder.dag.tokenize import PREFIX as TOKENIZE_PREFIX
from ladder.dag.tokenize import shard_dirs
from ladder.outputs import layout
from ladder.spec import RungSpec, data_from_dict, rung_from_dict


def import_step(config: dict, ctx) -> dict:
    """A run trained elsewhere: its recorded final loss or eval curve in the shape of a training result."""
    from ladder.imports import results as imported

    return imported.import_step(config, ctx)


def train_step(config: dict, ctx) -> dict:
    import jax

    from ladder.trainers.builtin.cores import pinned

    rung = rung_from_dict(config["rung"])
    if rung.resources.processes > 1:
        return _gang_step(rung, config, ctx)
    # XLA's CPU client starts seeing every core of the machine, pinned or not: the cores it sees when
    # it starts change its numbers (d24 and d48 rungs moved when pinned first), the pin afterwards does not.
    jax.devices()
    with pinned(rung.resources.cpus):
        return _train_step(rung, config, ctx)


def _train_step(rung: RungSpec, config: dict, ctx) -> dict:
    from ladder.dag import bpe
    from ladder.trainers.builtin import compile_cache, train
    from ladder.trainers.builtin.mirror import open_output

    compile_cache.enable(ctx.out_dir)
    data = data_from_dict(config["data"])
    # The trainer mirrors a remote out_dir through a local folder; callbacks that write beside it
    # (the hero's forecasts) write into that folder and are uploaded with the metrics.
    # Token shards are mapped where they are (a remote one is cached once per node), never copied whole.
    shards = shard_dirs(ctx.dep_dirs)
    others = {k: v for k, v in ctx.dep_dirs.items() if not k.startswith(TOKENIZE_PREFIX)}
    with open_output(ctx.out_dir) as out, local_dirs(others, ctx.out_dir) as (dep_dirs, _):
        if config.get("role") == "hero":
            _one_prior(out.local, dep_dirs.get("predict"))
        callbacks = run_callbacks(rung, config, str(out.local), dep_dirs, _wandb_callbacks(config, ctx))
        tokenizer_file = ctx.dep_path(bpe.STEP, bpe.FILE) if bpe.STEP in ctx.dep_dirs else None
        result = train(rung, data, out, callbacks=callbacks, progress=lambda row: ctx.progress(**row),
                       should_stop=lambda: ctx.stop_requested, shard_dirs=shards, tokenizer_file=tokenizer_file)
    return _outcome(rung, result)


def _outcome(rung: RungSpec, result: dict) -> dict:
    """A training step's result, or the exception that records how it ended otherwise."""
    if result.get("status") == "INTERRUPTED":
        from ladder.executor import Interrupted

        raise Interrupted(f"{rung.name} checkpointed at step {result.get('steps')}")
    if result.get("status") != "SUCCESS":
        raise RuntimeError(f"{rung.name} {result.get('status', 'FAILED')}: {result.get('message', 'see result.json')}")
    return result


def run_callbacks(rung: RungSpec, config: dict, out_dir: str, dep_dirs: dict[str, str], wandb: list) -> list:
    """What a run's training calls back besides writing its own files: the hero's live forecast (its
    snapshots during training) and W&B (``wandb``, built by the step: [] when disabled)."""
    callbacks = []
    if config.get("role") == "hero":
        from ladder.analysis.forecast import ForecastCallback

        callbacks.append(ForecastCallback(rung=rung, out_dir=out_dir, dep_dirs=dep_dirs,
                                          every=config.get("forecast_every", 0)))
    return callbacks + list(wandb)


def _gang_step(rung: RungSpec, config: dict, ctx) -> dict:
    """A run over several JAX processes: one step, one result, its gang on Ray (ladder.trainers.builtin.gang). The
    gang's first process, which writes the run's outputs, carries the callbacks a one-process run has; its
    progress reaches the step's progress.json and a driver's stop request reaches every process, both
    polled at the step's heartbeat (when a stop request can arrive)."""
    from functools import partial

    from ladder.dag import bpe
    from ladder.trainers.builtin.gang import Watch, train_gang

    # A gang trains into a local (or shared-filesystem) root, so its dep folders are paths as they are.
    deps = {k: v for k, v in ctx.dep_dirs.items() if not k.startswith(TOKENIZE_PREFIX)}
    if config.get("role") == "hero":
        _one_prior(Path(ctx.out_dir), deps.get("predict"))
    callbacks = partial(run_callbacks, rung, config, str(ctx.out_dir), deps, _wandb_callbacks(config, ctx))
    watch = Watch(every=ctx.heartbeat_s, on_progress=lambda row: ctx.progress(**row),
                  should_stop=lambda: ctx.stop_requested)
    tokenizer_file = str(Path(deps[bpe.STEP]) / bpe.FILE) if bpe.STEP in deps else None
    result = train_gang(rung, data_from_dict(config["data"]), ctx.out_dir, callbacks=callbacks,
                        shard_dirs=shard_dirs(ctx.dep_dirs), watch=watch, tokenizer_file=tokenizer_file)
    return _outcome(rung, result)


PRIOR = "forecast_prior.json"


def _one_prior(out: Path, predict_dir: str | None) -> None:
    """One forecasts file per prediction: when the hero resumes against a prediction other than the one
    its forecasts were made against (predict ran again at the same hash), the old snapshots move to
    forecasts-<digest>.jsonl / forecasts-<digest>/ and the file starts over."""
    import hashlib
    import json

    curve = Path(predict_dir) / layout.HERO_CURVE if predict_dir else None
    digest = hashlib.sha256(curve.read_bytes()).hexdigest() if curve is not None and curve.exists() else None
    prior = out / PRIOR
    old = json.loads(prior.read_text()).get("sha256") if prior.exists() else None
    if old is not None and old != digest:
        for name in (layout.FORECASTS, layout.FORECAST_DIR):
            if (out / name).exists():
                stem, dot, ext = name.partition(".")
                (out / name).rename(out / f"{stem}-{old[:12]}{dot}{ext}")
    layout.write_json_atomic(prior, {"sha256": digest, "hero_curve": str(curve) if curve else None})


def _wandb_callbacks(config: dict, ctx) -> list:
    try:
        from ladder.wandb.log import training_callbacks
    except ModuleNotFoundError:
        return []
    return list(training_callbacks(config, ctx))


def _log_ladder_run(ctx) -> None:
    """Mirror the ladder-level tables (fit, prediction, report) to W&B; our files stay the source of truth."""
    try:
        from ladder.wandb.log import log_ladder_step
    except ModuleNotFoundError:
        return
    runtime = ctx.runtime or {}
    log_ladder_step({"wandb": runtime.get("wandb") or {}, "ladder": runtime.get("ladder")}, ctx)


def fit_step(config: dict, ctx) -> dict:
    from ladder.analysis import fit_ladder

    with local_dirs(ctx.dep_dirs, ctx.out_dir) as (dep_dirs, out_dir):
        result = fit_ladder(config, dep_dirs, out_dir)
    _log_ladder_run(ctx)
    return result


def predict_step(config: dict, ctx) -> dict:
    from ladder.analysis import predict_ladder

    with local_dirs(ctx.dep_dirs, ctx.out_dir) as (dep_dirs, out_dir):
        result = predict_ladder(config, dep_dirs["fit"], out_dir)
    _log_ladder_run(ctx)
    return result


def gate_step(config: dict, ctx) -> dict:
    from ladder.analysis import gate_ladder

    with local_dirs(ctx.dep_dirs, ctx.out_dir) as (dep_dirs, out_dir):
        return gate_ladder(config, dep_dirs, out_dir, force=bool((ctx.runtime or {}).get("force_gate")))


def report_step(config: dict, ctx) -> dict:
    from ladder.report.build import write_report

    with local_dirs(ctx.dep_dirs, ctx.out_dir) as (dep_dirs, out_dir):
        report, _ = write_report(config, dep_dirs, out_dir)
    _log_ladder_run(ctx)
    return {"hero": report.get("hero"), "backtest": report.get("backtest")}
