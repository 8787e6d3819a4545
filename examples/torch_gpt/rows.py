"""The run's rows (metrics.jsonl, eval.jsonl, events.jsonl) through the contract's writer; only the gang's
first process writes, the others get a writer that writes nothing."""

from __future__ import annotations

import json
import os
from pathlib import Path


class _Jsonl:
    def __init__(self, path: Path, keep_until: int):
        self.path = path
        kept = []
        if path.exists():
            for line in path.read_text().splitlines():
                try:
                    row = json.loads(line)
                except json.JSONDecodeError:
                    break
                if row.get("step", 0) <= keep_until:
                    kept.append(row)
        tmp = path.with_name(f".{path.name}.tmp")
        tmp.write_text("".join(json.dumps(r) + "\n" for r in kept))
        os.replace(tmp, path)
        self.kept = kept
        self._f = path.open("a")

    def write(self, row: dict) -> None:
        self._f.write(json.dumps(row) + "\n")
        self._f.flush()

    def close(self) -> None:
        self._f.close()


class Rows:
    def __init__(self, out: Path, start: int, tokens_per_step: int, flops_per_token: float):
        out.mkdir(parents=True, exist_ok=True)
        self.metrics_f = _Jsonl(out / "metrics.jsonl", start)
        self.eval_f = _Jsonl(out / "eval.jsonl", start)
        self.events_f = _Jsonl(out / "events.jsonl", start)
        self.tps, self.fpt = tokens_per_step, flops_per_token

    def _counts(self, row: dict) -> dict:
        return {**row, "tokens": row["step"] * self.tps, "flops": row["step"] * self.tps * self.fpt}

    def finished(self) -> bool:
        return any(r.get("final") for r in self.eval_f.kept)

    def metrics(self, row: dict) -> None:
        self.metrics_f.write(self._counts(row))

    def eval(self, row: dict) -> None:
        self.eval_f.write(self._counts(row))

    def final(self, row: dict, wall_s: float) -> None:
        self.eval_f.write(self._counts({**row, "final": True, "wall_s": wall_s}))

    def diverged(self, step: int, value: float) -> None:
        self.events_f.write({"step": step, "event": "divergence", "metric": "loss", "value": None})

    def close(self) -> None:
        for f in (self.metrics_f, self.eval_f, self.events_f):
            f.close()


class NoRows:
    def finished(self) -> bool:
        return False

    def metrics(self, row):
        pass

    def eval(self, row):
        pass

    def final(self, row, wall_s):
        pass

    def diverged(self, step, value):
        pass

    def close(self):
        pass


def flops_per_token(model: dict, seq_len: int) -> float:
    """The project's convention: 6 x (active non-embedding parameters + the output head) + attention."""
    d, layers, vocab = model["d_model"], model["n_layers"], model["vocab"]
    attn = 4 * d * d
    if model.get("n_experts"):
        mlp = d * model["n_experts"] + model["top_k"] * 3 * d * model["expert_d_ff"]
    else:
        from gpt import dense_d_ff

        mlp = 3 * d * dense_d_ff(model)
    active = layers * (attn + 2 * d + mlp) + d
    return 6.0 * (active + d * vocab) + 12.0 * layers * seq_len * d


def open_rows(cfg, start: int, main: bool):
    if not main:
        return NoRows()
    return Rows(cfg.out, start, cfg.batch_size * cfg.seq_len, flops_per_token(cfg.model, cfg.seq_len))
