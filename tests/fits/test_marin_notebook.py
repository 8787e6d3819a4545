"""notebooks/marin_535b.ipynb runs top to bottom (a copy, executed in a temporary dir)."""

import re
from pathlib import Path

import pytest

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "marin_535b.ipynb"


def test_marin_notebook_executes(ref_dir, tmp_path):
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=300, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 2
    text = "".join(o.get("text", "") for o in outputs)
    gap = float(re.search(r"max \|ours - marin_prediction.csv\| over 20 rows: (\S+)", text).group(1))
    assert gap < 1e-4
    ours, theirs = (float(x) / 100 for x in re.search(r"mean \|error\| ours (\S+)%, Marin's (\S+)%", text).groups())
    assert ours < theirs
    assert "100% inside our 90% band" in text
    nbformat.write(nb, tmp_path / NOTEBOOK.name)
