"""Execute notebooks in place, so their stored outputs are real, without storing widget state.

    .venv/bin/python notebooks/execute.py                       # every notebook in this folder
    .venv/bin/python notebooks/execute.py notebooks/00_quickstart.ipynb

Widget state is left out on purpose: it adds megabytes of JavaScript to a notebook, and every
view here also carries static HTML, which GitHub and nbconvert show instead of the widget.

Cells tagged `gpu` keep the output of the last run on a GPU machine when this machine has no CUDA
device (README.md: GPU cells): they are blanked while the rest runs, then put back as they were.
A GPU cell that has never run on a GPU runs here, and prints why it did nothing.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
import torch
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent


def _kept_gpu_cells(notebook: nbformat.NotebookNode) -> dict[int, nbformat.NotebookNode]:
    """Without CUDA: the GPU cells that hold a GPU run's output, blanked in `notebook` (index -> cell)."""
    if torch.cuda.is_available():
        return {}
    kept = {}
    for index, cell in enumerate(notebook.cells):
        if "gpu" in cell.metadata.get("tags", []) and cell.get("outputs"):
            kept[index] = cell
            notebook.cells[index] = nbformat.v4.new_code_cell("")
    return kept


def execute(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    kept = _kept_gpu_cells(notebook)
    client = NotebookClient(notebook, timeout=600, kernel_name="python3", store_widget_state=False,
                            record_timing=False, resources={"metadata": {"path": str(HERE)}})
    client.execute()
    for index, cell in kept.items():
        notebook.cells[index] = cell
    notebook.metadata.pop("widgets", None)
    nbformat.write(notebook, path)
    print(f"executed {path.name}")


if __name__ == "__main__":
    for name in sys.argv[1:] or sorted(str(p) for p in HERE.glob("[0-9]*.ipynb")):
        execute(Path(name).resolve())
