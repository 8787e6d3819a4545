"""A followed 535B hero in headless chromium: the dashboard's hero page marks the declared mix switch and
the alert (a point outside the band), draws the forecast history, and report.html lists the snapshots,
the alerts and the change, with no page error."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pandas as pd

from ladder.dashboard.server import DashboardServer

REPO = Path(__file__).resolve().parents[2]
LADDER = str(Path(sys.executable).parent / "ladder")
MARIN = str(REPO / "experiments" / "marin_moe_535b.py")
DATA = REPO / "fits" / "reference_data" / "marin_moe_535b"
DROPLESS = "eval_dropless/paloma/macro_loss"


def run_cli(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run([LADDER, *args], capture_output=True, text=True, timeout=600, cwd=REPO,
                          env={**os.environ, "RAY_AUTH_MODE": "disabled"})


def test_followed_hero_in_chromium(tmp_path, browser, screenshot_dir):
    root = tmp_path / "root"
    assert run_cli("import-results", MARIN, str(DATA / "rung_curves.csv"), "--root", str(root)).returncode == 0
    assert run_cli("submit", MARIN, "--root", str(root), "--no-progress", "--wandb", "disabled").returncode in (0, 1)
    rows = pd.read_csv(DATA / "hero_eval.csv")
    rows = rows[rows["metric"] == DROPLESS][["step", "tokens", "metric", "loss"]]
    feed = tmp_path / "hero.csv"
    rows[rows["step"] <= 78_000].to_csv(feed, index=False)
    assert run_cli("follow", MARIN, "--from-csv", str(feed), "--root", str(root), "--max-polls", "1").returncode == 0
    # one point far above the band, then the rest of the recorded points
    later = rows[rows["step"] > 78_000]
    spike = later.iloc[:1].assign(loss=later["loss"].iloc[0] * 1.2)
    spike.to_csv(feed, mode="a", header=False, index=False)
    proc = run_cli("follow", MARIN, "--from-csv", str(feed), "--root", str(root), "--max-polls", "1")
    assert proc.returncode == 0 and "ALERT band_exit" in proc.stdout, proc.stdout + proc.stderr
    later.iloc[1:].to_csv(feed, mode="a", header=False, index=False)
    assert run_cli("follow", MARIN, "--from-csv", str(feed), "--root", str(root), "--max-polls", "1").returncode == 0
    report = run_cli("report", MARIN, "--root", str(root))
    assert report.returncode == 0 and "; centre " in report.stdout, report.stdout  # each snapshot's centre rule

    async def facts(b, sid, events):
        return await b._evaluate(sid, events, """(() => {
            const hero = document.getElementById('c-hero'), fc = document.getElementById('c-forecasts');
            return {names: hero.data.map((t) => t.name), shapes: (hero.layout.shapes || []).length,
                    notes: (hero.layout.annotations || []).map((a) => a.text),
                    history: fc.data.map((t) => t.name), snapshots: document.getElementById('c-snapshots').data.length,
                    centres: (fc.data[0].text || []).filter((t) => t.startsWith('centre: ')).length,
                    text: document.getElementById('main').innerText}; })()""")

    with DashboardServer(root, port=0, cache_s=0.1) as s:
        out = browser.check_page(f"{s.url}#/marin_moe_535b/hero", "hero", screenshot_dir / "12_dashboard_535b_followed.png",
                                 then=facts)
    assert out["errors"] == [], out["errors"]
    extra = out["extra"]
    assert "alert: left the band" in extra["names"] and "change: data mix" in extra["notes"]
    assert extra["shapes"] >= 1 and "forecast of final loss" in extra["history"] and extra["snapshots"] >= 3
    # which centre each snapshot took is on the page (hover of each forecast, the latest in the summary)
    assert extra["centres"] >= 3 and "centre: " in extra["text"]
    html = next((root / "marin_moe_535b").glob("report-*/report.html"))
    page = browser.check_page(html.as_uri(), "report", screenshot_dir / "13_report_535b_followed.png")
    assert page["errors"] == [], page["errors"]
    text = html.read_text()
    assert "Forecast history (3 snapshots)" in text and "Alerts (1)" in text and "Declared changes (1)" in text
    assert "centre (rung backtest error at its horizon)" in text
