"""Start-up cost of the command line, before and after issue 20's lazy imports and faster fit.

Each figure is the best of a few runs of a fresh process, end to end (interpreter start included),
so another process on a busy machine costs a figure nothing but a repeat. "before" runs the
sources of the commit before the lazy imports (BEFORE), "lazy" those of the commit before the
Chinchilla fit descended only its best starts (LAZY), each extracted with `git archive` into a
temp dir, same venv; "after" runs this checkout. The in-process fit time is printed too: what is
left of `ladder fit` once the imports are paid is the fit itself.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BEFORE = "0c395e1"  # the last commit before the lazy imports
LAZY = "8df3c27"  # the last commit before the start filter and scipy-free polish of the Chinchilla fit
REPEATS = 5
TARGET_S = 1.5


def _best(cmd: list[str], env: dict, repeats: int = REPEATS) -> float:
    best = float("inf")
    for _ in range(repeats):
        t = time.perf_counter()
        subprocess.run(cmd, env=env, cwd=env["_CWD"], check=True, capture_output=True, timeout=300)
        best = min(best, time.perf_counter() - t)
    return best


def _sources(commit: str | None, into: Path) -> Path:
    """A folder holding ladder/ and fits/ as of `commit` (None: this checkout)."""
    if commit is None:
        return REPO
    tar = subprocess.run(["git", "-C", str(REPO), "archive", commit, "ladder", "fits"], check=True,
                         capture_output=True).stdout
    subprocess.run(["tar", "-x", "-C", str(into)], input=tar, check=True)
    return into


def main() -> None:
    from fits import reference

    with tempfile.TemporaryDirectory(prefix="bench-startup-") as tmp:
        tmp = Path(tmp)
        csv = tmp / "chinchilla.csv"
        reference.chinchilla_epoch().to_csv(csv, index=False)
        cli = "import sys; sys.argv = ['ladder', *sys.argv[1:]]; from ladder.cli.main import main; main()"
        cases = [
            ("ladder --help", ["-c", cli, "--help"]),
            ("python -c 'import fits'", ["-c", "import fits"]),
            ("python -c 'import ladder.cli.main'", ["-c", "import ladder.cli.main"]),
            ("ladder fit (240 rows, chinchilla)", ["-c", cli, "fit", str(csv)]),
            ("ladder fit (240 rows, --law compute)", ["-c", cli, "fit", str(csv), "--law", "compute"]),
        ]
        results = {}
        columns = (("before", BEFORE), ("lazy", LAZY), ("after", None))
        for label, commit in columns:
            (tmp / label).mkdir()
            src = _sources(commit, tmp / label)
            # the sources first on sys.path (ahead of the editable install); the run's cwd holds no package
            env = {**os.environ, "PYTHONPATH": str(src), "_CWD": str(tmp)}
            for name, args in cases:
                results[(name, label)] = _best([sys.executable, *args], env, 3 if "fit" in name else REPEATS)
        in_process = _in_process_fit(csv)
    head = "command (best of 3-5, end to end)"
    print(f"{head:<42}" + "".join(f" {label:>9}" for label, _ in columns) + f" {'target':>9}")
    for name, _ in cases:
        target = f"< {TARGET_S} s" if name in ("ladder --help", "ladder fit (240 rows, chinchilla)") else ""
        print(f"{name:<42}" + "".join(f" {results[(name, label)]:>8.2f}s" for label, _ in columns) + f" {target:>9}")
    print(f"{'chinchilla fit in-process (imports paid)':<42} {'':>9} {'':>9} {in_process:>8.2f}s")


def _in_process_fit(csv: Path) -> float:
    import fits

    runs = fits.read_runs(csv)
    fits.fit(runs.iloc[:20], "compute")  # first-call costs out
    best = float("inf")
    for _ in range(3):
        t = time.perf_counter()
        fits.fit(runs, "chinchilla")
        best = min(best, time.perf_counter() - t)
    return best


if __name__ == "__main__":
    main()
