"""The ladders the suite trains once and shares, built through the real CLI (real Ray, JAX, fits).

- smoke: experiments/smoke.py submitted (W&B offline), what the e2e, dashboard and report tests read, the S3
  test's first three rungs and the gang tests' one-process losses (its hero);
- isoflop: experiments/smoke_isoflop.py planned before its sweep, submitted, planned again and reported.

tests/conftest.py starts the ones a session's tests need in one background process as soon as the
tests are collected, so they train while the executor and fault tests mostly wait on leases, pauses
and kills (those two folders kept 1.2 of the 2 cores busy, measured with cgroup cpuacct); each
fixture then waits for its ladder's outcome file. Also runnable by hand:
    python tests/shared_ladders.py OUT_DIR smoke isoflop
writes OUT_DIR/<name>/ (the ladder root) and OUT_DIR/<name>.json (what the fixture reads).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import traceback
from pathlib import Path

from patience import HANG_S

REPO = Path(__file__).resolve().parents[1]
LADDER = str(Path(sys.executable).parent / "ladder")
SMOKE = str(REPO / "experiments" / "smoke.py")
ISOFLOP = str(REPO / "experiments" / "smoke_isoflop.py")


def _ladder(*args: str, env: dict, timeout: float = HANG_S) -> subprocess.CompletedProcess:
    return subprocess.run([LADDER, *args], capture_output=True, text=True, timeout=timeout, cwd=REPO, env=env)


def _env(**extra: str) -> dict:
    return {**os.environ, "RAY_AUTH_MODE": "disabled", "PYTHONUNBUFFERED": "1", **extra}


def build_smoke(root: str) -> dict:
    """The smoke ladder submitted into `root`; its output (workers' logs included) kept in root/submit.out."""
    # Piped, as in CI: the default progress is plain lines (one a second per training step here).
    proc = _ladder("submit", SMOKE, "--root", root, "--wandb", "offline", env=_env(LADDER_PROGRESS_INTERVAL="1"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "ladder complete" in proc.stdout
    Path(root, "submit.out").write_text(proc.stdout + proc.stderr)
    return {"root": root}


def build_isoflop(root: str) -> dict:
    """The IsoFLOP smoke ladder: `plan --json` before the sweep, submit, `plan --json` after, `report --json`."""
    env = _env(LADDER_PROGRESS_INTERVAL="5")
    before = _ladder("plan", ISOFLOP, "--root", root, "--json", env=env)
    assert before.returncode == 0, before.stderr[-2000:]
    # W&B is covered by the smoke ladder's own e2e; here it would only add its start-up to every run.
    sub = _ladder("submit", ISOFLOP, "--root", root, "--wandb", "disabled", env=env)
    assert sub.returncode == 0, sub.stdout[-3000:] + sub.stderr[-3000:]
    assert "ladder complete" in sub.stdout
    after = _ladder("plan", ISOFLOP, "--root", root, "--json", env=env)
    assert after.returncode == 0, after.stderr[-2000:]
    rep = _ladder("report", ISOFLOP, "--root", root, "--json", env=env)
    assert rep.returncode == 0, rep.stderr[-2000:]
    return {"root": root, "before": json.loads(before.stdout), "after": json.loads(after.stdout),
            "report": json.loads(rep.stdout)}


BUILDERS = {"smoke": build_smoke, "isoflop": build_isoflop}


def outcome_path(out_dir: str, name: str) -> Path:
    return Path(out_dir, f"{name}.json")


def build_into(out_dir: str, name: str) -> None:
    """Build one ladder under out_dir/name and write its outcome (the result, or the failure) atomically."""
    root = Path(out_dir, name)
    root.mkdir(parents=True, exist_ok=True)
    try:
        outcome = {"ok": True, "result": BUILDERS[name](str(root))}
    except Exception:  # the fixture that waits reports it as its own failure
        outcome = {"ok": False, "error": traceback.format_exc()[-6000:]}
    tmp = outcome_path(out_dir, name).with_suffix(".tmp")
    tmp.write_text(json.dumps(outcome))
    tmp.replace(outcome_path(out_dir, name))


if __name__ == "__main__":
    for ladder_name in sys.argv[2:]:
        build_into(sys.argv[1], ladder_name)
