"""notebooks/marin_535b.ipynb runs top to bottom (a copy, executed in a temporary dir)."""

import re
from pathlib import Path

from notebook_run import execute

NOTEBOOK = Path(__file__).resolve().parents[2] / "notebooks" / "marin_535b.ipynb"


def test_marin_notebook_executes(ref_dir, tmp_path):
    outputs, text = execute(NOTEBOOK, tmp_path)
    assert sum("image/png" in o.get("data", {}) for o in outputs) >= 2
    gap = float(re.search(r"max \|ours - marin_prediction.csv\| over 20 rows: (\S+)", text).group(1))
    assert gap < 1e-4
    ours, theirs = (float(x) / 100 for x in re.search(r"mean \|error\| ours (\S+)%, Marin's (\S+)%", text).groups())
    assert ours < theirs
    assert "100% inside our 90% band" in text
