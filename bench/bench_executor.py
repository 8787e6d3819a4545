"""Executor overhead with trivial step functions (so every second measured is the executor's).

Figures: resubmitting a finished 6-step ladder in a fresh process (import, plan, no Ray: target <= 5 s
wall), the first submit of that ladder in a fresh process (Ray start included, for scale), and the
executor's overhead per step on a warm Ray (a chain of dependent steps, and independent steps in
parallel; target <= 0.5 s per step). Run: ``python -m bench executor``.
"""

from __future__ import annotations

import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
NOOP = "bench.bench_executor:noop"  # a string, so the hash is the same in every process and worker


def noop(config, ctx):
    return {"i": config.get("i", 0)}


def six_steps():
    from ladder.executor import Dep, Step

    return [
        Step("rung_1", NOOP, {"i": 1}), Step("rung_2", NOOP, {"i": 2}),
        Step("fit", NOOP, {"i": 3}, deps=(Dep("rung_1"), Dep("rung_2"))),
        Step("gate", NOOP, {"i": 4}, deps=(Dep("fit"),)),
        Step("hero", NOOP, {"i": 5}, deps=(Dep("gate", kind="order"),)),
        Step("report", NOOP, {"i": 6}, deps=(Dep("hero", required=False), Dep("fit"))),
    ]


def submit(root: str) -> None:
    """What a fresh `ladder submit` does for this ladder; exits 0 when every step succeeded."""
    from ladder.executor import Executor

    s = Executor(root, "bench").run(six_steps())
    print("ray_started" if s.ray_started else "no_ray", len(s.ran), flush=True)
    sys.exit(0 if s.ok else 1)


def _env(ray_tmp: str) -> dict:
    path = os.environ.get("PYTHONPATH", "")
    return {**os.environ, "RAY_TMPDIR": ray_tmp, "PYTHONPATH": REPO + (os.pathsep + path if path else "")}


def _fresh_process_submit(root: str, ray_tmp: str) -> tuple[float, str]:
    code = f"import sys; sys.path.insert(0, {REPO!r}); from bench.bench_executor import submit; submit({root!r})"
    t = time.perf_counter()
    p = subprocess.run([sys.executable, "-c", code], env=_env(ray_tmp), capture_output=True, text=True, cwd=REPO)
    wall = time.perf_counter() - t
    if p.returncode != 0:
        raise RuntimeError(f"submit failed ({p.returncode}):\n{p.stdout}\n{p.stderr[-2000:]}")
    return wall, p.stdout.strip().splitlines()[-1]


def _warm_overhead(root: str, ray_tmp: str, n_chain: int = 20, n_wide: int = 20) -> dict:
    import ray

    from ladder.executor import Dep, Executor, Step

    os.environ.update(_env(ray_tmp))  # workers import bench.bench_executor through PYTHONPATH
    if REPO not in sys.path:
        sys.path.insert(0, REPO)
    ray.init(address="local", num_cpus=os.cpu_count(), include_dashboard=False, logging_level="WARNING")
    try:
        ex = Executor(root, "overhead")
        warm = [Step(f"warm_{i}", NOOP, {"i": i}) for i in range(os.cpu_count() or 1)]
        ex.run(warm)  # start and import into the workers once
        chain = [Step(f"c{i}", NOOP, {"i": i}, deps=(Dep(f"c{i - 1}"),) if i else ()) for i in range(n_chain)]
        t = time.perf_counter()
        s = ex.run(chain)
        chain_s = time.perf_counter() - t
        assert s.ok and len(s.ran) == n_chain
        wide = [Step(f"w{i}", NOOP, {"i": i}) for i in range(n_wide)]
        t = time.perf_counter()
        s = ex.run(wide)
        wide_s = time.perf_counter() - t
        assert s.ok and len(s.ran) == n_wide
        t = time.perf_counter()
        ex.plan(chain)
        plan_s = time.perf_counter() - t
        t = time.perf_counter()
        s = ex.run(chain)
        skip_s = time.perf_counter() - t
        assert s.ok and not s.ran
    finally:
        ray.shutdown()
    return {"chain": chain_s / n_chain, "wide": wide_s / n_wide, "plan": plan_s, "skip": skip_s,
            "n_chain": n_chain, "n_wide": n_wide}


def main() -> None:
    work = tempfile.mkdtemp(prefix="bench-executor-")
    ray_tmp = tempfile.mkdtemp(prefix="rb-", dir="/tmp")  # short: Ray's socket path limit
    try:
        root = os.path.join(work, "runs")
        first, first_out = _fresh_process_submit(root, ray_tmp)
        assert first_out.startswith("ray_started 6"), first_out
        resubmits = []
        for _ in range(3):
            wall, out = _fresh_process_submit(root, ray_tmp)
            assert out == "no_ray 0", out
            resubmits.append(wall)
        warm = _warm_overhead(os.path.join(work, "warm"), ray_tmp)
    finally:
        shutil.rmtree(work, ignore_errors=True)
        shutil.rmtree(ray_tmp, ignore_errors=True)
    rows = [
        ("resubmit finished 6-step ladder, fresh process (median of 3)", statistics.median(resubmits), 5.0),
        ("resubmit finished 6-step ladder, fresh process (worst of 3)", max(resubmits), 5.0),
        ("first submit of the 6-step ladder, fresh process, Ray start included", first, None),
        (f"overhead per step, chain of {warm['n_chain']} dependent steps, warm Ray", warm["chain"], 0.5),
        (f"overhead per step, {warm['n_wide']} independent steps on {os.cpu_count()} CPUs, warm Ray",
         warm["wide"], 0.5),
        (f"plan() of {warm['n_chain']} finished steps, in process", warm["plan"], None),
        (f"run() of {warm['n_chain']} finished steps, in process (all skipped)", warm["skip"], None),
    ]
    width = max(len(r[0]) for r in rows)
    print(f"{'figure':<{width}}  {'measured':>9}  {'target':>8}  ok")
    for name, value, target in rows:
        tgt = f"<= {target:g} s" if target is not None else "-"
        ok = ("yes" if value <= target else "NO") if target is not None else ""
        print(f"{name:<{width}}  {value:>7.3f} s  {tgt:>8}  {ok}")


if __name__ == "__main__":
    main()
