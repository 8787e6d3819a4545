"""Two 1-CPU runs side by side, pinned to a core each (ladder.trainers.builtin.cores) against left to the OS.

The default ladder's rung_1, rung_2 and rung_5 sizes (two seeds each, as `make demo` runs them), 800 steps,
two processes at once, the two settings alternated in one run. Figures: each pair's tokens/s
(training steps only) and wall (import, compile, evals and checkpoints included), and whether the
pinned and unpinned losses agree to the last digit (pinning must not move a run's numbers).
Run: ``python -m bench pinning``.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
STEPS = 800
SIZES = tuple(os.environ.get("BENCH_PIN_SIZES", "rung_1,rung_2,rung_5").split(","))


def _child(rung_name: str, out: str) -> None:
    import jax

    from ladder.spec.load import load_spec
    from ladder.trainers.builtin.cores import pinned

    jax.devices()  # as the ladder's train step does: XLA starts seeing every core, then the pin
    spec = load_spec(os.path.join(REPO, "experiments", "tiny.py"))
    rung = next(r for r in spec.rungs if r.name == rung_name)
    with pinned(1.0 if os.environ.get("PIN") == "1" else 0.0) as got:
        from ladder.trainers.builtin import train

        t = time.perf_counter()
        r = train(rung, spec.data, out, max_steps=STEPS)
    print(json.dumps({"cores": got, "wall": time.perf_counter() - t, "tps": r["tokens_per_s"],
                      "loss": r["final_train_loss"]}))


def _pair(size: str, pin: bool, tmp: str) -> list[dict]:
    env = {**os.environ, "PIN": "1" if pin else "0", "JAX_PLATFORMS": "cpu",
           "LADDER_CORE_LOCKS": os.path.join(tmp, "locks")}
    procs = [subprocess.Popen([sys.executable, "-m", "bench.bench_pinning", "--child", name,
                               os.path.join(tmp, f"{name}-{pin}-{time.time_ns()}")],
                              cwd=REPO, env=env, stdout=subprocess.PIPE, text=True)
             for name in (size, f"{size}_r1")]
    return [json.loads(p.communicate()[0].strip().splitlines()[-1]) for p in procs]


def main() -> None:
    if len(os.sched_getaffinity(0)) < 2:
        print("skipped: pinning two runs needs two cores")
        return
    print(f"{'rung (2 seeds)':<16}{'setting':<10}{'tokens/s':>12}{'wall s':>9}  losses")
    with tempfile.TemporaryDirectory(prefix="bench-pin-") as tmp:
        for size in SIZES:
            got = {}
            for pin in (False, True, False, True):  # alternated: drift in the machine hits both
                got.setdefault(pin, []).append(_pair(size, pin, tmp))
            for pin in (False, True):
                runs = [r for pair in got[pin] for r in pair]
                tps = sum(r["tps"] for r in runs) / len(got[pin])
                wall = max(r["wall"] for r in runs)
                losses = sorted({round(r["loss"], 12) for r in runs})
                print(f"{size:<16}{'pinned' if pin else 'OS':<10}{tps:>12,.0f}{wall:>9.1f}  {losses}")
            same = {round(r["loss"], 12) for p in got[True] for r in p} == {round(r["loss"], 12) for p in got[False] for r in p}
            ratio = (sum(r["tps"] for p in got[True] for r in p) / sum(r["tps"] for p in got[False] for r in p))
            print(f"{size:<16}pinned / OS tokens/s {ratio:.2f}x; losses identical: {same}")


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        _child(sys.argv[2], sys.argv[3])
    else:
        main()
