"""Does a task's accuracy rise with scale? Scores a task on every trained run of a ladder root, from each run's
newest checkpoint, and prints accuracy (with its standard error) and task loss against the run's size.

    python -m bench.task_rise ROOT/LADDER [builtin:heldout_cloze] [--items N] [--seed S]

A run trained without the task is scored here as its last eval would have scored it (same model, same items):
the ladder need not be trained again to try a task. experiments/tasks_record.md keeps what this printed.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path


def score_run(run_dir: Path, task, tokenizer_file: str | None = None) -> dict:
    """The task's columns for ``run_dir``'s newest checkpoint (its train_config.json says what it is)."""
    import jax

    from ladder.spec import data_from_dict, rung_from_dict
    from ladder.trainers.builtin import optim as optim_lib
    from ladder.trainers.builtin.checkpoint import Checkpointer
    from ladder.trainers.builtin.evaluate import eval_model
    from ladder.trainers.builtin.model import build
    from ladder.trainers.builtin.task_eval import task_runner

    config = json.loads((run_dir / "train_config.json").read_text())
    rung, data = rung_from_dict(config["rung"]), data_from_dict(config["data"])
    data = dataclasses.replace(data, tasks=(task,))
    fm = build(rung.model, int(rung.seed))
    opt = optim_lib.make_optimizer(rung.optim, fm.params)
    restored = Checkpointer(run_dir / "checkpoints").restore_latest(fm.params, fm.bias, opt.init(fm.params),
                                                                  {"step": 0, "seed": 0, "wall_s": 0.0})
    if restored is None:
        raise SystemExit(f"{run_dir}: no checkpoint to score")
    step, params, bias, _, _ = restored
    run_tasks = task_runner(data, rung.seq_len, eval_model(fm, data, int(rung.seed)), None, tokenizer_file)
    row = run_tasks(jax.device_put(params), jax.device_put(bias))
    return {"run": rung.name, "step": int(step), "params_active": rung.model.params_active, **row}


def main(argv: list[str] | None = None) -> None:
    from ladder.spec import TaskSpec

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("ladder_dir")
    ap.add_argument("source", nargs="?", default="builtin:heldout_cloze")
    ap.add_argument("--items", type=int, default=0)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)
    task = TaskSpec("task", args.source, items=args.items, seed=args.seed)
    runs = sorted(p for p in Path(args.ladder_dir).iterdir() if (p / "checkpoints").is_dir())
    rows = sorted((score_run(p, task) for p in runs), key=lambda r: r["params_active"])
    print(f"{'run':<10} {'N active':>10} {'step':>6} {'accuracy':>14} {'task bpb':>9}")
    for r in rows:
        print(f"{r['run']:<10} {r['params_active']:>10,} {r['step']:>6} "
              f"{r['task_acc/task']:>7.3f} ± {r['task_acc_se/task']:.3f} {r['task_bpb/task']:>9.4f}")


if __name__ == "__main__":
    main()
