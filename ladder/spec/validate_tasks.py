"""Validation of ``data.tasks``: names, sources, and every row of a task file, one line a problem."""

from __future__ import annotations

from pathlib import Path

from .runs import DataSpec


def validate_tasks(problems: list[str], path: str, d: DataSpec, base_dir: Path | None) -> None:
    if not isinstance(d.tasks, tuple | list):
        problems.append(f"{path}.tasks: expected a tuple of TaskSpec, got {type(d.tasks).__name__}")
        return
    from ladder.trainers.builtin.tasks import BUILTIN_TASKS

    names: set[str] = set()
    for i, task in enumerate(d.tasks):
        p = f"{path}.tasks[{i}]"
        name = getattr(task, "name", None)
        if not isinstance(name, str) or not name or not name.replace("_", "").replace("-", "").isalnum():
            problems.append(f"{p}.name: {name!r} must be a non-empty name of letters, digits, '_' or '-' "
                            "(it names the task's eval columns, task_acc/<name>)")
        elif name in names:
            problems.append(f"{p}.name: duplicate task name {name!r}")
        names.add(name)
        items = getattr(task, "items", None)
        if isinstance(items, bool) or not isinstance(items, int) or items < 0:
            problems.append(f"{p}.items: must be a non-negative integer (0: all), got {items!r}")
            continue
        source = getattr(task, "source", None)
        if not isinstance(source, str) or not source:
            problems.append(f"{p}.source: give a JSONL file of task items or one of {', '.join(BUILTIN_TASKS)}")
        elif source.startswith("builtin:"):
            if source not in BUILTIN_TASKS:
                problems.append(f"{p}.source: {source!r} is not one of {', '.join(BUILTIN_TASKS)}")
        else:
            _check_file(problems, p, source, items, base_dir)


def _check_file(problems: list[str], p: str, source: str, items: int, base_dir: Path | None) -> None:
    """Every row of the file, read where the trainer reads it (the working folder) or beside the experiment."""
    from ladder.trainers.builtin.tasks import TaskError, read_file

    if "://" in source:
        problems.append(f"{p}.source: {source} is a URL; task files are read locally, give a path")
        return
    found = Path(source).expanduser()
    if not found.is_absolute() and not found.exists() and base_dir is not None:
        found = base_dir / found
    if not found.is_file():
        problems.append(f"{p}.source: {source} does not exist; give a JSONL file of task items")
        return
    try:
        read_file(found, items)
    except TaskError as exc:
        problems.append(f"{p}.source: {exc}")
