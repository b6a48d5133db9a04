"""Plotly charts of a CompileReport's numbers, each with a plain HTML table of the same numbers.

A kernel's notebook output keeps only plotly's JSON MIME type, which GitHub and nbconvert cannot
draw; so every chart is shown through `Chart`, whose output also carries the table as text/html
(JupyterLab draws the figure, static renderers show the table).

    Chart(timing_figure(reports), timing_table(reports))
"""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from minicompiler.notebook.markup import esc, table
from minicompiler.report import CompileReport

PLOTLY_MIME = "application/vnd.plotly.v1+json"
Reports = CompileReport | Sequence[CompileReport]


def _as_list(reports: Reports) -> list[CompileReport]:
    return [reports] if isinstance(reports, CompileReport) else list(reports)


def _figure() -> Any:
    import plotly.graph_objects as go  # imported on use: the static views must not need plotly

    return go.Figure()


@dataclass
class Chart:
    """A plotly figure and its HTML-table twin, displayed together."""

    figure: Any
    table_html: str

    def _repr_mimebundle_(self, include: Any = None, exclude: Any = None) -> dict[str, Any]:
        return {PLOTLY_MIME: json.loads(self.figure.to_json()), "text/html": self.table_html,
                "text/plain": f"<Chart: {self.figure.layout.title.text}>"}


# -- run time: eager vs compiled (vs torch.compile) --------------------------------------------
def run_kinds(reports: Reports) -> list[str]:
    """The measured kinds of run ("eager", "compiled", "torch.compile"), in first-seen order."""
    kinds = [k for r in _as_list(reports) for k in (*r.run_samples, *r.run_times)]
    return list(dict.fromkeys(kinds))


def _samples(report: CompileReport, kind: str) -> list[float]:
    if kind in report.run_samples:
        return report.run_samples[kind]
    return [report.run_times[kind]] if kind in report.run_times else []


def timing_figure(reports: Reports) -> Any:
    """Grouped bars: median µs per call per function, one colour per kind of run; whiskers span
    the fastest to the slowest sample."""
    reports, fig = _as_list(reports), _figure()
    for kind in run_kinds(reports):
        names, medians, above, below = [], [], [], []
        for report in reports:
            samples = [s * 1e6 for s in _samples(report, kind)]
            if samples:
                median = statistics.median(samples)
                names.append(report.function)
                medians.append(median)
                above.append(max(samples) - median)
                below.append(median - min(samples))
        fig.add_bar(name=kind, x=names, y=medians,
                    error_y={"type": "data", "array": above, "arrayminus": below, "visible": True})
    fig.update_layout(title="time per call", yaxis_title="µs per call (median; whiskers: min..max)",
                      barmode="group")
    return fig


def timing_table(reports: Reports) -> str:
    reports, kinds = _as_list(reports), run_kinds(reports)
    rows = []
    for report in reports:
        row = [f"<code>{esc(report.function)}</code>"]
        for kind in kinds:
            samples = _samples(report, kind)
            row.append(f"{statistics.median(samples) * 1e6:.1f} ({min(samples) * 1e6:.1f}&ndash;"
                       f"{max(samples) * 1e6:.1f})" if samples else "&mdash;")
        rows.append(row)
    return "<p>µs per call: median (min&ndash;max)</p>" + table(["function", *map(esc, kinds)], rows)


# -- compile time per stage ------------------------------------------------------------------------
def _stage_seconds(report: CompileReport) -> dict[str, float]:
    seconds: dict[str, float] = {}
    for graph in report.graphs:
        for stage in graph.stages:
            seconds[stage.name] = seconds.get(stage.name, 0.0) + stage.seconds
    return seconds


def compile_time_figure(reports: Reports) -> Any:
    """A stacked bar per function: milliseconds spent in each stage."""
    reports, fig = _as_list(reports), _figure()
    per_report = [_stage_seconds(r) for r in reports]
    for stage in dict.fromkeys(name for seconds in per_report for name in seconds):
        milliseconds = [seconds.get(stage, 0.0) * 1e3 for seconds in per_report]
        fig.add_bar(name=stage, x=[r.function for r in reports], y=milliseconds)
    fig.update_layout(title="compile time per stage", yaxis_title="ms", barmode="stack")
    return fig


def compile_time_table(reports: Reports) -> str:
    reports = _as_list(reports)
    per_report = [_stage_seconds(r) for r in reports]
    stages = list(dict.fromkeys(name for seconds in per_report for name in seconds))
    rows = [[f"<code>{esc(r.function)}</code>", *(f"{s.get(n, 0.0) * 1e3:.1f}" for n in stages),
             f"{sum(s.values()) * 1e3:.1f}"] for r, s in zip(reports, per_report, strict=True)]
    return "<p>compile time, ms</p>" + table(["function", *map(esc, stages), "total"], rows)


# -- break-even ------------------------------------------------------------------------------------
def break_even_calls(report: CompileReport, eager: str = "eager", compiled: str = "compiled") -> float:
    """After how many calls compiling has paid for itself: compile_seconds / (time saved per call).
    Infinite when the compiled code is not faster."""
    saved = report.run_times.get(eager, 0.0) - report.run_times.get(compiled, 0.0)
    return report.compile_seconds / saved if saved > 0 else math.inf


def break_even_figure(report: CompileReport, calls: int | None = None) -> Any:
    """Total seconds after n calls: eager (n * t_eager) against compiled (compile + n * t_compiled)."""
    fig = _figure()
    even = break_even_calls(report)
    horizon = calls or (int(even * 2) + 10 if math.isfinite(even) else 1000)
    n = list(range(0, horizon + 1, max(1, horizon // 200)))
    eager, compiled = report.run_times.get("eager", 0.0), report.run_times.get("compiled", 0.0)
    fig.add_scatter(name="eager", x=n, y=[k * eager for k in n], mode="lines")
    fig.add_scatter(name="compiled (incl. compile time)", x=n,
                    y=[report.compile_seconds + k * compiled for k in n], mode="lines")
    if math.isfinite(even):
        fig.add_vline(x=even, line_dash="dot", annotation_text=f"break-even: {math.ceil(even)} calls")
    fig.update_layout(title=f"break-even: {report.function}", xaxis_title="calls",
                      yaxis_title="total seconds")
    return fig


def break_even_table(report: CompileReport) -> str:
    even = break_even_calls(report)
    verdict = f"{math.ceil(even):,} calls" if math.isfinite(even) else "never (compiled is not faster)"
    rows = [["compile time", f"{report.compile_seconds * 1e3:.1f} ms"]]
    rows += [[esc(k), f"{v * 1e6:.1f} µs per call"] for k, v in report.run_times.items()]
    rows.append(["<b>break-even after</b>", f"<b>{verdict}</b>"])
    return table(["", ""], rows)


# -- memory traffic --------------------------------------------------------------------------------
def memory_figure(report: CompileReport) -> Any:
    """Bytes each kernel moves against the minimum it must move; bytes saved for backward."""
    fig = _figure()
    kernels = [k for g in report.graphs for k in g.kernels if k.bytes_moved is not None]
    fig.add_bar(name="bytes moved", x=[k.name for k in kernels], y=[k.bytes_moved for k in kernels])
    fig.add_bar(name="minimum", x=[k.name for k in kernels], y=[k.bytes_minimum or 0 for k in kernels])
    for kind in ("eager", "compiled"):
        saved = sum(g.saved_bytes.get(kind, 0) for g in report.graphs)
        if saved:
            fig.add_bar(name=f"saved for backward ({kind})", x=["saved for backward"], y=[saved])
    fig.update_layout(title="memory traffic", yaxis_title="bytes", barmode="group")
    return fig


def memory_table(report: CompileReport) -> str:
    kernels = [k for g in report.graphs for k in g.kernels if k.bytes_moved is not None]
    rows = [[f"<code>{esc(k.name)}</code>", f"{k.bytes_moved:,}",
             f"{k.bytes_minimum:,}" if k.bytes_minimum is not None else "&mdash;",
             f"{k.bytes_moved / k.bytes_minimum:.2f}x" if k.bytes_minimum else "&mdash;"] for k in kernels]
    parts = [table(["kernel", "bytes moved", "minimum", "ratio"], rows)] if rows else []
    saved = {kind: sum(g.saved_bytes.get(kind, 0) for g in report.graphs) for kind in ("eager", "compiled")}
    if any(saved.values()):
        parts.append(table(["saved for backward", "bytes"], [[k, f"{v:,}"] for k, v in saved.items() if v]))
    return "".join(parts)


# -- everything measured about one report -----------------------------------------------------------
def report_charts(report: CompileReport) -> list[Chart]:
    """The charts that have data in this report, for display one after another."""
    charts = [Chart(compile_time_figure(report), compile_time_table(report))]
    if run_kinds(report):
        charts.append(Chart(timing_figure(report), timing_table(report)))
    if "eager" in report.run_times and "compiled" in report.run_times:
        charts.append(Chart(break_even_figure(report), break_even_table(report)))
    if memory_table(report):
        charts.append(Chart(memory_figure(report), memory_table(report)))
    return charts
