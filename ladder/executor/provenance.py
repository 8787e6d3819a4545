"""step.json provenance and the per-ladder index of the last run of each step name."""

from __future__ import annotations

import functools
import importlib.metadata
import os
import socket
import subprocess
import sys
import time
from typing import Any

from .store import Store

PACKAGES = ("ray", "jax", "jaxlib", "flax", "optax", "orbax-checkpoint", "numpy", "pandas", "scipy", "wandb",
            "fsspec", "scaling-ladder")
INDEX_DIR = ".index"
STEP_JSON = "step.json"


@functools.lru_cache(maxsize=1)
def package_versions() -> dict[str, str]:
    out = {}
    for name in PACKAGES:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            pass
    return out


def versions(names: tuple[str, ...]) -> dict[str, str]:
    """Installed versions of the named distributions ("missing" for one that is not installed)."""
    out = {}
    for name in names:
        try:
            out[name] = importlib.metadata.version(name)
        except importlib.metadata.PackageNotFoundError:
            out[name] = "missing"
    return out


def code_dir() -> str:
    """The folder holding the ladder package's source (a git checkout for a development install)."""
    return os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@functools.lru_cache(maxsize=8)
def git_info(cwd: str | None = None) -> dict[str, Any] | None:
    """:func:`read_git`, once per process (what a submit records in every step.json)."""
    return read_git(cwd)


def read_git(cwd: str | None = None) -> dict[str, Any] | None:
    """{"commit", "dirty"} of the git checkout holding ``cwd`` (default: this package's source), None
    outside git. Dirty counts untracked files git does not ignore: a new module is code that runs."""
    cwd = cwd or code_dir()
    try:
        commit = subprocess.run(["git", "rev-parse", "HEAD"], cwd=cwd, capture_output=True, text=True,
                                timeout=5)
        if commit.returncode != 0:
            return None
        dirty = subprocess.run(["git", "status", "--porcelain"], cwd=cwd,
                               capture_output=True, text=True, timeout=5)
        return {"commit": commit.stdout.strip(), "dirty": bool(dirty.stdout.strip())}
    except (OSError, subprocess.SubprocessError):
        return None


def environment() -> dict[str, Any]:
    """What the driver records once per submit: git, packages, python, driver host."""
    return {
        "git": git_info(),
        "packages": package_versions(),
        "python": sys.version.split()[0],
        "driver_host": socket.gethostname(),
        "driver_pid": os.getpid(),
        "cwd": os.getcwd(),
    }


def worker_environment() -> dict[str, Any]:
    """What the process that runs a step has (recorded in its step.json): it may differ from the driver's."""
    return {"packages": package_versions(), "python": sys.version.split()[0], "host": socket.gethostname(),
            "pid": os.getpid()}


def index_path(store: Store, ladder_dir: str, name: str) -> str:
    return store.join(ladder_dir, INDEX_DIR, f"{name}.json")


def read_index(store: Store, ladder_dir: str, name: str) -> dict | None:
    data = store.read_json(index_path(store, ladder_dir, name))
    return data if isinstance(data, dict) else None


def write_index(store: Store, ladder_dir: str, name: str, entry: dict) -> None:
    store.write_json(index_path(store, ladder_dir, name), {**entry, "time": time.time()})


def step_json_path(store: Store, d: str) -> str:
    return store.join(d, STEP_JSON)
