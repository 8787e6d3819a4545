"""The smoke ladder with every rung and the hero trained by PyTorch: examples/torch_gpt/train.py, a command trainer
of the contract (docs/trainers.md). Same recipe, sizes, tokens, data, fit and gate as experiments/smoke.py; the
differences are the trainer's:

- the MoE is dropless while training too (the built-in trainer drops choices past an expert's capacity);
- no cooldown branches (``schedule.branch_fracs`` is empty: the script trains the main run only);
- one thread a process (``OMP_NUM_THREADS=1``), so a resumed run replays the same kernels to the bit;
- the hero's two CPUs are two processes, a gang (DistributedDataParallel over gloo, each process half of every
  batch), where the built-in trainer splits one process into two XLA host devices.

    ladder submit experiments/smoke_torch.py && ladder report experiments/smoke_torch.py
"""

import importlib.util
from dataclasses import replace
from pathlib import Path

from ladder.spec import TrainerSpec

HERE = Path(__file__).resolve().parent
SCRIPT = "../examples/torch_gpt"  # relative to this file's folder, so the steps' hashes are the same in any checkout


def _smoke():
    spec = importlib.util.spec_from_file_location("smoke_ladder", HERE / "smoke.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.LADDER


SMOKE = _smoke()
TORCH_GPT = TrainerSpec(
    kind="command",
    command=("{python}", f"{SCRIPT}/train.py", "--config", "{config}"),
    env={"OMP_NUM_THREADS": "1"},
    # every file of the script: editing one makes new steps (their digests are in the step's hash)
    code=tuple(f"{SCRIPT}/{p.name}" for p in sorted((HERE / SCRIPT).glob("*.py"))),
)


def _torch_run(run):
    return replace(run, schedule=replace(run.schedule, branch_fracs=()))


LADDER = replace(
    SMOKE,
    name="smoke_torch",
    rungs=tuple(_torch_run(r) for r in SMOKE.rungs),
    hero=replace(_torch_run(SMOKE.hero), resources=replace(SMOKE.hero.resources, processes=2)),
    trainer=TORCH_GPT,
    description="the smoke ladder trained by PyTorch (examples/torch_gpt) through the trainer contract",
)
