"""notebooks/router_bias_spike.ipynb runs top to bottom at a small size (its last cell checks its claims)."""

from __future__ import annotations

from pathlib import Path

import nbformat
from nbclient import NotebookClient
from patience import HANG_S

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "router_bias_spike.ipynb"


def test_router_bias_notebook_runs(tmp_path, monkeypatch):
    monkeypatch.setenv("ROUTER_BIAS_STEPS", "160")
    monkeypatch.setenv("ROUTER_BIAS_ROOT", str(tmp_path))
    nb = nbformat.read(NOTEBOOK, as_version=4)
    NotebookClient(nb, timeout=HANG_S, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}).execute()
    images = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])
              if "image/png" in o.get("data", {})]
    assert images, "the notebook draws its figure"
    assert list(tmp_path.glob("router_bias_case/rung_1-notebook/metrics.jsonl"))
