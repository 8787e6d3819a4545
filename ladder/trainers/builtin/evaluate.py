"""Held-out evals of a training run: every domain's loss and bits per byte, and their mixture means."""

from __future__ import annotations

import math
from collections.abc import Callable

import numpy as np

from ladder.spec import DataSpec
from ladder.trainers.builtin.mixture import WindowMixture
from ladder.trainers.builtin.model import Functional, build

# Eval windows go through the model in calls of about this many tokens: a small rung's batch of 3 windows
# made its evals hundreds of tiny calls. A call's rows are a multiple of the devices (so they split over
# them), not of the training batch: 8 windows at a batch of 512 cost 8 rows (and the devices' rounding),
# not 512.
EVAL_TOKENS_PER_CALL = 8192


def eval_model(fm: Functional, data: DataSpec, seed: int) -> Functional:
    """The model the evals run: the trained one, or for a mixture of experts under ``data.eval_dropless``
    the same parameters with every token's experts computed (no capacity: :func:`dropless_dispatch`)."""
    if not (data.eval_dropless and fm.spec.is_moe):
        return fm
    return build(fm.spec, seed, dispatch=dropless_dispatch())


def dropless_dispatch() -> str:
    """``dense`` on CPU, where computing every expert measured faster than ragged_dot (bench_train's dropless
    table); ``ragged`` elsewhere: no (G, E, S, d) broadcast to every expert, about 2 GB a sequence and layer
    at 64 experts and seq 4,096."""
    import jax

    return "dense" if jax.default_backend() == "cpu" else "ragged"


def make_run_eval(mixture: WindowMixture, eval_fn: Callable, batch: int, seq: int, fpt: float,
                  devices: int = 1, run_tasks: Callable[..., dict] | None = None) -> Callable[..., dict]:
    """``run_eval(params, bias, step, eval_tokens)``: the eval row for ``step`` on ``eval_tokens`` a domain,
    with each loss's standard error over its windows (``eval_loss_se/<domain>``, ``eval_loss_se``) and, with
    ``run_tasks`` (ladder.trainers.builtin.task_eval), each task's ``task_acc/<task>`` and ``task_bpb/<task>``."""
    devices = max(1, int(devices))
    eval_rows = devices * max(1, EVAL_TOKENS_PER_CALL // (devices * seq))
    tokens_per_step = batch * seq

    def run_eval(p, b, step: int, eval_tokens: int) -> dict:
        row = {"step": step, "tokens": step * tokens_per_step, "flops": step * tokens_per_step * fpt}
        tot_loss, tot_bpb, tot_var = 0.0, 0.0, 0.0
        for i, dom in enumerate(mixture.domains):
            windows = mixture.eval_windows(i, eval_tokens)
            n = windows.shape[0]
            calls = -(-n // eval_rows)
            rows = -(-n // (calls * devices)) * devices  # as few calls, the least padding
            pad = (-n) % rows
            w = np.concatenate([np.ones(n, np.float32), np.zeros(pad, np.float32)])
            windows = np.concatenate([windows, np.zeros((pad, seq + 1), np.int32)])
            s_nll, s_cnt, per_window = 0.0, 0.0, []
            for j in range(0, windows.shape[0], rows):
                a, c, each = eval_fn(p, b, windows[j : j + rows], w[j : j + rows])
                s_nll += float(a)
                s_cnt += float(c)
                per_window.append(np.asarray(each))
            loss = s_nll / max(s_cnt, 1.0)
            losses = np.concatenate(per_window)[:n] / seq
            se = float(np.std(losses, ddof=1) / math.sqrt(n)) if n > 1 else float("nan")
            n_bytes = mixture.eval_bytes(i, eval_tokens)
            bpb = s_nll / math.log(2) / max(n_bytes, 1)
            row[f"eval_loss/{dom.name}"] = loss
            row[f"bpb/{dom.name}"] = bpb
            row[f"eval_loss_se/{dom.name}"] = se
            tot_var += (mixture.weights[i] * se) ** 2
            tot_loss += mixture.weights[i] * loss
            tot_bpb += mixture.weights[i] * bpb
        row["eval_loss"] = tot_loss
        row["bpb"] = tot_bpb
        row["eval_loss_se"] = math.sqrt(tot_var)
        if run_tasks is not None:
            row.update(run_tasks(p, b))
        return row

    return run_eval
