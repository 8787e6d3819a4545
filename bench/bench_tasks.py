"""What a task eval costs beside a loss eval: the default ladder's data (experiments/tiny.py) with its built-in
held-out cloze (data.tasks = (TaskSpec("heldout_cloze", "builtin:heldout_cloze"),)), at its smallest, middle and
largest rung and its hero.

For each size, one device, after a first call of each (the compiles) is left out: the seconds of the loss eval on
``eval_tokens`` a domain (every eval of a rung) and on ``final_eval_tokens`` (the final, and every hero eval), and
of the task eval (every eval adds one), the median of ``ROUNDS`` alternated rounds. Weights are the untrained
initialisation: an eval's cost does not depend on them (MoE evals are dropless: every expert is computed).
"""

from __future__ import annotations

import dataclasses
import importlib.util
import statistics
import time
from pathlib import Path

ROUNDS = 3


def _tiny():
    path = Path(__file__).resolve().parents[1] / "experiments" / "tiny.py"
    spec = importlib.util.spec_from_file_location("tiny_for_bench", path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def main() -> None:
    import jax

    from ladder.spec import TaskSpec
    from ladder.trainers.builtin.data import Mixture
    from ladder.trainers.builtin.evaluate import eval_model, make_run_eval
    from ladder.trainers.builtin.jitted import make_eval
    from ladder.trainers.builtin.model import build
    from ladder.trainers.builtin.task_builtin import load_items
    from ladder.trainers.builtin.task_eval import encode, make_run_tasks
    from ladder.trainers.builtin.tokenizer import ByteTokenizer

    tiny = _tiny()
    data = dataclasses.replace(tiny.LADDER.data, tasks=(TaskSpec("heldout_cloze", "builtin:heldout_cloze"),))
    seq = tiny.LADDER.rungs[0].seq_len
    mixture = Mixture(data, seq, 0)
    t0 = time.perf_counter()
    rows = encode("heldout_cloze", load_items(data.tasks[0], data), ByteTokenizer(), seq)
    setup = time.perf_counter() - t0
    print(f"backend {jax.default_backend()}, {len(jax.local_devices())} device(s) (one used); tasks: "
          f"{', '.join(t.name for t in data.tasks)}")
    rungs = tiny.LADDER.rungs
    runs = (rungs[0], rungs[len(rungs) // 2], rungs[-1], tiny.LADDER.hero)
    head = (f"{'run':<8} {'d x L':>6} {'N active':>9} {'loss eval s':>11} {'final eval s':>12} {'task eval s':>11} "
            f"{'task/eval':>9} {'task/final':>10}")
    lines = []
    for run in runs:
        fm = eval_model(build(run.model, 0), data, 0)
        run_eval = make_run_eval(mixture, make_eval(fm), 1, seq, 0.0)
        run_tasks = make_run_tasks([rows], fm)
        p, b = jax.device_put(fm.params), jax.device_put(fm.bias)
        calls = {"eval": (run_eval, (p, b, 0, data.eval_tokens)), "final": (run_eval, (p, b, 0, data.final_tokens)),
                 "task": (run_tasks, (p, b))}
        times: dict[str, list[float]] = {k: [] for k in calls}
        for fn, args in calls.values():
            fn(*args)  # the compile
        for _ in range(ROUNDS):
            for k, (fn, args) in calls.items():
                start = time.perf_counter()
                fn(*args)
                times[k].append(time.perf_counter() - start)
        med = {k: statistics.median(v) for k, v in times.items()}
        shape = f"{run.model.d_model}x{run.model.n_layers}"
        lines.append(f"{run.name:<8} {shape:>6} {run.model.params_active:>9,} {med['eval']:>11.3f} {med['final']:>12.3f} "
                     f"{med['task']:>11.3f} {med['task'] / med['eval']:>8.0%} {med['task'] / med['final']:>10.0%}")
    n_dom = len(data.domains)
    print(f"loss eval: {n_dom} domains x {data.eval_tokens:,} tokens (final: x {data.final_tokens:,}); task eval: "
          f"{rows.n_items} items x {rows.tokens.shape[0] // rows.n_items} choices = {rows.tokens.shape[0]:,} rows of "
          f"{rows.width} tokens = {rows.tokens.shape[0] * rows.width:,} tokens; the items drawn and encoded in {setup:.1f} s")
    print(f"\nseconds per eval (median of {ROUNDS} rounds, compiles left out)")
    print(head)
    print("-" * len(head))
    for line in lines:
        print(line)


if __name__ == "__main__":
    main()
