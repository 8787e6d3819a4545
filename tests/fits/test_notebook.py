"""notebooks/fits_reproduction.ipynb runs top to bottom (a copy, executed in a temporary dir)."""

from pathlib import Path

from notebook_run import execute

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "fits_reproduction.ipynb"


def test_notebook_executes(ref_dir, tmp_path):
    outputs, text = execute(NOTEBOOK, tmp_path)
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 3
    assert "objective 1.0182740e-03" in text
