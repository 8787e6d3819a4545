"""``ladder train SPEC RUNG`` for a run whose trainer is not the built-in one: the same trainer, input and
outputs as its step in the DAG, in this process (a command as its child, a gang over Ray), SIGTERM
asking it to checkpoint; result.json written beside its rows when it succeeds."""

from __future__ import annotations

from collections.abc import Callable

from ladder.spec import LadderSpec, RungSpec, SpecError

POLL_S = 0.5  # how often a gang's members are asked whether to stop (SIGTERM to this process)


def train_foreign(spec: LadderSpec, run: RungSpec, role: str, out_dir: str, *, tokenized: Callable[[], dict],
                  max_steps: int | None = None, progress: Callable[[dict], None] | None = None) -> dict:
    """``tokenized()``: each domain's token shards (the ladder's tokenize steps run first when they have not)."""
    from ladder.dag.train_steps import run_data, train_config
    from ladder.outputs import layout
    from ladder.trainers.builtin.sigterm import Sigterm
    from ladder.trainers.registry import runner
    from ladder.trainers.run import TrainRun

    if max_steps is not None:
        raise SpecError([f"--steps: a run trained by its {spec.trainer_of(run).kind} trainer runs to its end; "
                         "drop --steps (only the built-in trainer stops early)"])
    config = train_config(spec, run, role)  # the plan-time checks: one line, exit 2, nothing written
    shards = tokenized() if spec.data.tokenizer != "bytes" else {}
    if run.resources.processes > 1:
        from ladder.trainers.builtin.gang import connect

        connect()  # before the handler: ray.init sets its own
    sigterm = Sigterm()
    sigterm.install()
    try:
        job = TrainRun(rung=run, data=run_data(spec, role), config=config, out_dir=out_dir, dep_dirs={},
                       shard_dirs=shards, callbacks=lambda out: [], progress=progress or (lambda row: None),
                       should_stop=lambda: sigterm.flag, heartbeat_s=POLL_S)
        result = runner(config.get("trainer"))(job)
    finally:
        sigterm.uninstall()
    if result.get("status") == "SUCCESS":
        layout.write_json_atomic(f"{out_dir}/{layout.RESULT}", result)
    if sigterm.flag and result.get("status") == "INTERRUPTED":
        sigterm.restore_and_reraise()
    return result
