"""A foreign trainer's result.json, read from the files it wrote (docs/trainers.md): the same keys as a
built-in run's, so the fit, the gate, the report and the dashboard read it as they read one, and
``trainer`` naming what trained it."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

from ladder.outputs import layout
from ladder.trainers.follow import RowError, parse_row


class NoFinalEval(RuntimeError):
    """The trainer ended (exit status 0) without the final eval the laws fit: the run failed."""


def read_rows(path: Path) -> list[dict]:
    """Every row of a finished trainer's file, each checked (a line that is not JSON names its file and line)."""
    if not path.exists():
        return []
    return [parse_row(path, i, line.strip()) for i, line in enumerate(path.read_text().splitlines(), 1) if line.strip()]


def _num(v: Any) -> float | None:
    return float(v) if isinstance(v, int | float) and not isinstance(v, bool) and math.isfinite(v) else None


def final_eval(inp: dict, out: Path) -> tuple[dict, dict]:
    """(the final eval, the eval curve's last row): the final is ``final_eval.json`` when the final sample
    differs from the other evals', else the curve's row at the last step."""
    steps = int(inp["steps"])
    at_end = [r for r in read_rows(out / layout.EVAL) if r["step"] == steps]
    if not at_end or _num(at_end[-1].get("eval_loss")) is None:
        raise NoFinalEval(f"{inp['name']}: the trainer exited 0 without a final eval row (an eval.jsonl row at step "
                          f"{steps} with a finite eval_loss); it must finish the run and write its final eval")
    curve = at_end[-1]
    ev = inp["eval"]
    if ev["final_tokens_per_domain"] == ev["tokens_per_domain"]:
        return curve, curve
    path = out / layout.FINAL_EVAL
    try:
        final = json.loads(path.read_text())
    except FileNotFoundError:
        raise NoFinalEval(f"{inp['name']}: the trainer exited 0 without {path.name} (the final eval on "
                          f"{ev['final_tokens_per_domain']} tokens a domain); write it with RunWriter.final_eval") from None
    except ValueError:
        raise RowError(f"{path}: not JSON; write it with RunWriter.final_eval") from None
    if not isinstance(final, dict) or _num(final.get("eval_loss")) is None:
        raise NoFinalEval(f"{path}: no finite eval_loss; write it with RunWriter.final_eval")
    return final, curve


def result(inp: dict, out: Path, wall_s: float, trainer: dict) -> dict:
    """result.json of a run its trainer finished (raises NoFinalEval, RowError)."""
    final, curve = final_eval(inp, out)
    metrics = read_rows(out / layout.METRICS)
    domains = [d["name"] for d in inp["data"]["domains"]]
    tail = [x for x in (_num(r.get("loss")) for r in metrics[-5:]) if x is not None]
    rates = [x for x in (_num(r.get("tokens_per_s")) for r in metrics) if x is not None]
    steps, per_step, model = int(inp["steps"]), int(inp["tokens_per_step"]), inp["model"]
    separate = final is not curve
    logged_wall = _num(metrics[-1].get("wall_s")) if metrics else None
    return {
        "name": inp["name"],
        "status": "SUCCESS",
        "complete": True,
        "final_train_loss": sum(tail) / len(tail) if tail else None,
        "final_eval_loss": _num(final["eval_loss"]),
        "final_eval_loss_by_domain": {d: _num(final.get(f"eval_loss/{d}")) for d in domains
                                      if f"eval_loss/{d}" in final},
        "final_eval_loss_se": _num(final.get("eval_loss_se")),
        "final_bpb": _num(final.get("bpb")),
        "final_bpb_by_domain": {d: _num(final.get(f"bpb/{d}")) for d in domains if f"bpb/{d}" in final},
        "final_eval_tokens": inp["eval"]["final_tokens_per_domain"],
        "final_sample_eval_loss": _num(curve["eval_loss"]) if separate else None,
        # data.tasks' columns (task_acc/<task>, task_bpb/<task> ...): the final's, else the last eval row's
        "final_task_metrics": {k: _num(v) for k, v in {**curve, **final}.items() if k.startswith("task_")},
        "params_total": model["params_total"],
        "params_active": model["params_active"],
        "params_non_embedding": model["params_non_embedding"],
        "tokens": steps * per_step,
        "steps": steps,
        "total_steps": steps,
        "flops": steps * per_step * model["flops_per_token"],
        "flops_per_token": model["flops_per_token"],
        "wall_s": logged_wall if logged_wall is not None else wall_s,
        "tokens_per_s": sum(rates) / len(rates) if rates else (steps * per_step / wall_s if wall_s > 0 else None),
        "seed": inp["seed"],
        "batch_size": inp["batch_size"],
        "seq_len": inp["seq_len"],
        "lr": inp["lr_schedule"]["peak"],
        "processes": inp["processes"],
        "branches": [],
        "trainer": trainer,
    }
