"""Fixtures for the dashboard and W&B tests: a realistic sample ladder root, a running dashboard,
a headless chromium (killed at teardown) and the folder the browser tests write screenshots to."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from bench.sample import write_sample_root
from ladder.dashboard.server import DashboardServer

HERE = Path(__file__).parent
FIXTURES = HERE / "data"


@pytest.fixture(scope="session")
def screenshot_dir(isolated_dir) -> Path:
    """Screenshots of the browser tests: $LADDER_SCREENSHOTS, else the run's own temporary folder (one
    per test run and shared by its workers: a fixed folder let one run, or one worker, delete the
    screenshot another had just taken)."""
    path = Path(os.environ.get("LADDER_SCREENSHOTS") or os.path.join(isolated_dir, "screenshots"))
    path.mkdir(parents=True, exist_ok=True)
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
