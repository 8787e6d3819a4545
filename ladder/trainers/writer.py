"""The trainer contract's writer: standard library only, so a lab can copy this one file into its trainer.

A trainer started by ``ladder`` (docs/trainers.md) reads its run from the JSON file named by
``$LADDER_RUN_CONFIG`` (also passed as ``{config}`` on its command line) and writes its rows here::

    from writer import RunWriter, lr_at, read_run        # or: from ladder.trainers.writer import ...

    run = read_run()
    start = restore_my_checkpoint(run["checkpoint"]["dir"])     # 0 on a fresh start
    with RunWriter(run, resume_step=start) as out:
        for step in range(start + 1, run["steps"] + 1):
            loss = train_one_step(lr=lr_at(run["lr_schedule"], step - 1))
            if step % run["log_every"] == 0 or step == run["steps"]:
                out.metrics(step, loss)
            if step in run["eval"]["steps"]:
                out.eval(step, eval_loss, **{"eval_loss/code": ..., "eval_loss/prose": ...})
        out.final_eval(run["steps"], final_loss, **per_domain)   # only when the final sample differs

Rows are appended as JSON lines and flushed, so ``ladder`` follows them as they grow (the progress
line, the hero's live forecast); on a resume the rows past the restored step are dropped first, so a
resumed run's files read as if it had never stopped. Only the process of rank 0 (``$RANK``) writes: in
a gang every other process's writer does nothing. Nothing here imports ``ladder``.
"""

from __future__ import annotations

import json
import math
import os
from pathlib import Path

CONTRACT_VERSION = 1
# The file names of a run's directory (ladder.outputs.layout names the same; a test keeps them equal).
METRICS = "metrics.jsonl"
EVAL = "eval.jsonl"
EVENTS = "events.jsonl"
FINAL_EVAL = "final_eval.json"
RUN_CONFIG_ENV = "LADDER_RUN_CONFIG"


def read_run(path: str | os.PathLike | None = None) -> dict:
    """The resolved run: ``path``, else the file named by ``$LADDER_RUN_CONFIG``."""
    path = path or os.environ.get(RUN_CONFIG_ENV)
    if not path:
        raise SystemExit(f"no run config: pass its path or set ${RUN_CONFIG_ENV}")
    run = json.loads(Path(path).read_text())
    if run.get("contract") != CONTRACT_VERSION:
        raise SystemExit(f"{path}: contract {run.get('contract')!r}, this writer speaks {CONTRACT_VERSION}")
    return run


def _clean(value):
    """JSON has no NaN or infinity: a non-finite loss is written as null / "inf" / "-inf"."""
    if isinstance(value, float) and not math.isfinite(value):
        return None if math.isnan(value) else ("inf" if value > 0 else "-inf")
    return value


def _read_rows(path: Path) -> list[dict]:
    rows = []
    for line in path.read_text().splitlines():
        line = line.strip()
        if not line:
            continue
        try:
            rows.append(json.loads(line))
        except json.JSONDecodeError:  # a torn last line of a killed run: what follows it is gone too
            break
    return rows


class _Lines:
    """One append-only JSON-lines file; on open, the rows past ``keep_until`` are dropped."""

    def __init__(self, path: Path, keep_until: int):
        self.path = path
        if path.exists():
            kept = [r for r in _read_rows(path) if r.get("step", 0) <= keep_until]
            tmp = path.with_name(f".{path.name}.tmp")
            tmp.write_text("".join(json.dumps(r) + "\n" for r in kept))
            os.replace(tmp, path)
        self._fh = path.open("a")

    def write(self, row: dict) -> None:
        self._fh.write(json.dumps({k: _clean(v) for k, v in row.items()}) + "\n")
        self._fh.flush()

    def close(self) -> None:
        self._fh.close()


class RunWriter:
    """Writes a run's ``metrics.jsonl``, ``eval.jsonl``, ``events.jsonl`` and ``final_eval.json``.

    ``resume_step``: the step the trainer restored (0 on a fresh start): rows past it are dropped.
    ``rank``: this process's rank (default ``$RANK``, else 0); a rank other than 0 writes nothing.
    ``tokens`` and ``flops`` of a row default to ``step`` times the run's tokens (and FLOPs) a step.
    """

    def __init__(self, run: dict, *, resume_step: int = 0, rank: int | None = None):
        self.run = run
        self.out = Path(run["out_dir"])
        self.tokens_per_step = int(run["tokens_per_step"])
        self.flops_per_token = float(run["model"]["flops_per_token"])
        rank = int(os.environ.get("RANK", "0")) if rank is None else int(rank)
        self.active = rank == 0
        self._files: dict[str, _Lines] = {}
        if not self.active:
            return
        self.out.mkdir(parents=True, exist_ok=True)
        keep = int(resume_step)
        for name in (METRICS, EVAL, EVENTS):
            self._files[name] = _Lines(self.out / name, keep)
        if keep < int(run["steps"]):
            (self.out / FINAL_EVAL).unlink(missing_ok=True)

    def _row(self, step: int, fields: dict) -> dict:
        step = int(step)
        tokens = fields.pop("tokens", step * self.tokens_per_step)
        return {"step": step, "tokens": tokens, "flops": fields.pop("flops", tokens * self.flops_per_token), **fields}

    def metrics(self, step: int, loss: float, **fields) -> None:
        """One logged train step: ``loss`` (that step's), and optionally ``loss_mean`` (the mean over the
        logging interval, which curves are fitted on), ``lr``, ``grad_norm``, ``tokens_per_s``, ``mfu``,
        ``wall_s`` (seconds since the run began, resumes included) or any other number."""
        if self.active:
            self._files[METRICS].write(self._row(step, {"loss": float(loss), **fields}))

    def eval(self, step: int, eval_loss: float, **fields) -> None:
        """One eval on ``eval.tokens_per_domain``: ``eval_loss`` (the mixture's weighted mean) and per domain
        ``eval_loss/<domain>``, optionally ``bpb``, ``bpb/<domain>``, ``eval_loss_se`` (standard error)."""
        if self.active:
            self._files[EVAL].write(self._row(step, {"eval_loss": float(eval_loss), **fields}))

    def final_eval(self, step: int, eval_loss: float, **fields) -> None:
        """The final eval on ``eval.final_tokens_per_domain`` tokens a domain, the number the laws fit.
        Required when that differs from ``eval.tokens_per_domain``; otherwise the last eval row is the final."""
        if not self.active:
            return
        row = {k: _clean(v) for k, v in self._row(step, {"eval_loss": float(eval_loss), **fields}).items()}
        tmp = self.out / f".{FINAL_EVAL}.tmp"
        tmp.write_text(json.dumps(row))
        os.replace(tmp, self.out / FINAL_EVAL)

    def event(self, step: int, event: str, **fields) -> None:
        """A spike, a divergence or anything else worth marking on the run's curve."""
        if self.active:
            self._files[EVENTS].write({"step": int(step), "event": event, **fields})

    def close(self) -> None:
        for f in self._files.values():
            f.close()
        self._files = {}

    def __enter__(self) -> RunWriter:
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def _cooldown(frac: float, shape: str) -> float:
    frac = min(1.0, max(0.0, frac))
    if shape == "linear":
        return 1.0 - frac
    if shape == "1-sqrt":
        return 1.0 - math.sqrt(frac)
    if shape == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * frac))
    raise ValueError(f"cooldown_shape {shape!r} is not one of linear, 1-sqrt, cosine")


def lr_at(schedule: dict, step: int) -> float:
    """The learning rate that takes optimizer step ``step`` to ``step + 1`` (``step`` from 0), from the run's
    ``lr_schedule``: exactly the built-in trainer's schedule (ladder.trainers.builtin.optim.lr_schedule)."""
    total, peak, floor = int(schedule["total_steps"]), float(schedule["peak"]), float(schedule["final_lr_frac"])
    w = int(schedule["warmup_steps"])
    if step < w:
        return peak * min(1.0, (step + 1) / max(1, w))
    kind = schedule["kind"]
    if kind == "constant":
        return peak
    if kind == "wsd":
        start, decay = int(schedule["decay_start"]), int(schedule["decay_steps"])
        if step < start:
            return peak
        return peak * (floor + (1 - floor) * _cooldown((step - start + 1) / max(1, decay), schedule["cooldown_shape"]))
    after = min(1.0, max(0.0, (step - w + 1) / max(1, total - w)))
    if kind == "cosine":
        return peak * (floor + (1 - floor) * _cooldown(after, "cosine"))
    if kind == "linear":
        return peak * (floor + (1 - floor) * (1.0 - after))
    raise ValueError(f"schedule kind {kind!r} is not one of cosine, linear, constant, wsd")
