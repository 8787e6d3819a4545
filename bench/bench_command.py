"""What the command path costs a foreign trainer: one rung of experiments/smoke_torch.py trained by
examples/torch_gpt/train.py by hand (its input JSON written once, the script started as a child) against the
same rung through the ladder's command path (``ladder.dag.train_alone.train_foreign``, the body of ``ladder
train SPEC RUNG`` and of the rung's step: the plan-time checks and code digests, run.json, the trainer as a
child in its own process group with the gang variables, its rows followed every 0.2 s for the progress line,
result.json read back from its files). Both start the same command line with the same environment into fresh
folders; the rounds alternate which goes first, so the machine's drift hits both alike.

The overhead is (command path - by hand) / by hand per round; target at most 2% of the rung's wall time.
``LADDER_BENCH_ROUNDS`` rounds (default 3), ``LADDER_BENCH_COMMAND_RUNG`` the rung (default rung_3).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "experiments" / "smoke_torch.py"


def _by_hand(spec, run, out: Path) -> float:
    """Seconds to train ``run`` by starting the trainer's command on an input JSON written beforehand."""
    from ladder.dag.stages import run_data
    from ladder.trainers.command import resolve_path
    from ladder.trainers.contract import placeholder_values, run_input

    trainer = spec.trainer_of(run)
    inp = run_input(run, run_data(spec, "rung"), out, role="rung", ladder=spec.name, resume=False,
                    trainer={"kind": "command", "command": list(trainer.command)})
    out.mkdir(parents=True)
    config = out / "run.json"
    config.write_text(json.dumps(inp))
    values = {**placeholder_values(inp, config), "python": sys.executable}
    argv = [a.format_map(values) for a in trainer.command]
    env = {**os.environ, **{k: v.format_map(values) for k, v in dict(trainer.env).items()}}
    t0 = time.perf_counter()
    subprocess.run(argv, cwd=resolve_path(trainer, "."), env=env, check=True, stdout=subprocess.DEVNULL,
                   stderr=subprocess.DEVNULL)
    return time.perf_counter() - t0


def _command_path(spec, run, out: Path) -> float:
    from ladder.dag.train_alone import train_foreign

    t0 = time.perf_counter()
    result = train_foreign(spec, run, "rung", str(out))
    seconds = time.perf_counter() - t0
    if result.get("status") != "SUCCESS":
        raise RuntimeError(f"the command path did not finish {run.name}: {result}")
    return seconds


def main() -> None:
    from ladder.spec import load_spec

    try:
        import torch  # noqa: F401
    except ImportError:
        print("skipped: torch does not import here (`make install` installs the torch extra)")
        return
    spec = load_spec(SPEC)
    run = spec.rung(os.environ.get("LADDER_BENCH_COMMAND_RUNG", "rung_3"))
    rounds = int(os.environ.get("LADDER_BENCH_ROUNDS", "3"))
    tmp = Path(tempfile.mkdtemp(prefix="ladder-bench-command-"))
    rows = []
    load0 = os.getloadavg()[0]
    try:
        for r in range(rounds):
            order = ("hand", "command") if r % 2 == 0 else ("command", "hand")
            got = {}
            for how in order:
                out = tmp / f"{how}-{r}"
                got[how] = _by_hand(spec, run, out) if how == "hand" else _command_path(spec, run, out)
            rows.append(got)
            print(f"  round {r + 1}/{rounds} done (load {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\n{run.name} of smoke_torch ({run.steps} steps) by examples/torch_gpt: by hand against the command "
          f"path, {rounds} rounds; load average {load0:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (shared)")
    head = f"{'round':<8}{'by hand s':>12}{'command s':>12}{'overhead':>10}"
    print(head)
    print("-" * len(head))
    overheads = []
    for i, got in enumerate(rows):
        overheads.append((got["command"] - got["hand"]) / got["hand"])
        print(f"{i + 1:<8}{got['hand']:>12.2f}{got['command']:>12.2f}{overheads[-1]:>+10.1%}")
    print(f"median overhead {statistics.median(overheads):+.1%} (range {min(overheads):+.1%} to {max(overheads):+.1%}); "
          "target: at most +2% of the rung's wall time")


if __name__ == "__main__":
    main()
