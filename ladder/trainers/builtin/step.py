"""The built-in trainer as a kind of the registry (ladder.trainers.registry): one training step's run,
in this process or as a gang of processes on Ray (``resources.processes`` > 1)."""

from __future__ import annotations

from functools import partial

from ladder.trainers.run import TrainRun


def run(job: TrainRun) -> dict:
    import jax

    from ladder.trainers.builtin.cores import pinned

    if job.rung.resources.processes > 1:
        return _gang(job)
    # XLA's CPU client starts seeing every core of the machine, pinned or not: the cores it sees when
    # it starts change its numbers (d24 and d48 rungs moved when pinned first), the pin afterwards does not.
    jax.devices()
    with pinned(job.rung.resources.cpus):
        return _one(job)


def _one(job: TrainRun) -> dict:
    from ladder.trainers.builtin import compile_cache, train
    from ladder.trainers.builtin.mirror import open_output

    compile_cache.enable(job.out_dir)
    # The trainer mirrors a remote out_dir through a local folder; callbacks that write beside it
    # (the hero's forecasts) write into that folder and are uploaded with the metrics.
    # Token shards are mapped where they are (a remote one is cached once per node), never copied whole.
    with open_output(job.out_dir) as out:
        return train(job.rung, job.data, out, callbacks=job.callbacks(str(out.local)), progress=job.progress,
                     should_stop=job.should_stop, shard_dirs=dict(job.shard_dirs), tokenizer_file=job.tokenizer_file)


def _gang(job: TrainRun) -> dict:
    """A run over several JAX processes: one step, one result, its gang on Ray (ladder.trainers.builtin.gang). The
    gang's first process, which writes the run's outputs, carries the callbacks a one-process run has; its
    progress reaches the step's progress.json and a driver's stop request reaches every process, both
    polled at the step's heartbeat (when a stop request can arrive)."""
    from ladder.trainers.builtin.gang import Watch, train_gang

    watch = Watch(every=job.heartbeat_s, on_progress=job.progress, should_stop=job.should_stop)
    return train_gang(job.rung, job.data, job.out_dir, callbacks=partial(job.callbacks, str(job.out_dir)),
                      shard_dirs=dict(job.shard_dirs), watch=watch, tokenizer_file=job.tokenizer_file)
