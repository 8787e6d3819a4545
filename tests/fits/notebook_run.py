"""Run a notebook top to bottom as the suite does: a copy, executed in a temporary dir, errors and
outputs collected (shared by the notebook tests)."""

from __future__ import annotations

from pathlib import Path

import pytest


def execute(notebook: Path, tmp_path: Path, timeout: int = 300) -> tuple[list[dict], str]:
    """(outputs, their text) of every code cell; fails the test on an error output. Writes the executed copy."""
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    nb = nbformat.read(notebook, as_version=4)
    client = nbclient.NotebookClient(nb, timeout=timeout, kernel_name="python3",
                                     resources={"metadata": {"path": str(tmp_path)}})
    client.execute()
    outputs = [o for c in nb.cells if c.cell_type == "code" for o in c.get("outputs", [])]
    assert not [o for o in outputs if o.get("output_type") == "error"]
    nbformat.write(nb, tmp_path / notebook.name)
    return outputs, "".join(o.get("text", "") for o in outputs)
