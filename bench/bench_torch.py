"""The trainer against PyTorch eager, now and at the base revision, in one run.

Issue 46's floor for the trainer is "at least where it is today" against PyTorch eager on the same
GPT (bench_train's torch script: the float32 dense rows d64 / d128 / d256, seq 256, batch 16). A ratio
taken on another day or another CPU moves with the CPU (XLA and torch's oneDNN pick different kernels
on AVX2 and AVX-512 parts), so this bench measures both trainers and torch on the same cores in the
same rounds: this checkout's trainer and the base revision's (``LADDER_BENCH_BASE``, default bench_sharding's
BASE, extracted with ``git archive``), each in both of bench_train's configurations (one XLA device
using every core, and one host device per core with the batch data-parallel), each in its own child
process, alternated round by round with torch. Each cell is the best of its rounds' timed calls.
``LADDER_BENCH_ROUNDS`` rounds (default 3).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

from bench.bench_sharding import BASE, _base_tree
from bench.bench_train import BATCH, SEQ, RoundChild, _torch_python, _torch_round, cpu_line

REPO = Path(__file__).resolve().parents[1]
ROWS = r"L\d+ dense$"  # the float32 dense rows: the ones torch trains alike

# Runs in a child with the tree's own ladder and bench packages first on sys.path: the base revision's
# bench_train builds its trainer's step exactly as that revision's `make bench` did.
CHILD = r"""
import json, re, sys
sys.path.insert(0, sys.argv[1])
from bench import bench_train as b
from ladder.train.loop import DEFAULT_STEPS_PER_CALL
specs = [(n, s) for n, s in b._specs() if re.search(sys.argv[3], n)]
steps = {n: b._JaxStep(s, DEFAULT_STEPS_PER_CALL, int(sys.argv[2])) for n, s in specs}
print(json.dumps({"ready": list(steps)}), flush=True)
for _ in sys.stdin:
    print(json.dumps({n: st.time(2) for n, st in steps.items()}), flush=True)
"""


def _trainer(tree: str, devices: int) -> RoundChild:
    """The trainer of ``tree`` on ``devices`` XLA devices in its own child, timed one round per call."""
    return RoundChild([sys.executable, "-c", CHILD, tree, str(devices), ROWS], devices,
                      env={"PYTHONPATH": tree, "LADDER_BENCH_TRAIN_ROWS": ""}, cwd=tree)


def main() -> None:
    from ladder.spec import ModelSpec

    torch_exe = _torch_python()
    if torch_exe is None:
        print("skipped: torch does not import here (`make bench` installs the bench extra)")
        return
    rev = os.environ.get("LADDER_BENCH_BASE", BASE)
    base = _base_tree(rev)
    if base is None:
        return
    rounds = int(os.environ.get("LADDER_BENCH_ROUNDS", "3"))
    n = os.cpu_count() or 1
    trees = {"this": str(REPO), f"base {base[1]}": base[0]}
    children = {(tree, d): _trainer(path, d) for tree, path in trees.items() for d in sorted({1, n})}
    rows = children[("this", 1)].ready["ready"]
    times = {key: {r: [] for r in rows} for key in children}
    torch_times: dict[str, list[float]] = {r: [] for r in rows}
    sizes = {r: int(r.split()[0][1:]) for r in rows}
    specs = {r: ModelSpec(d_model=sizes[r], n_layers=int(r.split()[1][1:]), n_heads=4) for r in rows}
    load0 = os.getloadavg()[0]
    for r in range(rounds):  # alternate everything so contention hits every column alike
        for key, child in children.items():
            for row, ts in child.round().items():
                times[key][row] += ts
        got = _torch_round(torch_exe, [{"d": s.d_model, "L": s.n_layers, "f": s.dense_d_ff, "bf16": False}
                                       for s in specs.values()], seconds=1.0)
        for row, g in zip(rows, got or [], strict=False):
            torch_times[row].append(g["best"])
        print(f"  round {r + 1}/{rounds} done (load {os.getloadavg()[0]:.1f})", flush=True)
    for child in children.values():
        child.close()

    def tps(ts: list[float]) -> float:
        return BATCH * SEQ / min(ts) if ts else float("nan")

    print(f"\ntrainer / torch eager, float32 dense, seq {SEQ}, batch {BATCH}: this checkout against {rev} "
          f"({base[1]}), same rounds (best of {rounds}); load average {load0:.1f} -> {os.getloadavg()[0]:.1f} "
          f"on {n} CPUs (shared)")
    cols = [(f"{tree} {d} dev", (tree, d)) for tree in trees for d in sorted({1, n})]
    head = f"{'model':<16}{'torch tok/s':>12}" + "".join(f"{c:>22}" for c, _ in cols)
    print(head)
    print("-" * len(head))
    for row in rows:
        t = tps(torch_times[row])
        print(f"{row:<16}{t:>12,.0f}" + "".join(f"{tps(times[key][row]) / t:>21.2f}x" for _, key in cols))
    print("each cell: that trainer's tok/s over torch eager's in the same rounds (a child process per column)")
    print(cpu_line())
    print("target: this checkout's ratio at least the base's in the same configuration (issue 46 gave 1.11x / "
          "1.03x / 0.93x at d64 / d128 / d256 on an AVX2 EPYC)")


if __name__ == "__main__":
    main()
