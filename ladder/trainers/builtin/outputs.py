"""What a training run leaves in its directory besides checkpoints: result.json's summary, JSON-lines
files written whole, and the guard that keeps one directory to one config."""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

import jax
import numpy as np

from ladder.executor.hashing import config_diff, format_diff, hashed_config
from ladder.trainers.builtin.metrics import read_jsonl


def _finite(x) -> bool:
    return x is not None and isinstance(x, float | int) and math.isfinite(x)


class TrainConfigMismatch(ValueError):
    """``out_dir`` holds a run of another config (or seed): continuing it would mix two runs in one."""


def check_same_config(path: Path, config: dict, shown: str) -> None:
    """Refuse to continue or reuse outputs written for another config, naming the fields that differ
    (descriptions, resources and fields left at their hash-neutral defaults do not count)."""
    try:
        old = json.loads(path.read_text())
    except FileNotFoundError:
        return
    except ValueError:
        raise TrainConfigMismatch(f"{shown}/train_config.json is not valid JSON; remove the directory or "
                                  "train into another one") from None
    diff = config_diff(hashed_config(old), hashed_config(config))
    if diff:
        raise TrainConfigMismatch(f"{shown} holds a run of another config ({format_diff(diff)}); train into "
                                  "another directory (--root) or remove it")



def write_json_lines(path: Path, rows: list[dict]) -> None:
    tmp = path.with_name(f".{path.name}.tmp")
    tmp.write_text("".join(json.dumps(r) + "\n" for r in rows))
    os.replace(tmp, path)


def summarise(rung, data, mixture, state, metrics_w, failed_step, stop, total_steps, tokens_per_step, fpt,
            wall_s, branch_rows, step, layout) -> dict:
    m = rung.model
    all_rows = read_jsonl(metrics_w.path)
    tail = [r["loss"] for r in all_rows[-5:] if _finite(r.get("loss"))]
    ev = state.get("final_eval") or state["eval"]
    done_step = failed_step - 1 if failed_step is not None else step
    res = {
        "name": rung.name,
        "status": "SUCCESS" if failed_step is None else "FAILED",
        "complete": failed_step is None and stop == total_steps,
        "final_train_loss": float(np.mean(tail)) if tail else None,
        "final_eval_loss": ev["eval_loss"] if ev else None,
        "final_eval_loss_by_domain": {d.name: ev[f"eval_loss/{d.name}"] for d in mixture.domains} if ev else {},
        # the final eval's standard error over its windows: is its sample small against the gaps the law fits?
        "final_eval_loss_se": ev.get("eval_loss_se") if ev else None,
        "final_bpb": ev["bpb"] if ev else None,
        "final_bpb_by_domain": {d.name: ev[f"bpb/{d.name}"] for d in mixture.domains} if ev else {},
        # The final's sample: eval.jsonl's last row is on eval_tokens, like the curve before it.
        "final_eval_tokens": data.final_tokens if state.get("final_eval") else int(data.eval_tokens),
        "final_sample_eval_loss": state["eval"]["eval_loss"] if state.get("final_eval") and state["eval"] else None,
        # data.tasks' columns of the final eval (task_acc/<task>, task_acc_se/<task>, task_bpb/<task>)
        "final_task_metrics": {k: v for k, v in ev.items() if k.startswith("task_")} if ev else {},
        "params_total": m.params_total,
        "params_active": m.params_active,
        "params_non_embedding": m.params_non_embedding,
        "tokens": done_step * tokens_per_step,
        "steps": done_step,
        "total_steps": total_steps,
        "flops": done_step * tokens_per_step * fpt,
        "flops_per_token": fpt,
        "wall_s": wall_s,
        "tokens_per_s": state["tokens_timed"] / state["time_timed"] if state["time_timed"] > 0 else None,
        "seed": rung.seed,
        "batch_size": rung.batch_size,
        "seq_len": rung.seq_len,
        "lr": rung.lr,
        "devices": layout.n if layout is not None else 1,
        "parallel": layout.mode if layout is not None else "single",
        "processes": int(jax.process_count()),
        "microbatches": int(rung.resources.microbatches),
        "branches": branch_rows,
        # passes over each domain's training text: rungs that differ here see differently repeated data
        "epochs_by_domain": mixture.epochs_seen(done_step, rung.batch_size),
        "trainer": {"kind": "builtin"},  # every run's result names what trained it (docs/trainers.md)
    }
    if failed_step is not None:
        res["failed_step"] = failed_step
        res["message"] = (
            f"{rung.name}: loss became non-finite at step {failed_step} (lr {rung.lr:g}); "
            f"the last finite metrics are from step {state['last_finite']['step'] if state['last_finite'] else 0}. "
            "Lower optim.lr, raise warmup, or enable qk_norm / z_loss."
        )
        res["last_finite_metrics"] = state["last_finite"]
    return res
