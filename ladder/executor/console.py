"""Progress of a running ladder, fed by the steps' progress.json files.

On a terminal, a rich Live view redrawn in place, one line per running step. Anywhere else (a pipe,
a log file, CI), plain lines that survive being written to a file: each step's start and end with
its status, and for a training step a line about every minute (step, loss, tokens/s, ETA).
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Callable, Mapping

from .context import PROGRESS_FILE
from .store import Store


def _fmt_eta(seconds) -> str:
    if seconds is None:
        return "-"
    seconds = int(max(0, seconds))
    h, rem = divmod(seconds, 3600)
    m, s = divmod(rem, 60)
    return f"{h}h{m:02d}m" if h else (f"{m}m{s:02d}s" if m else f"{s}s")


def _fmt_num(x, spec: str) -> str:
    try:
        return format(float(x), spec)
    except (TypeError, ValueError):
        return "-"


def read_progress(store: Store, d: str) -> dict:
    data = store.read_json(store.join(d, PROGRESS_FILE))
    return data if isinstance(data, dict) else {}


def progress_row(name: str, state: str, prog: Mapping, started: float | None) -> list[str]:
    step, total = prog.get("step"), prog.get("total_steps")
    done = f"{step}/{total}" if step is not None and total else (str(step) if step is not None else "-")
    pct = f"{100.0 * step / total:.0f}%" if step is not None and total else ""
    end = prog.get("time") if state not in ("running", "other driver") else None
    elapsed = (end or time.time()) - started if started else None
    return [name, state, done, pct, _fmt_num(prog.get("loss"), ".4f"), _fmt_num(prog.get("tokens_per_s"), ",.0f"),
            _fmt_eta(prog.get("eta_s")), _fmt_eta(elapsed)]


def progress_printer(name: str, every_s: float, stream=None) -> Callable[[Mapping], None]:
    """``progress(row)`` for a run outside a ladder (``ladder train``): a line at the first row, then at
    most one every ``every_s`` seconds, and at the run's last step."""
    stream = stream if stream is not None else sys.stderr
    last = [float("-inf")]

    def printer(row: Mapping) -> None:
        now = time.monotonic()
        final = row.get("step") is not None and row.get("step") == row.get("total_steps")
        if now - last[0] < every_s and not final:
            return
        last[0] = now
        _, _, done, pct, loss, tps, eta, _ = progress_row(name, "running", row, None)
        print(f"[{time.strftime('%H:%M:%S')}] {name}: step {done} {pct}, loss {loss}, {tps} tokens/s, ETA {eta}",
              file=stream, flush=True)

    return printer


def ProgressView(store: Store, title: str = "", stream=None):  # noqa: N802 (the view's constructor)
    """The live view when ``stream`` (default stderr) is a terminal, else plain progress lines."""
    stream = stream if stream is not None else sys.stderr
    if stream.isatty():
        return LiveView(store, title)
    every = float(os.environ.get("LADDER_PROGRESS_INTERVAL", "60"))  # the commands check it first (cli.common)
    return LineView(store, title, stream=stream, every_s=every)


class LineView:
    """Plain progress lines: one when a step starts, one when it ends, and one per running step every
    ``every_s`` seconds. Same ``update(rows, summary, force)`` / ``stop()`` as the live view."""

    def __init__(self, store: Store, title: str = "", stream=None, every_s: float = 60.0):
        self.store = store
        self.stream = stream if stream is not None else sys.stderr
        self.every_s = every_s
        self._state: dict[str, str] = {}
        self._last_line: dict[str, float] = {}
        self._last_step: dict[str, object] = {}  # a line only when the step moved since the last one
        self._summary = ""
        self._title = title
        self._printed = False

    def _print(self, text: str) -> None:
        # Nothing at all until a step starts: a run refused before anything ran stays one error line.
        if not self._printed and self._title:
            print(f"[{time.strftime('%H:%M:%S')}] {self._title}: started", file=self.stream, flush=True)
        self._printed = True
        print(f"[{time.strftime('%H:%M:%S')}] {text}", file=self.stream, flush=True)

    def update(self, rows, summary: str = "", force: bool = False) -> None:
        now = time.time()
        for name, state, d, started in rows:
            before = self._state.get(name)
            if state == before and state not in ("running", "other driver"):
                continue
            prog = read_progress(self.store, d)
            _, _, done, pct, loss, tps, eta, elapsed = progress_row(name, state, prog, started)
            if before is None and state in ("running", "other driver"):
                self._print(f"{name}: started" if state == "running" else f"{name}: running under another driver")
                self._last_line[name] = now
            elif state not in ("running", "other driver"):
                loss_part = f", loss {loss}" if loss != "-" else ""
                rate_part = f", {tps} tokens/s on average" if tps != "-" and state == "success" else ""
                self._print(f"{name}: {state.upper()} after {elapsed}{loss_part}{rate_part}")
            elif (prog.get("step") is not None and prog.get("step") != self._last_step.get(name)
                  and now - self._last_line.get(name, 0.0) >= self.every_s):
                self._print(f"{name}: step {done} {pct}, loss {loss}, {tps} tokens/s, ETA {eta}".replace("  ", " "))
                self._last_line[name] = now
                self._last_step[name] = prog.get("step")
            self._state[name] = state
        self._summary = summary or self._summary

    def stop(self) -> None:
        if self._summary and self._printed:
            self._print(self._summary)


class LiveView:
    """``update(rows)`` with rows (name, state, step dir, started); renders at most every 0.25 s."""

    def __init__(self, store: Store, title: str = ""):
        from rich.console import Console
        from rich.live import Live

        self.store = store
        self.title = title
        self.console = Console(stderr=True)
        self.live = Live(console=self.console, refresh_per_second=4, transient=False)
        self._last = 0.0
        self.live.start()

    def render(self, rows):
        from rich.table import Table

        table = Table(title=self.title or None, expand=False, box=None, pad_edge=False)
        for col, just in (("step", "left"), ("state", "left"), ("done/total", "right"), ("", "right"),
                          ("loss", "right"), ("tokens/s", "right"), ("ETA", "right"), ("elapsed", "right")):
            table.add_column(col, justify=just)
        for name, state, d, started in rows:
            table.add_row(*progress_row(name, state, read_progress(self.store, d), started))
        return table

    def update(self, rows, summary: str = "", force: bool = False) -> None:
        now = time.time()
        if not force and now - self._last < 0.25:
            return
        self._last = now
        if summary:
            from rich.console import Group
            from rich.text import Text

            self.live.update(Group(self.render(rows), Text(summary, style="dim")), refresh=True)
        else:
            self.live.update(self.render(rows), refresh=True)

    def stop(self) -> None:
        self.live.stop()
