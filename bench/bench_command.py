"""What the command path costs a foreign trainer: one rung of experiments/smoke_torch.py trained by
examples/torch_gpt/train.py by hand (its input JSON written once, the script started as a child) against the
same rung through the ladder's command path (``ladder.dag.train_alone.train_foreign``, the body of ``ladder
train SPEC RUNG`` and of the rung's step: the plan-time checks and code digests, run.json, the trainer as a
child in its own process group with the gang variables, its rows followed every 0.2 s for the progress line,
result.json read back from its files). Both start the same command line with the same environment into fresh
folders; the rounds alternate which goes first, so the machine's drift hits both alike.

The overhead is (command path - by hand) / by hand per round; target at most 2% of the rung's wall time.
On a machine shared with other work the wall times swing by more than that from round to round, so each
round also counts CPU seconds: the trainer's (its process, reaped by this one) and, for the command path,
this process's own (the checks, run.json, following the rows, result.json): the cost the path adds, which
a quiet machine would see as wall time, whatever the load beside it.
``LADDER_BENCH_ROUNDS`` rounds (default 3), ``LADDER_BENCH_COMMAND_RUNG`` the rung (default rung_3).
"""

from __future__ import annotations

import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
SPEC = REPO / "experiments" / "smoke_torch.py"


class _Clock:
    """Wall seconds, and CPU seconds of this process and of the children it reaped, over a block."""

    def __enter__(self):
        self.wall, self.own, self.kids = time.perf_counter(), time.process_time(), _children_cpu()
        return self

    def __exit__(self, *exc):
        self.wall = time.perf_counter() - self.wall
        self.own = time.process_time() - self.own
        self.kids = _children_cpu() - self.kids


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def _by_hand(spec, run, out: Path) -> _Clock:
    """Train ``run`` by starting the trainer's command on an input JSON written beforehand (not timed)."""
    from ladder.dag.train_steps import run_data
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
    with _Clock() as clock:
        subprocess.run(argv, cwd=resolve_path(trainer, "."), env=env, check=True, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    return clock


def _command_path(spec, run, out: Path) -> _Clock:
    from ladder.dag.train_alone import train_foreign

    with _Clock() as clock:
        result = train_foreign(spec, run, "rung", str(out), tokenized=dict)  # a bytes ladder: no shards
    if result.get("status") != "SUCCESS":
        raise RuntimeError(f"the command path did not finish {run.name}: {result}")
    return clock


def main() -> None:
    from ladder.spec import load_spec

    try:
        import torch  # noqa: F401
    except ImportError:
        print("skipped: torch does not import here (`make install` installs the torch extra)")
        return
    spec = load_spec(SPEC)
    run = spec.rung(os.environ.get("LADDER_BENCH_COMMAND_RUNG", "rung_3"))
    # A step's Ray worker has the path's modules loaded already: import them before the first timed round
    import ladder.dag.train_alone  # noqa: F401
    import ladder.trainers.command_run  # noqa: F401
    import ladder.trainers.outcome  # noqa: F401
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
    head = (f"{'round':<7}{'by hand s':>10}{'command s':>10}{'wall +':>8}{'trainer cpu s':>15}{'path cpu s':>12}"
            f"{'cpu +':>8}")
    print(head)
    print("-" * len(head))
    walls, cpus = [], []
    for i, got in enumerate(rows):
        hand, cmd = got["hand"], got["command"]
        walls.append((cmd.wall - hand.wall) / hand.wall)
        cpus.append((cmd.own + cmd.kids - hand.own - hand.kids) / (hand.own + hand.kids))
        print(f"{i + 1:<7}{hand.wall:>10.2f}{cmd.wall:>10.2f}{walls[-1]:>+8.1%}{hand.kids:>8.2f} {cmd.kids:>6.2f}"
              f"{cmd.own:>12.2f}{cpus[-1]:>+8.1%}")
    print(f"median: wall {statistics.median(walls):+.1%} (range {min(walls):+.1%} to {max(walls):+.1%}), CPU "
          f"{statistics.median(cpus):+.1%} (range {min(cpus):+.1%} to {max(cpus):+.1%}); target: the command path at "
          "most +2% of the rung's wall time")
    print("trainer cpu s: the trainer process's, by hand then through the path; path cpu s: this process's own while "
          "the path ran (checks, run.json, rows followed, result.json)")

if __name__ == "__main__":
    main()
