"""The benchmark's HTML page: speedups over eager per model (plotly), and the profiles.

One bar per compiler and model, height = eager time / its time (above 1: faster than eager),
for inference and for the training step; with --profile, one stacked bar per model and
compiler: milliseconds in generated kernels, in torch (extern) ops, and overhead.
"""

from __future__ import annotations

import html
import importlib.util
from typing import Any


def speedup_figure(rows: list[dict[str, Any]], task: str) -> Any:
    import plotly.graph_objects as go

    rows = [r for r in rows if r.get("task") == task and "s" in r.get("results", {}).get("eager", {})]
    names = sorted({c for r in rows for c in r["results"]} - {"eager"})
    figure = go.Figure()
    for compiler in names:
        x, y, text = [], [], []
        for row in rows:
            result = row["results"].get(compiler, {})
            if "s" in result:
                x.append(row["model"])
                y.append(row["results"]["eager"]["s"] / result["s"])
                text.append(f"{result['s'] * 1e3:.3f} ms" + ("" if result.get("correct", True) else " WRONG"))
        figure.add_bar(name=compiler, x=x, y=y, hovertext=text)
    figure.add_hline(y=1.0, line_dash="dot", annotation_text="eager")
    figure.update_layout(title=f"{task}: speedup over eager (higher is faster)", barmode="group",
                         yaxis_title="eager time / time", height=460)
    return figure


def profile_figure(rows: list[dict[str, Any]]) -> Any:
    import plotly.graph_objects as go

    labels, groups = [], {"generated": [], "torch": [], "overhead": []}
    for row in rows:
        for compiler, profile in row.get("profile", {}).items():
            labels.append(f"{row['model']} ({row['task']}) | {compiler}")
            for group in groups:
                groups[group].append(profile["groups_ms"][group])
    figure = go.Figure()
    for group, values in groups.items():
        figure.add_bar(name=group, y=labels, x=values, orientation="h")
    figure.update_layout(title="where one call's time goes (ms)", barmode="stack",
                         height=max(300, 28 * len(labels) + 120), xaxis_title="ms per call")
    return figure


def write_html(path: Any, environment: dict[str, Any], rows: list[dict[str, Any]], table: str,
               profiles: str) -> None:
    parts = [f"<h1>minicompiler benchmark</h1><p>{html.escape(' '.join(f'{k}={v}' for k, v in environment.items()))}"
             "</p>"]
    if importlib.util.find_spec("plotly") is None:  # a machine without the notebook extras: tables only
        parts.append("<p>(no charts: plotly is not installed; python -m minicompiler.bench.chart X.json "
                     "draws them from the JSON where it is)</p>")
    else:
        figures = [speedup_figure(rows, task) for task in ("inference", "training")]
        if any(row.get("profile") for row in rows):
            figures.append(profile_figure(rows))
        for number, figure in enumerate(figures):
            parts.append(figure.to_html(full_html=False, include_plotlyjs="cdn" if number == 0 else False))
    parts.append(f"<h2>table</h2><pre>{html.escape(table)}</pre>")
    if profiles:
        parts.append(f"<h2>profiles</h2><pre>{html.escape(profiles)}</pre>")
    path.write_text("<!doctype html><html><head><meta charset='utf-8'><title>minicompiler benchmark</title>"
                    "</head><body>" + "\n".join(parts) + "</body></html>\n")


def main() -> None:
    """python -m minicompiler.bench.chart RESULTS.json: (re)draw RESULTS.html from a benchmark's JSON."""
    import json
    import sys
    from pathlib import Path

    from minicompiler.bench.suite import format_profiles, format_rows

    path = Path(sys.argv[1])
    data = json.loads(path.read_text())
    models = data.get("models", [])
    write_html(path.with_suffix(".html"), data["environment"], models, format_rows(models), format_profiles(models))
    print(f"wrote {path.with_suffix('.html')}")


if __name__ == "__main__":
    main()
