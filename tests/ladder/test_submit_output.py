"""What a user sees of `ladder submit` with its output piped (CI, tee, a log file)."""

from __future__ import annotations

import re
from pathlib import Path


def test_piped_submit_prints_plain_progress_lines(ladder_smoke_root):
    out = (Path(ladder_smoke_root) / "submit.out").read_text()
    assert "\x1b[" not in out  # no terminal control sequences: this is not the live view
    stamped = re.compile(r"^\[\d\d:\d\d:\d\d\] (\S+): (.*)$")
    events: dict[str, list[str]] = {}
    for line in out.splitlines():
        m = stamped.match(line)
        if m:
            events.setdefault(m.group(1), []).append(m.group(2))
    for step in ("rung_1", "fit", "predict", "hero", "report"):
        assert step in events, (step, out[-3000:])
        assert events[step][-1].startswith("SUCCESS after"), events[step]
    # a training step reports its step, loss, throughput and ETA while it runs
    assert any(re.match(r"step \d+/\d+ \d+%, loss \d+\.\d{4}, [\d,]+ tokens/s, ETA ", e) for e in events["hero"]), events["hero"]
    assert events["rung_1"][0] == "started"
