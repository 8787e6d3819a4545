"""The dashboard and W&B on a real smoke ladder: `ladder submit experiments/smoke.py` trains real JAX
MoE rungs and a hero through Ray; every page renders its files in chromium without console errors.

Set LADDER_SMOKE_ROOT to an existing smoke root to reuse one (the run takes a few minutes on 2 cores).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from patience import HANG_S

from ladder.dashboard.server import DashboardServer

REPO = Path(__file__).resolve().parents[2]
PAGES = ("overview", "rungs", "fit", "hero", "moe", "tables")


@pytest.fixture(scope="module")
def smoke_root(request, tmp_path_factory) -> Path:
    """A finished smoke ladder: the suite's shared one (a session fixture `ladder_smoke_root` in
    tests/conftest.py), else LADDER_SMOKE_ROOT, else one submitted here."""
    try:
        return Path(request.getfixturevalue("ladder_smoke_root"))
    except pytest.FixtureLookupError:
        pass
    given = os.environ.get("LADDER_SMOKE_ROOT")
    if given and (Path(given) / "smoke").is_dir():
        return Path(given)
    root = tmp_path_factory.mktemp("smoke-root")
    ladder = Path(sys.executable).with_name("ladder")
    proc = subprocess.run([str(ladder), "submit", str(REPO / "experiments" / "smoke.py"), "--root", str(root),
                           "--wandb", "offline", "--no-progress"], cwd=REPO, capture_output=True, text=True, timeout=HANG_S)
    assert proc.returncode == 0, proc.stdout[-2000:] + proc.stderr[-3000:]
    return root


@pytest.mark.slow
@pytest.mark.parametrize("page", PAGES)
def test_smoke_ladder_pages(smoke_root, browser, screenshot_dir, page):
    with DashboardServer(smoke_root, port=0) as s:
        out = browser.check_page(f"{s.url}#/smoke/{page}", page, screenshot_dir / f"smoke_{PAGES.index(page) + 1:02d}_{page}.png")
    assert out["errors"] == [], out["errors"]
    assert out["diag"]["ready"] == "1"
    charts = out["dom"]["charts"]
    if page in ("rungs", "fit", "hero", "moe"):
        assert charts and all(c["traces"] > 0 for c in charts), charts
    if page == "overview":
        assert out["dom"]["nodes"] == 9 and out["dom"]["text"].count("SUCCESS") >= 9


@pytest.mark.slow
def test_smoke_ladder_wandb_offline_runs(smoke_root):
    """Each training step of the real pipeline mirrored to an offline W&B run under the ladder root."""
    runs = list((smoke_root / "smoke" / "wandb" / "wandb").glob("offline-run-*/run-*.wandb"))
    assert len(runs) >= 5, runs  # 4 rungs and the hero


async def _moe_traces(b, sid, events):
    return await b._evaluate(sid, events, """(() => Object.fromEntries([...document.querySelectorAll('.js-plotly-plot')]
        .map((el) => [el.id, el.data.map((t) => t.name)])))()""")


@pytest.mark.slow
def test_smoke_moe_page_draws_the_hero_envelopes(smoke_root, browser, screenshot_dir):
    """The hero selected (the page's default): each chart with an envelope draws its band and centre under
    the hero's series; the drop rate's and the load's say upper bound; the router-bias chart adds the RMS
    over layers the envelope is of."""
    with DashboardServer(smoke_root, port=0) as s:
        out = browser.check_page(f"{s.url}#/smoke/moe", "moe", screenshot_dir / "smoke_moe_envelopes.png", then=_moe_traces)
    assert out["errors"] == [], out["errors"]
    figs = out["extra"]
    for chart, upper_only in (("c-drop_rate", True), ("c-expert_load_max_over_mean", True), ("c-grad_norm", False),
                              ("c-bias", False)):
        names = figs[chart]
        band = [n for n in names if n.startswith("envelope (")]
        assert band and all(("upper bound" in n) == upper_only for n in band), (chart, names)
        assert "envelope centre" in names, (chart, names)
    assert "RMS over layers" in figs["c-bias"]
    assert not any(n.startswith("envelope") for n in figs["c-routing_entropy"] + figs["c-loss"])
    assert "steps inside the rungs' 90% envelopes" in out["dom"]["text"]
