"""Static HTML views of a CompileReport: readable without a kernel or JavaScript.

Every view renders the same CompileReport; the `%%compile` magic, `_repr_html_` and executed
notebooks on GitHub all show this HTML. A view is a function `(report, prefix) -> html` (empty
when the report has nothing for it); `prefix` keeps element ids of one report apart from another's.

    report_to_html(report)                          # every view
    report_to_html(report, ["source", "fusion"])    # some views
    report_to_html(report, ["decompose"])           # a stage name: that stage, diffed
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from minicompiler.notebook.charts import break_even_table, memory_table, timing_table
from minicompiler.notebook.graph_views import captured_section, passes_section, training_section
from minicompiler.notebook.kernel_views import code_section, fusion_section, timing_section
from minicompiler.notebook.markup import BREAK_BACKGROUND, anchor_prefix, esc, section
from minicompiler.notebook.source_views import breaks_html, bytecode_section, guards_section, source_section
from minicompiler.report import MIME_TYPE, CompileReport

View = Callable[[CompileReport, str], str]


def _measured_section(report: CompileReport, prefix: str) -> str:
    parts = []
    if report.run_times:
        parts.append(timing_table(report) + break_even_table(report))
    if memory := memory_table(report):
        parts.append("<p>memory traffic</p>" + memory)
    return section("measured", "".join(parts)) if parts else ""


# In display order. A name that is not here but names a stage ("decompose") shows that stage.
VIEWS: dict[str, View] = {
    "source": source_section,
    "bytecode": bytecode_section,
    "guards": guards_section,
    "graph": captured_section,
    "passes": passes_section,
    "training": training_section,
    "fusion": fusion_section,
    "code": code_section,
    "timing": timing_section,
    "measured": _measured_section,
}


class UnknownViewError(ValueError):
    """A view name that is neither a view nor a stage of the report."""


def stage_names(report: CompileReport) -> list[str]:
    return list(dict.fromkeys(s.name for g in report.graphs for s in g.stages))


def check_views(report: CompileReport, views: Sequence[str]) -> None:
    known = [*VIEWS, *stage_names(report)]
    unknown = [v for v in views if v not in known]
    if unknown:
        raise UnknownViewError(f"unknown view(s) {', '.join(unknown)}; choose from {', '.join(known)}")


def summary_html(report: CompileReport) -> str:
    kernels = sum(len(g.kernels) for g in report.graphs)
    line = (f"<b>minicompiler</b>: <code>{esc(report.function)}</code>"
            + (f" ({esc(report.filename.rsplit('/', 1)[-1])}:{report.firstlineno})"
               if report.filename else "")
            + f" &mdash; {len(report.graphs)} graph(s), {kernels} kernel(s), "
            f"compiled in {report.compile_seconds * 1000:.0f} ms")
    recompiled = (f"<p style='background: {BREAK_BACKGROUND}'>recompiled because "
                  f"{esc(report.recompile_reason)}</p>" if report.recompile_reason else "")
    variants = "".join(f"<div>graph {i} also compiled for {esc(v.variant)}, "
                       f"{len(v.kernels)} kernel(s)</div>"
                       for i, g in enumerate(report.graphs) for v in g.variants)
    return f"<div>{line}</div>{variants}{recompiled}{breaks_html(report)}"


def report_to_html(report: CompileReport, views: Sequence[str] | None = None) -> str:
    """The report as static HTML: a one-line summary (with graph breaks), then each view."""
    prefix = anchor_prefix(report)
    views = list(VIEWS) if views is None else list(views)
    check_views(report, views)
    stages = {v for v in views if v not in VIEWS}
    parts = [VIEWS[v](report, prefix) for v in views if v in VIEWS]
    if "capture" in stages and "graph" not in views:
        parts.append(captured_section(report, prefix))
    if stages - {"capture"}:
        parts.append(passes_section(report, prefix, stages))
    return (f"<div class='minicompiler-report' style='font-family: system-ui, sans-serif; font-size: 13px'>"
            f"{summary_html(report)}{''.join(parts)}</div>")


class ReportView:
    """Displays some views of a report; the output also carries the report as JSON for the
    JupyterLab extension (MIME type application/vnd.minicompiler.report+json)."""

    def __init__(self, report: CompileReport, views: Sequence[str] | None = None):
        if views is not None:
            check_views(report, views)
        self.report = report
        self.views = None if views is None else list(views)

    @property
    def html(self) -> str:
        return report_to_html(self.report, self.views)

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {MIME_TYPE: self.report.to_dict(), "text/html": self.html, "text/plain": repr(self.report)}
