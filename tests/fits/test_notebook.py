"""notebooks/fits_reproduction.ipynb runs top to bottom (a copy, executed in a temporary dir)."""

from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "fits_reproduction.ipynb"


def test_notebook_executes(ref_dir, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 3
    text = "".join(o.get("text", "") for o in outputs)
    assert "objective 1.0182740e-03" in text
    nbformat.write(nb, tmp_path / NOTEBOOK.name)
