"""The PyTorch trainer of the contract (examples/torch_gpt) beside the built-in JAX trainer, on the same shapes:
rungs of the smoke ladder (d16 to d48, 4 experts top-2, seq 64, batch 16, byte vocabulary), each trainer in its
own child process pinned to one core (torch with ``OMP_NUM_THREADS=1``; the built-in trainer on one XLA
device), the two alternating rung by rung, the order reversed every other round.

Tokens/s is each run's steady rate: the built-in trainer's result.json (its compile left out), the torch
trainer's logged rows after its first logging interval (its start-up left out). The models differ in one way
besides the framework: the built-in MoE drops choices past an expert's capacity while training, the torch one is
dropless. ``LADDER_BENCH_TORCH_RUNGS`` (default ``rung_2,rung_4,hero``) and ``LADDER_BENCH_ROUNDS`` (default 1).
"""

from __future__ import annotations

import json
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
from dataclasses import replace
from pathlib import Path

from bench.bench_train import cpu_line

REPO = Path(__file__).resolve().parents[1]
SCRIPT = REPO / "examples" / "torch_gpt" / "train.py"

BUILTIN_CHILD = r"""
import json, sys
from dataclasses import replace
from ladder.spec import Resources, load_spec
from ladder.trainers.builtin import train
spec = load_spec(sys.argv[1])
run = spec.rung(sys.argv[2])
run = replace(run, resources=Resources(cpus=1, cpu_devices=1))
data = spec.data.for_hero() if run.name == "hero" else spec.data
print(json.dumps(train(run, data, sys.argv[3])))
"""


def _pin(cpu: int):
    return lambda: os.sched_setaffinity(0, {cpu})


def _builtin(name: str, out: Path, cpu: int) -> float:
    proc = subprocess.run([sys.executable, "-c", BUILTIN_CHILD, str(REPO / "experiments" / "smoke.py"), name, str(out)],
                          capture_output=True, text=True, check=True, preexec_fn=_pin(cpu),
                          env={**os.environ, "JAX_PLATFORMS": "cpu"})
    return float(json.loads(proc.stdout.strip().splitlines()[-1])["tokens_per_s"])


def _torch(spec, name: str, out: Path, cpu: int) -> float:
    from ladder.dag.train_steps import run_data
    from ladder.outputs.layout import iter_jsonl
    from ladder.trainers.contract import run_input

    run = spec.rung(name)
    run = replace(run, resources=replace(run.resources, processes=1))  # one process on one core, like the built-in
    role = "hero" if name == "hero" else "rung"
    out.mkdir(parents=True)
    (out / "run.json").write_text(json.dumps(run_input(run, run_data(spec, role), out, role=role, ladder=spec.name,
                                                       resume=False)))
    subprocess.run([sys.executable, str(SCRIPT), "--config", str(out / "run.json")], check=True, preexec_fn=_pin(cpu),
                   env={**os.environ, "OMP_NUM_THREADS": "1"}, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    rows = list(iter_jsonl(out / "metrics.jsonl"))
    first, last = rows[0], rows[-1]
    return (last["tokens"] - first["tokens"]) / (last["wall_s"] - first["wall_s"])


def main() -> None:
    try:
        import torch  # noqa: F401
    except ImportError:
        print("skipped: torch does not import here (`make install` installs the torch extra)")
        return
    from ladder.spec import load_spec

    spec = load_spec(REPO / "experiments" / "smoke_torch.py")
    names = os.environ.get("LADDER_BENCH_TORCH_RUNGS", "rung_2,rung_4,hero").split(",")
    rounds = int(os.environ.get("LADDER_BENCH_ROUNDS", "1"))
    cpu = sorted(os.sched_getaffinity(0))[-1]
    tmp = Path(tempfile.mkdtemp(prefix="ladder-bench-torch-gpt-"))
    got: dict[tuple[str, str], list[float]] = {}
    load0 = os.getloadavg()[0]
    try:
        for r in range(rounds):
            for name in names:
                order = ("builtin", "torch") if r % 2 == 0 else ("torch", "builtin")
                for who in order:
                    out = tmp / f"{who}-{name}-{r}"
                    rate = _builtin(name, out, cpu) if who == "builtin" else _torch(spec, name, out, cpu)
                    got.setdefault((who, name), []).append(rate)
            print(f"  round {r + 1}/{rounds} done (load {os.getloadavg()[0]:.1f})", flush=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    print(f"\nsmoke ladder shapes, one core each (cpu {cpu}), {rounds} round(s): the built-in JAX trainer and "
          f"examples/torch_gpt; load average {load0:.1f} -> {os.getloadavg()[0]:.1f} on {os.cpu_count()} CPUs (shared)")
    head = f"{'run':<8}{'d_model':>8}{'layers':>7}{'steps':>7}{'builtin tok/s':>15}{'torch tok/s':>13}{'torch/builtin':>15}"
    print(head)
    print("-" * len(head))
    for name in names:
        run = spec.rung(name)
        b, t = statistics.median(got[("builtin", name)]), statistics.median(got[("torch", name)])
        print(f"{name:<8}{run.model.d_model:>8}{run.model.n_layers:>7}{run.steps:>7}{b:>15,.0f}{t:>13,.0f}{t / b:>14.2f}x")
    print("each cell: the median over rounds of a run's steady tokens/s (compile and start-up left out); the torch MoE "
          "is dropless, the built-in one drops past capacity")
    print(cpu_line())


if __name__ == "__main__":
    main()
