"""Following a foreign trainer's rows as it writes them: the step's progress line and ETA from
``metrics.jsonl``, the trainer callbacks (the hero's live forecast at each eval, W&B) from both files, and
the spike events the built-in trainer records (a loss or gradient norm far above its recent history,
ladder.trainers.builtin.metrics.SpikeDetector), appended to ``events.jsonl`` beside the trainer's own.

A row is delivered once it is a whole line. A whole line that is not a JSON object fails the run
(:class:`RowError`, naming the file and line); the last line of a file still being written is not
whole yet and waits. A resumed trainer rewrites its files without the rows past its checkpoint
(ladder.trainers.writer): a file replaced or shrunk is read again from its start, and the lines that
were there when this start of the run began (delivered by an earlier start) are not delivered again.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Sequence
from pathlib import Path

from ladder.outputs import layout
from ladder.trainers.builtin.hooks import call_hooks
from ladder.trainers.builtin.metrics import SpikeDetector


class RowError(RuntimeError):
    """A row of the trainer's output that is not a JSON object: the run fails with this one line."""


def parse_row(path: Path, lineno: int, line: str) -> dict:
    try:
        row = json.loads(line)
    except json.JSONDecodeError:
        row = None
    if not isinstance(row, dict) or not isinstance(row.get("step"), int):
        raise RowError(f"{path}:{lineno}: a row that is not a JSON object with an integer 'step' ({line[:80]!r}); "
                       "write rows with ladder/trainers/writer.py")
    return row


class _Tail:
    """New whole lines of one growing file."""

    def __init__(self, path: Path):
        self.path = path
        self.initial = self._lines()  # there before this start: delivered by an earlier one
        self.seen = set(self.initial)
        self.inode, self.offset, self.lineno = self._stat()[0], self._size(), len(self._lines())

    def _stat(self) -> tuple[int | None, int]:
        try:
            st = os.stat(self.path)
        except FileNotFoundError:
            return None, 0
        return st.st_ino, st.st_size

    def _size(self) -> int:
        return self._stat()[1]

    def _lines(self) -> list[str]:
        try:
            return self.path.read_text().splitlines()
        except FileNotFoundError:
            return []

    def read(self, final: bool = False) -> list[tuple[int, str]]:
        """(line number, line) of each new whole line; ``final``: the writer has exited, so a last line
        without its newline is whole too."""
        inode, size = self._stat()
        if inode is None:
            return []
        if inode != self.inode or size < self.offset:  # rewritten on a resume: read again, skip what was seen
            self.inode, self.offset, self.lineno = inode, 0, 0
        else:
            self.inode = inode
        with self.path.open("rb") as fh:
            fh.seek(self.offset)
            chunk = fh.read()
        end = len(chunk) if final else chunk.rfind(b"\n") + 1
        out = []
        for raw in chunk[:end].splitlines():
            self.lineno += 1
            line = raw.decode("utf-8", errors="replace").strip()
            if line and line not in self.seen:
                out.append((self.lineno, line))
        self.offset += end
        return out


class Follower:
    """Delivers a run's new metrics and eval rows: ``on_step`` / ``on_eval`` to ``callbacks``, a progress row
    to ``progress`` for each metrics row. ``inp``: the run's contract input (steps, tokens a step)."""

    def __init__(self, out: Path, inp: dict, callbacks: Sequence = (), progress: Callable[[dict], None] | None = None):
        self.inp, self.callbacks, self.progress = inp, list(callbacks), progress
        self.metrics, self.evals = _Tail(out / layout.METRICS), _Tail(out / layout.EVAL)
        self.t0, self.first_tokens = time.monotonic(), None
        self.events = out / layout.EVENTS
        self.detectors = [SpikeDetector("loss"), SpikeDetector("grad_norm")]
        for line in self.metrics.initial:  # warmed with the history an earlier start left, as the builtin's are
            try:
                row = json.loads(line)
            except json.JSONDecodeError:
                continue
            if isinstance(row, dict):
                self._spikes(row)

    def _spikes(self, row: dict) -> list[dict]:
        events = []
        for d in self.detectors:
            value = row.get(d.metric)
            ev = d.update(row.get("step", 0), float(value)) if isinstance(value, int | float) else None
            if ev:
                events.append(ev)
        return events

    def poll(self, final: bool = False) -> None:
        for lineno, line in self.metrics.read(final):
            row = parse_row(self.metrics.path, lineno, line)
            events = self._spikes(row)
            if events:
                with self.events.open("a") as fh:
                    fh.write("".join(json.dumps(e) + "\n" for e in events))
            call_hooks(self.callbacks, "on_step", row["step"], row)
            self._progress(row)
        for lineno, line in self.evals.read(final):
            row = parse_row(self.evals.path, lineno, line)
            call_hooks(self.callbacks, "on_eval", row["step"], row)

    def _progress(self, row: dict) -> None:
        if self.progress is None:
            return
        total, per_step = int(self.inp["steps"]), int(self.inp["tokens_per_step"])
        tokens = row.get("tokens", row["step"] * per_step)
        rate = row.get("tokens_per_s")
        if not isinstance(rate, int | float):  # no rate of its own: this start's mean since its first row
            if self.first_tokens is None:
                self.first_tokens, self.t0 = tokens, time.monotonic()
            dt = time.monotonic() - self.t0
            rate = (tokens - self.first_tokens) / dt if dt > 0 and tokens > self.first_tokens else None
        eta = (total - row["step"]) * per_step / rate if rate else None
        loss = row.get("loss")
        self.progress({"step": row["step"], "total_steps": total, "tokens": tokens,
                       "loss": loss if isinstance(loss, int | float) else None, "tokens_per_s": rate, "eta_s": eta})
