"""The committed notebooks: executed (their outputs are real), without errors, and without
widget state (megabytes of JavaScript; every widget here also carries static HTML). nbval checks
that re-running them gives the same outputs (`make notebooks`)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

NOTEBOOKS = sorted((Path(__file__).resolve().parents[2] / "notebooks").glob("*.ipynb"))


@pytest.mark.parametrize("path", NOTEBOOKS, ids=[p.name for p in NOTEBOOKS])
def test_the_notebook_is_executed_without_errors_or_widget_state(path: Path) -> None:
    notebook = json.loads(path.read_text())
    assert "widgets" not in notebook["metadata"], "re-execute with notebooks/execute.py"
    code = [cell for cell in notebook["cells"] if cell["cell_type"] == "code"]
    assert code and all(cell["execution_count"] is not None for cell in code), "a cell was not executed"
    errors = [o for cell in code for o in cell["outputs"] if o["output_type"] == "error"]
    assert not errors, errors


def test_there_are_notebooks() -> None:
    assert [p.name for p in NOTEBOOKS][:3] == ["00_quickstart.ipynb", "01_watch_the_compiler.ipynb",
                                               "02_eager_vs_compiled_timing.ipynb"]
