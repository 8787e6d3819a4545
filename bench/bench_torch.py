"""The trainer against PyTorch eager, now and at the base revision, in one run.

Issue 46's floor for the trainer is "at least where it is today" against PyTorch eager on the same
GPT (bench_train's torch script: the float32 dense rows d64 / d128 / d256, seq 256, batch 16). A ratio
taken on another day or another CPU moves with the CPU (XLA and torch's oneDNN pick different kernels
on AVX2 and AVX-512 parts), so this bench measures both trainers and torch on the same cores in the
same rounds: this checkout's trainer and the base revision's (``LADDER_BENCH_BASE``, default bench_sharding's
BASE, extracted with ``git archive``), each in both of bench_train's configurations (one XLA device
using every core, and one host device per core with the batch data-parallel), each in its own child
process, alternated round by round with torch (the order reversed every other round). A cell gives the
ratio of the best of its rounds and the median of each round's own pair, the second robust to the
machine's speed drifting between calls. Every child dumps its compiled steps (XLA's optimised HLO), so
the bench also says whether this checkout's step is the same program as the base's: then no measured
difference between the two can be the trainer's. ``LADDER_BENCH_ROUNDS`` rounds (default 3).
"""

from __future__ import annotations

import hashlib
import os
import re
import shutil
import statistics
import sys
import tempfile
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
from ladder.trainers.builtin.loop import DEFAULT_STEPS_PER_CALL
specs = [(n, s) for n, s in b._specs() if re.search(sys.argv[3], n)]
steps = {n: b._JaxStep(s, DEFAULT_STEPS_PER_CALL, int(sys.argv[2])) for n, s in specs}
print(json.dumps({"ready": list(steps)}), flush=True)
for _ in sys.stdin:
    print(json.dumps({n: st.time(2) for n, st in steps.items()}), flush=True)
"""


# Dumped by each trainer child at compile time, so the two trees' compiled steps can be compared.
DUMP_FLAGS = "--xla_dump_to={} --xla_dump_hlo_module_re=jit_chunk"
# Source locations and the stack-frame tables name the tree's own folder; everything else is the program.
_METADATA = re.compile(r", metadata=\{[^}]*\}| stack_frame_id=\d+")
_TABLES = ("FileNames", "FunctionNames", "FileLocations", "StackFrames")


def _trainer(tree: str, devices: int, dump: str) -> RoundChild:
    """The trainer of ``tree`` on ``devices`` XLA devices in its own child, timed one round per call; its
    compiled steps are dumped under ``dump``."""
    return RoundChild([sys.executable, "-c", CHILD, tree, str(devices), ROWS], devices,
                      env={"PYTHONPATH": tree, "LADDER_BENCH_TRAIN_ROWS": ""}, cwd=tree,
                      xla_extra=DUMP_FLAGS.format(dump))


def program_digests(dump: str) -> list[str]:
    """The sha256 of each optimised ``jit_chunk`` program XLA dumped under ``dump``, in compile order, with
    source locations left out: equal digests mean the same compiled step, whatever folder it came from."""
    texts = sorted(Path(dump).glob("module_*jit_chunk*after_optimizations.txt"), key=lambda f: f.name)
    out = []
    for path in texts:
        lines, skipping = [], False
        for line in path.read_text().splitlines():
            if line.startswith(_TABLES):
                skipping = True
            elif skipping and not line.strip():
                skipping = False
            elif not skipping:
                lines.append(_METADATA.sub("", line))
        out.append(hashlib.sha256("\n".join(lines).encode()).hexdigest())
    return out


def main() -> None:
    from ladder.spec import ModelSpec

    torch_exe = _torch_python()
    if torch_exe is None:
        print("skipped: torch does not import here (`make install` installs the torch extra)")
        return
    rev = os.environ.get("LADDER_BENCH_BASE", BASE)
    base = _base_tree(rev)
    if base is None:
        return
    rounds = int(os.environ.get("LADDER_BENCH_ROUNDS", "3"))
    n = os.cpu_count() or 1
    trees = {"this": str(REPO), f"base {base[1]}": base[0]}
    configs = sorted({1, n})
    dumps = tempfile.mkdtemp(prefix="ladder-bench-hlo-")
    children = {(tree, d): _trainer(path, d, f"{dumps}/{tree.split()[0]}-{d}")
                for tree, path in trees.items() for d in configs}
    rows = children[("this", 1)].ready["ready"]
    digests = {key: program_digests(f"{dumps}/{key[0].split()[0]}-{key[1]}") for key in children}
    shutil.rmtree(dumps, ignore_errors=True)
    times = {key: {r: [] for r in rows} for key in children}
    torch_times: dict[str, list[float]] = {r: [] for r in rows}
    sizes = {r: int(r.split()[0][1:]) for r in rows}
    specs = {r: ModelSpec(d_model=sizes[r], n_layers=int(r.split()[1][1:]), n_heads=4) for r in rows}
    load0 = os.getloadavg()[0]
    order = [*children, "torch"]
    for r in range(rounds):  # alternate everything, the order reversed every other round, so drift hits all alike
        for key in order if r % 2 == 0 else order[::-1]:
            if key == "torch":
                got = _torch_round(torch_exe, [{"d": s.d_model, "L": s.n_layers, "f": s.dense_d_ff, "bf16": False}
                                               for s in specs.values()], seconds=1.0)
                for row in rows:  # a failed torch round leaves a gap in every row, paired with nothing
                    torch_times[row].append(got[rows.index(row)]["best"] if got else float("nan"))
                continue
            for row, ts in children[key].round().items():
                times[key][row].append(min(ts))
        print(f"  round {r + 1}/{rounds} done (load {os.getloadavg()[0]:.1f})", flush=True)
    for child in children.values():
        child.close()
    _print(rows, trees, configs, times, torch_times, digests, rev, base[1], rounds, load0)


def _print(rows, trees, configs, times, torch_times, digests, rev, base_hash, rounds, load0) -> None:
    n = configs[-1]
    print(f"\ntrainer / torch eager, float32 dense, seq {SEQ}, batch {BATCH}: this checkout against {rev} "
          f"({base_hash}) in the same {rounds} rounds; load average {load0:.1f} -> {os.getloadavg()[0]:.1f} on "
          f"{n} CPUs (shared)")
    cols = [(f"{tree.split()[0]} {d} dev", (tree, d)) for tree in trees for d in configs]
    head = f"{'model':<16}{'torch tok/s':>12}" + "".join(f"{c:>16}" for c, _ in cols)
    print(head)
    print("-" * len(head))
    for row in rows:
        torch_best = min(torch_times[row])
        cells = []
        for _, key in cols:
            paired = [tt / t for t, tt in zip(times[key][row], torch_times[row], strict=True) if tt == tt]
            cells.append(f"{torch_best / min(times[key][row]):.2f}x / {statistics.median(paired):.2f}x")
        print(f"{row:<16}{BATCH * SEQ / torch_best:>12,.0f}" + "".join(f"{c:>16}" for c in cells))
    print("each cell: that trainer's tok/s over torch eager's, best of its rounds / median of each round's pair")
    base = next(t for t in trees if t != "this")
    print(f"\nthis checkout against {base_hash}, same configuration: compiled step, and this tok/s over base's "
          "per round (median, range)")
    for row in rows:
        cells = []
        for d in configs:
            mine, theirs = (dict(zip(rows, digests[(tree, d)], strict=False)) for tree in ("this", base))
            same = row in mine and mine[row] == theirs.get(row)
            ratios = [b / t for t, b in zip(times[("this", d)][row], times[(base, d)][row], strict=True)]
            cells.append(f"{d} dev: {'same program' if same else 'program differs'}, {statistics.median(ratios):.3f}x "
                         f"({min(ratios):.3f}-{max(ratios):.3f})")
        print(f"{row:<16}" + "   ".join(cells))
    print(cpu_line())
    print("target: this checkout at least the base in the same configuration (issue 46 gave 1.11x / 1.03x / 0.93x "
          "at d64 / d128 / d256 on an AVX2 EPYC); where the compiled steps are the same program, a measured "
          "difference is the machine's drift between calls")


if __name__ == "__main__":
    main()
