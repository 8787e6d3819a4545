"""Progress away from a terminal: plain lines a log file keeps, not a live view's redraws."""

from __future__ import annotations

import io
import re

from ladder.executor.console import LineView, LiveView, ProgressView
from ladder.executor.context import PROGRESS_FILE
from ladder.executor.store import Store


class _Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


def _lines(buf: io.StringIO) -> list[str]:
    return [re.sub(r"^\[\d\d:\d\d:\d\d\] ", "", line) for line in buf.getvalue().splitlines()]


def test_the_view_is_live_on_a_terminal_and_lines_elsewhere(tmp_path):
    store = Store(str(tmp_path))
    assert isinstance(ProgressView(store, stream=io.StringIO()), LineView)
    live = ProgressView(store, stream=_Tty())
    assert isinstance(live, LiveView)
    live.stop()


def test_lines_give_start_progress_when_it_moves_and_end(tmp_path):
    store = Store(str(tmp_path))
    d = str(tmp_path / "rung_1-abc")
    (tmp_path / "rung_1-abc").mkdir()
    buf = io.StringIO()
    view = LineView(store, "ladder smoke", stream=buf, every_s=0.0)

    def progress(**fields):
        store.write_json(store.join(d, PROGRESS_FILE), {"total_steps": 40, **fields})
        view.update([("rung_1", "running", d, 100.0)])

    progress(step=10, loss=3.25, tokens_per_s=1234.0, eta_s=90.0)  # the start, then its first progress
    progress(step=10, loss=3.25, tokens_per_s=1234.0, eta_s=90.0)
    progress(step=10, loss=3.25, tokens_per_s=1234.0, eta_s=90.0)  # the step has not moved: no line
    progress(step=20, loss=3.125, tokens_per_s=2e3)
    view.every_s = 3600.0
    progress(step=30, loss=3.0)  # moved, but within the interval: no line
    store.write_json(store.join(d, PROGRESS_FILE), {"step": 40, "total_steps": 40, "loss": 3.0, "time": 160.0})
    view.update([("rung_1", "success", d, 100.0)], "1/1 done")
    view.update([("rung_1", "success", d, 100.0)], "1/1 done")  # an end is printed once
    view.stop()
    assert _lines(buf) == [
        "ladder smoke: started",
        "rung_1: started",
        "rung_1: step 10/40 25%, loss 3.2500, 1,234 tokens/s, ETA 1m30s",
        "rung_1: step 20/40 50%, loss 3.1250, 2,000 tokens/s, ETA -",
        "rung_1: SUCCESS after 1m00s, loss 3.0000",
        "1/1 done",
    ]
    assert "\x1b" not in buf.getvalue()


def test_nothing_is_printed_when_no_step_ran(tmp_path):
    """A run refused before any step started (bad input) stays one error line: no title, no summary."""
    buf = io.StringIO()
    view = LineView(Store(str(tmp_path)), "ladder smoke", stream=buf)
    view.update([], "0/8 done")
    view.stop()
    assert buf.getvalue() == ""


def test_a_finished_step_gives_its_mean_rate(tmp_path):
    """The end line carries the run's mean tokens/s (what the trainer's last progress holds), so a user
    sees the step's real rate, not the last interval's."""
    store = Store(str(tmp_path))
    d = str(tmp_path / "rung_1-abc")
    (tmp_path / "rung_1-abc").mkdir()
    buf = io.StringIO()
    view = LineView(store, "ladder smoke", stream=buf, every_s=3600.0)
    view.update([("rung_1", "running", d, 100.0)])
    store.write_json(store.join(d, PROGRESS_FILE), {"step": 40, "total_steps": 40, "loss": 3.0, "time": 160.0,
                                                     "tokens_per_s": 1500.0})
    view.update([("rung_1", "success", d, 100.0)], "1/1 done")
    store.write_json(store.join(d, PROGRESS_FILE), {"step": 7, "total_steps": 40, "loss": 3.5, "time": 130.0,
                                                     "tokens_per_s": 1500.0})
    view.update([("rung_1", "failed", d, 100.0)])
    assert _lines(buf)[-2:] == ["rung_1: SUCCESS after 1m00s, loss 3.0000, 1,500 tokens/s on average",
                                "rung_1: FAILED after 30s, loss 3.5000"]


def test_a_run_outside_a_ladder_prints_its_first_row_then_one_per_interval_and_its_last():
    from ladder.executor.console import progress_printer

    buf = io.StringIO()
    printer = progress_printer("rung_1", every_s=3600.0, stream=buf)
    for step in (10, 20, 30, 40):
        printer({"step": step, "total_steps": 40, "loss": 5.0 - step / 10, "tokens_per_s": 1234.5,
                 "eta_s": (40 - step) * 2.0})
    assert _lines(buf) == ["rung_1: step 10/40 25%, loss 4.0000, 1,234 tokens/s, ETA 1m00s",
                           "rung_1: step 40/40 100%, loss 1.0000, 1,234 tokens/s, ETA 0s"]
    every = io.StringIO()
    printer = progress_printer("rung_1", every_s=0.0, stream=every)
    for step in (10, 20):
        printer({"step": step, "total_steps": 40, "loss": 1.0, "tokens_per_s": None, "eta_s": None})
    assert [line.split(",")[0] for line in _lines(every)] == ["rung_1: step 10/40 25%", "rung_1: step 20/40 50%"]
