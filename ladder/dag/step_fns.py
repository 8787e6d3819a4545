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
    """A rung or the hero, trained by its trainer (config["trainer"], the built-in one when absent:
    ladder.trainers.registry)."""
    from functools import partial

    from ladder.dag import bpe
    from ladder.trainers.registry import runner
    from ladder.trainers.run import TrainRun

    rung = rung_from_dict(config["rung"])
    others = {k: v for k, v in ctx.dep_dirs.items() if not k.startswith(TOKENIZE_PREFIX)}
    with local_dirs(others, ctx.out_dir) as (dep_dirs, _):
        job = TrainRun(rung=rung, data=data_from_dict(config["data"]), config=config, out_dir=ctx.out_dir,
                       dep_dirs=dep_dirs, shard_dirs=shard_dirs(ctx.dep_dirs),
                       callbacks=partial(step_callbacks, rung, config, dep_dirs, _wandb_callbacks(config, ctx)),
                       progress=lambda row: ctx.progress(**row), should_stop=lambda: ctx.stop_requested,
                       heartbeat_s=ctx.heartbeat_s,
                       tokenizer_file=ctx.dep_path(bpe.STEP, bpe.FILE) if bpe.STEP in ctx.dep_dirs else None)
        result = runner(config.get("trainer"))(job)
    return _outcome(rung, result)


def step_callbacks(rung: RungSpec, config: dict, dep_dirs: dict[str, str], wandb: list, out_dir: str) -> list:
    """A training step's callbacks writing into ``out_dir``: a hero first keeps one forecasts file per
    prediction (:func:`_one_prior`)."""
    if config.get("role") == "hero":
        _one_prior(Path(out_dir), dep_dirs.get("predict"))
    return run_callbacks(rung, config, out_dir, dep_dirs, wandb)


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
