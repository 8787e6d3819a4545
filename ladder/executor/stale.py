"""Which finished steps a code change has left stale (code is recorded, not hashed: docs/concepts.md).

Every run records the git commit of the code that ran it, and whether the tree was dirty, in
step.json. A finished step is *stale* when the code under its ``Step.code`` paths differs now from
the commit it ran at (``git diff <commit>`` against the working tree, so uncommitted edits count
too; a file moved unchanged does not). A step with no ``code`` paths counts every file of the
checkout. Stale steps still skip by default; ``ladder plan`` names them and ``--rerun-stale`` reruns them.
"""

from __future__ import annotations

import subprocess
from collections.abc import Sequence

from .provenance import code_dir, read_git, step_json_path
from .store import Store


def _changed_since(commit: str, cwd: str) -> tuple[str, ...] | None:
    """Files whose content differs between ``commit`` and the working tree; None when git cannot say.
    A file moved unchanged (a rename git scores 100% similar) is not a change: moving a module runs
    the same code. A moved file that was also edited counts under both its old and its new path."""
    try:
        proc = subprocess.run(["git", "diff", "--name-status", "-M", commit, "--"], cwd=cwd, capture_output=True,
                              text=True, timeout=20)
    except (OSError, subprocess.SubprocessError):
        return None
    if proc.returncode != 0:
        return None
    changed: set[str] = set()
    for line in proc.stdout.splitlines():
        status, *paths = line.rstrip("\n").split("\t")
        if status == "R100":
            continue
        changed.update(p for p in paths if p)
    return tuple(sorted(changed))


def stale_reason(store: Store, d: str, code: Sequence[str], cwd: str | None = None,
                 now: dict | None = None, diffs: dict | None = None) -> str | None:
    """Why the finished run in ``d`` is stale ("code changed since it ran: ..."), or None. ``now``: the
    checkout's :func:`read_git`, and ``diffs`` (commit -> changed files), when the caller shares them
    between steps."""
    cwd = cwd or code_dir()
    prov = store.read_json(step_json_path(store, d))
    ran = prov.get("git") if isinstance(prov, dict) else None
    if not isinstance(ran, dict) or not ran.get("commit"):
        return None  # run outside git (or before commits were recorded): nothing to compare
    now = now if now is not None else read_git(cwd)
    if now is None:
        return None
    commit = str(ran["commit"])
    if commit == now["commit"] and not now["dirty"] and not ran.get("dirty"):
        return None
    diffs = {} if diffs is None else diffs
    if commit not in diffs:
        diffs[commit] = _changed_since(commit, cwd)
    changed = diffs[commit]
    if changed is None:
        return f"code changed since it ran: commit {commit[:10]} is not in this checkout"
    prefixes = tuple(code) or ("",)
    touched = [f for f in changed if f.startswith(prefixes)]
    if not touched:
        return None
    shown = ", ".join(touched[:3]) + (f" +{len(touched) - 3} more" if len(touched) > 3 else "")
    dirty = " (it ran on a dirty tree)" if ran.get("dirty") else ""
    return f"code changed since it ran at {commit[:10]}{dirty}: {shown}"
