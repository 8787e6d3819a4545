"""A rich Live view with one line per running step, fed by the steps' progress.json files."""

from __future__ import annotations

import time
from collections.abc import Mapping

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


class ProgressView:
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
