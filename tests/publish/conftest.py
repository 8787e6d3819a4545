"""Fixtures for the dashboard and W&B tests: a realistic sample ladder root, a running dashboard,
a headless chromium (killed at teardown) and the folder the browser tests write screenshots to."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from bench.sample import write_sample_root
from ladder.dashboard.server import DashboardServer

HERE = Path(__file__).parent
FIXTURES = HERE / "data"


@pytest.fixture(scope="session")
def screenshot_dir() -> Path:
    """Screenshots of the browser tests: $LADDER_SCREENSHOTS, else <tmp>/scaling-ladder-tests/publish/screenshots."""
    base = os.environ.get("LADDER_SCREENSHOTS") or os.path.join(tempfile.gettempdir(), "scaling-ladder-tests",
                                                               "publish", "screenshots")
    path = Path(base)
    path.mkdir(parents=True, exist_ok=True)
    for old in path.glob("*.png"):
        old.unlink()
    return path


@pytest.fixture(scope="session")
def sample_root(tmp_path_factory) -> Path:
    """A ladder root with ladder 'demo': 4 finished rungs (real published loss curves), fit,
    predict, gate, a hero 60% trained (with a spike and a half-written last metrics line)."""
    root = tmp_path_factory.mktemp("ladder-root")
    write_sample_root(root, "demo")
    return root


@pytest.fixture(scope="session")
def server(sample_root):
    with DashboardServer(sample_root, port=0, cache_s=0.2) as s:
        yield s


@pytest.fixture(scope="session")
def browser(tmp_path_factory):
    from publish_browser import Browser, find_chromium

    if find_chromium() is None:
        pytest.fail("chromium is not installed: apt-get install -y chromium (make test installs it)")
    b = Browser(tmp_path_factory.mktemp("chromium-profile"))
    try:
        yield b
    finally:
        b.close()
