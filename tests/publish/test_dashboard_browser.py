"""The dashboard in a real headless chromium: every page loads without console errors, its charts
hold drawn traces, a screenshot is saved; the hero page refreshes live while the hero trains."""

from __future__ import annotations

import json
import struct
import time

import pytest
from patience import HANG_S

from ladder.dashboard.server import DashboardServer
from ladder.outputs import layout

# page -> (minimum charts with traces, minimum traces in all, screenshot name)
PAGES = {
    "overview": (0, 0, "01_overview.png"),
    "rungs": (4, 12, "02_rungs.png"),
    "fit": (2, 6, "03_fit.png"),
    "hero": (3, 8, "04_hero.png"),
    "moe": (6, 10, "05_moe_health.png"),
    "tables": (0, 0, "06_tables.png"),
}


def _png_size(path):
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n", f"{path} is not a PNG"
    return struct.unpack(">II", head[16:24])


@pytest.mark.parametrize("page", list(PAGES))
def test_page_draws_without_errors(browser, server, screenshot_dir, page):
    min_charts, min_traces, shot = PAGES[page]
    out = browser.check_page(f"{server.url}#/demo/{page}", page, screenshot_dir / shot)
    assert out["diag"] and out["diag"]["ready"] == "1", f"{page} never finished drawing: {out}"
    assert out["errors"] == [], f"{page}: console errors {out['errors']}"
    assert out["dom"]["errorsInDom"] == []
    charts = out["dom"]["charts"]
    drawn = [c for c in charts if c["traces"] > 0 and c["drawn"] > 0]
    assert len(drawn) >= min_charts, f"{page}: charts with drawn traces {charts}"
    assert out["dom"]["traces"] >= min_traces, f"{page}: {out['dom']['traces']} traces"
    w, h = _png_size(screenshot_dir / shot)
    assert w >= 1000 and h >= 300
    if page == "overview":
        assert out["dom"]["nodes"] == 9  # 4 rungs, fit, predict, gate, hero, report
        assert "RUNNING" in out["dom"]["text"] and "rung_4" in out["dom"]["text"]
    if page == "tables":
        assert "metrics.hero" in out["dom"]["text"] and "hero_curve" in out["dom"]["text"]
    if page == "hero":
        ids = {c["id"] for c in drawn}
        assert {"c-hero", "c-errors", "c-forecasts", "c-snapshots"} <= ids
    if page == "moe":
        assert "3 spike events" in out["dom"]["text"]


def test_hero_refreshes_live(browser, tmp_path, screenshot_dir):
    """Rows appended to the hero's metrics (one half-written first) appear without a reload."""
    from bench.sample import write_sample_root

    write_sample_root(tmp_path, "live", hero_frac=0.3)
    hero_dir = next(tmp_path.glob("live/hero-*"))
    metrics = hero_dir / layout.METRICS
    rows = [r for r in layout.iter_jsonl(metrics)]
    last = rows[-1]

    async def grow(b, sid, events):
        count = ("(() => { const el = document.getElementById('c-hero');"
                 " const t = el.data.find((t) => t.name === 'actual (train)'); return t.x.length; })()")
        before = await b._evaluate(sid, events, count)
        with metrics.open("a") as fh:  # complete the half-written line's successor rows
            fh.write("\n")
            for i in range(1, 41):
                fh.write(json.dumps({**last, "step": last["step"] + 256 * i, "tokens": last["tokens"] + 256 * i * 524288,
                                     "loss": last["loss"] - 0.001 * i}) + "\n")
        fh = None
        import asyncio

        after = before
        waited = time.monotonic()
        while time.monotonic() - waited < HANG_S:  # the page polls the root: it redraws when it sees the change
            await asyncio.sleep(0.25)
            after = await b._evaluate(sid, events, count)
            if after > before:
                break
        renders = await b._evaluate(sid, events, "document.getElementById('diag').dataset.renders")
        return {"before": before, "after": after, "renders": int(renders)}

    with DashboardServer(tmp_path, port=0, cache_s=0.1) as s:
        out = browser.check_page(f"{s.url}?poll=500#/live/hero", "hero", screenshot_dir / "07_hero_live_update.png",
                                 then=grow)
    assert out["errors"] == [], out["errors"]
    extra = out["extra"]
    assert extra["after"] >= extra["before"] + 40, extra
    assert extra["renders"] >= 2


def test_empty_root_page(browser, tmp_path, screenshot_dir):
    """A root with no ladder yet: the page says so, without errors."""
    with DashboardServer(tmp_path, port=0) as s:
        out = browser.check_page(s.url, "overview", screenshot_dir / "08_empty_root.png")
    assert out["errors"] == []
    assert "No ladder under this root yet" in out["dom"]["text"]


def test_compare_page_draws_a_saved_comparison(browser, tmp_path, screenshot_dir):
    """A comparison `ladder compare` saved under B's folder (here drawn from fits on a synthetic pair with a known
    1.2x effect, written as the command writes it): the Compare page draws its two figures and says its verdict."""
    import math

    import numpy as np
    import pandas as pd

    from bench.sample import write_sample_root
    from fits.effect_trend import analyse

    write_sample_root(tmp_path, "demo")
    rng = np.random.default_rng(0)
    flops = np.geomspace(3e10, 3.5e12, 7)
    luck = rng.normal(0.0, 0.007, 7)
    law = 1.0 + 40.0 * flops ** -0.1
    a = pd.DataFrame({"size": [f"rung_{i}" for i in range(7)], "seed": 0, "flops": flops, "loss": law * np.exp(luck)})
    b = a.assign(loss=(1.0 + 40.0 * (1.2 * flops) ** -0.1) * np.exp(luck + rng.normal(0.0, 0.002, 7)))
    effect = analyse(a, b, hero_flops=(1.7e13, 1.7e13), n_draws=40)
    verdict = effect.pop("verdict")
    (tmp_path / "demo" / layout.COMPARE_DIR).mkdir()
    record = {"a": {"ladder": "base"}, "b": {"ladder": "demo"}, "effect": {**effect, "after_change": None},
              "verdict": verdict, "saved_at": 1.7e9}
    (tmp_path / "demo" / layout.COMPARE_DIR / "base.json").write_text(json.dumps(record, default=str))
    assert math.isfinite(effect["at_hero"]["multiplier"])
    with DashboardServer(tmp_path, port=0) as s:
        out = browser.check_page(f"{s.url}#/demo/compare", "compare", screenshot_dir / "09_compare.png")
    assert out["errors"] == [] and out["dom"]["errorsInDom"] == []
    drawn = {c["id"] for c in out["dom"]["charts"] if c["traces"] > 0 and c["drawn"] > 0}
    assert {"c-cmp-mult", "c-cmp-delta"} <= drawn
    assert verdict in out["dom"]["text"] and "rung_6" in out["dom"]["text"]
