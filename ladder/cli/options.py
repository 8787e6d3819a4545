"""Options and helpers every `ladder` command shares: one --json, one --level with one default,
one --root rule, environment variables declared through click, an example in each --help, and
tables as wide as the terminal. Imports nothing heavy: `ladder --help` loads only this and click.
"""

from __future__ import annotations

import shutil

import click

from fits.defaults import DEFAULT_LEVEL

# Every environment variable `ladder` reads, with what it does (docs/environment.md is generated from it).
ENVIRONMENT = {
    "LADDER_ROOT": "ladder root when --root is not given (overrides the spec's root; --root overrides it)",
    "RAY_ADDRESS": "Ray cluster address for submit/rerun/sweep when --address is not given",
    "LADDER_REFERENCE_DATA": "another copy of the reference data instead of the one installed in fits/reference_data",
    "LADDER_PEAK_FLOPS": "the accelerator's peak FLOP/s, for MFU when it cannot be measured",
    "LADDER_STEPS_PER_CALL": "optimizer steps per compiled call of the trainer",
    "LADDER_LEASE_TIMEOUT": "seconds without a heartbeat after which a step's lease is stale and taken over",
    "LADDER_HEARTBEAT": "seconds between a running step's lease heartbeats (shorter than the lease timeout)",
    "LADDER_MIRROR_EVERY_S": "seconds between copies of a remote-root run's metrics to the root (10)",
    "LADDER_SCRATCH": "local scratch folder of runs whose root is remote (default: the system temp dir)",
    "LADDER_PROGRESS_INTERVAL": ("seconds between a training step's progress lines when the output is not a terminal, "
                                 "and between `ladder train`'s (60)"),
    "LADDER_RUN_CONFIG": ("set for a foreign trainer (docs/trainers.md): the path of its run's input, run.json; "
                          "ladder/trainers/writer.py's read_run() reads it"),
    "RANK": ("set for a foreign trainer's processes with torch.distributed's other variables (docs/trainers.md); "
             "ladder/trainers/writer.py writes rows only at rank 0"),
    "LADDER_STOP_GRACE": "seconds a stopped driver waits for running steps to checkpoint and exit before it cancels them (60)",
    "LADDER_DIGEST_CACHE": "file caching data-source digests by path, size and mtime (default: the user cache dir)",
    "LADDER_SHARD_CACHE": "folder where a node keeps its one copy of remote token shards (default: <tmp>/scaling-ladder-shards)",
    "XDG_CACHE_HOME": "the user cache dir (default ~/.cache): where the data-source digest cache lives",
    "LADDER_RAY_DASHBOARD": "1 starts Ray's own dashboard with a local Ray (off by default)",
    "RAY_TMPDIR": "Ray's temp folder for a local Ray",
    "RAY_worker_niceness": "nice value of a local Ray's workers (0 here: the steps run at the driver's priority; Ray's own default is 15)",
    "LADDER_RAY_START_S": "seconds a driver keeps retrying, with backoff, to start or join Ray before it gives up (300)",
    "JAX_COMPILATION_CACHE_DIR": "where compiled XLA programs are kept (default <root>/.jax-cache)",
    "WANDB_MODE": "W&B mode (online, offline, disabled) when the spec and --wandb do not say",
    "WANDB_PROJECT": "W&B project when the spec does not name one",
    "WANDB_ENTITY": "W&B entity (team or user) when the spec does not name one",
    "WANDB_API_KEY": "W&B key for online logging and import-wandb (or ~/.netrc from `wandb login`)",
    "WANDB_BASE_URL": "a self-hosted W&B server",
    "NETRC": "the netrc file whose api.wandb.ai entry counts as being logged in to W&B",
    "XLA_FLAGS": "JAX/XLA flags; a CPU run adds its host-device count to them",
    "JAX_PLATFORMS": "JAX's backends; a gang's processes run on cpu (gloo collectives) when the run asks for no GPU",
}


def example(*lines: str) -> str:
    """A click epilog that shows `lines` as typed (\\b keeps click from rewrapping them)."""
    return "\b\nExamples:\n" + "\n".join(f"  {line}" for line in lines)


def _level(ctx, param, value):
    if value is not None and not (0.0 < value < 1.0):
        raise click.BadParameter(f"{value} is not a probability; give a level in (0, 1), e.g. {DEFAULT_LEVEL}")
    return value


json_option = click.option("--json", "as_json", is_flag=True,
                           help="Print one JSON object (the same keys whatever the input) instead of text.")
level_option = click.option("--level", type=float, default=DEFAULT_LEVEL, show_default=True, callback=_level,
                            help="Probability of every interval printed or written.")
root_option = click.option(
    "--root", default=None, envvar="LADDER_ROOT", show_envvar=True,
    help="Ladder root: a local folder or an fsspec URL. Order: --root, then LADDER_ROOT, then the spec's root.")
address_option = click.option("--address", default=None, envvar="RAY_ADDRESS", show_envvar=True,
                              help="Ray cluster address (default: a local Ray).")


def table_width() -> int:
    """Columns for a rich table: the terminal's, or $COLUMNS, else 120 when not on a terminal."""
    return shutil.get_terminal_size((120, 24)).columns
