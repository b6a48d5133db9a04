"""Execute notebooks in place, so their stored outputs are real, without storing widget state.

    .venv/bin/python notebooks/execute.py                       # every notebook in this folder
    .venv/bin/python notebooks/execute.py notebooks/00_quickstart.ipynb

Widget state is left out on purpose: it adds megabytes of JavaScript to a notebook, and every
view here also carries static HTML, which GitHub and nbconvert show instead of the widget.
"""

from __future__ import annotations

import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

HERE = Path(__file__).resolve().parent


def execute(path: Path) -> None:
    notebook = nbformat.read(path, as_version=4)
    client = NotebookClient(notebook, timeout=600, kernel_name="python3", store_widget_state=False,
                            record_timing=False, resources={"metadata": {"path": str(HERE)}})
    client.execute()
    notebook.metadata.pop("widgets", None)
    nbformat.write(notebook, path)
    print(f"executed {path.name}")


if __name__ == "__main__":
    for name in sys.argv[1:] or sorted(str(p) for p in HERE.glob("[0-9]*.ipynb")):
        execute(Path(name).resolve())
