"""nbval settings for the notebooks.

A report's output carries its JSON (application/vnd.minicompiler.report+json) next to an HTML
rendering of the same data, and a chart carries plotly's JSON next to an HTML table. nbval can
sanitize text only (sanitize.cfg: timings, addresses, paths), not JSON, which holds the raw
timings; so it compares the HTML twins and skips the JSON forms.
"""

from __future__ import annotations

import pytest

JSON_FORMS_WITH_HTML_TWINS = ("application/vnd.minicompiler.report+json", "application/vnd.plotly.v1+json")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for notebook in {item.parent for item in items if hasattr(item.parent, "skip_compare")}:
        notebook.skip_compare = (*notebook.skip_compare, *JSON_FORMS_WITH_HTML_TWINS)
