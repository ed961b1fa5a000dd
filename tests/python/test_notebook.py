"""docs/notebooks/first-study.ipynb runs from top to bottom, every code cell shows output
(cells tagged `no-output` aside), and no cell errs."""

from __future__ import annotations

from pathlib import Path

import pytest
from conftest import REPO

NOTEBOOK = REPO / "docs" / "notebooks" / "first-study.ipynb"

pytestmark = pytest.mark.needs_events


def test_the_first_study_notebook_runs(tmp_path: Path) -> None:
    nbformat = pytest.importorskip("nbformat")
    nbclient = pytest.importorskip("nbclient")
    pytest.importorskip("ipykernel")
    nb = nbformat.read(NOTEBOOK, as_version=4)
    client = nbclient.NotebookClient(
        nb, timeout=120, kernel_name="python3", resources={"metadata": {"path": str(tmp_path)}}
    )
    client.execute()  # raises CellExecutionError on an error cell
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        outputs = cell.get("outputs", [])
        errors = [o for o in outputs if o.get("output_type") == "error"]
        assert not errors, f"cell {i}: {errors}"
        if "no-output" not in cell.get("metadata", {}).get("tags", []):
            assert outputs, f"cell {i} shows nothing:\n{cell.source}"
