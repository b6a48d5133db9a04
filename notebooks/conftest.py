"""nbval settings for the notebooks.

A report's output carries its JSON (application/vnd.minicompiler.report+json) next to an HTML
rendering of the same data, and a chart carries plotly's JSON next to an HTML table. nbval can
sanitize text only (sanitize.cfg: timings, addresses, paths), not JSON, which holds the raw
timings; so it compares the HTML twins and skips the JSON forms.

A cell tagged `gpu` (and `nbval-ignore-output`: its timings differ on every run) holds the output
of a run on a GPU machine (README.md: GPU cells). Where there is no CUDA device nbval skips it,
saying why; on a GPU it runs, and its own asserts check its facts.
"""

from __future__ import annotations

import pytest
import torch

JSON_FORMS_WITH_HTML_TWINS = ("application/vnd.minicompiler.report+json", "application/vnd.plotly.v1+json")


NO_GPU = "GPU cell: no CUDA device here; its stored output comes from a GPU run"


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for notebook in {item.parent for item in items if hasattr(item.parent, "skip_compare")}:
        notebook.skip_compare = (*notebook.skip_compare, *JSON_FORMS_WITH_HTML_TWINS)
    if not torch.cuda.is_available():
        for item in items:
            if "gpu" in getattr(item, "cell", {}).get("metadata", {}).get("tags", []):
                item.add_marker(pytest.mark.skip(reason=NO_GPU))
