"""Views of what the scheduler and code generator made: the graph coloured by kernel with every
refused fusion and its reason, each kernel's generated code linked to the user's lines, and the
compile time of every stage."""

from __future__ import annotations

from collections.abc import Set

from minicompiler.notebook.dag import dag_svg, parse_graph
from minicompiler.notebook.markup import (
    REMOVED_BACKGROUND,
    badge,
    esc,
    highlight,
    kernel_color,
    milliseconds,
    section,
    table,
)
from minicompiler.notebook.provenance import kernel_lines, node_definition_lines, node_kernels
from minicompiler.report import CompileReport, GraphReport, StageRecord


def scheduled_stage(graph: GraphReport) -> StageRecord | None:
    """The last graph printed as Python before fusion: the one whose nodes the kernels hold."""
    graphs = [s for s in graph.stages if s.language == "python" and s.text.startswith("def ")]
    kernel_nodes = {n for k in graph.kernels for n in k.nodes}
    for stage in reversed(graphs):
        if kernel_nodes <= set(node_definition_lines(stage.text)):
            return stage
    return graphs[-1] if graphs else None


def kernel_legend(graph: GraphReport) -> str:
    return " ".join(badge(k.name, kernel_color(i)) for i, k in enumerate(graph.kernels))


def fusion_dag_html(graph: GraphReport, groups: dict[str, int] | None = None,
                    highlighted: Set[str] = frozenset()) -> str:
    """The scheduled graph with each node filled in its kernel's colour (`groups`: node -> group
    index, by default the final kernels)."""
    stage = scheduled_stage(graph)
    dag = parse_graph(stage.text) if stage else None
    if dag is None:
        return ""
    groups = node_kernels(graph) if groups is None else groups
    colors = {name: kernel_color(index) for name, index in groups.items()}
    owner = {n: k.name for k in graph.kernels for n in k.nodes}
    titles = {name: f"{name}: {owner[name]}" for name in dag.nodes if name in owner}
    return dag_svg(dag, colors, highlighted, titles)


def fusion_table(graph: GraphReport) -> str:
    rows = [[esc(f.producer), esc(f.consumer), "fused" if f.fused else "<b>not fused</b>", esc(f.reason)]
            for f in graph.fusion]
    styles = ["" if f.fused else f"background: {REMOVED_BACKGROUND}" for f in graph.fusion]
    return table(["producer", "consumer", "decision", "reason"], rows, styles)


def fusion_section(report: CompileReport, prefix: str) -> str:
    parts = []
    for graph in report.graphs:
        if not graph.kernels and not graph.fusion:
            continue
        refused = [f for f in graph.fusion if not f.fused]
        why_not = "".join(f"<li><code>{esc(f.producer)}</code> &rarr; <code>{esc(f.consumer)}</code>: "
                          f"{esc(f.reason)}</li>" for f in refused)
        body = (f"<p>{len(graph.kernels)} kernel(s): {kernel_legend(graph)}</p>"
                + (f"<p>refused fusions:</p><ul>{why_not}</ul>" if refused else "")
                + fusion_dag_html(graph) + section("every fusion decision", fusion_table(graph)))
        parts.append(section(f"fusion ({len(graph.kernels)} kernels, {len(refused)} refused)", body))
    return "".join(parts)


def _line_links(graph: GraphReport, prefix: str, name: str, source_lines: list[str]) -> str:
    lines = kernel_lines(graph).get(name, [])
    links = [f"<a href='#{prefix}-L{n}'>line {n}</a>" for n in lines]
    texts = [esc(s) for s in source_lines]
    return "from your code: " + (", ".join(links) or "&mdash;") + (
        "<br><code>" + "<br>".join(texts) + "</code>" if texts else "")


def code_section(report: CompileReport, prefix: str) -> str:
    """Every kernel's code under a header naming its nodes and linking to its source lines."""
    parts = []
    for graph in report.graphs:
        if graph.fallback:
            parts.append(f"<p style='background: #fff3cd'>runs with torch ops: {esc(graph.fallback)}</p>")
        for index, kernel in enumerate(graph.kernels):
            title = (f"{badge(kernel.name, kernel_color(index))} {esc(kernel.kind)}: "
                     f"{esc(', '.join(kernel.nodes))}")
            body = f"<p>{_line_links(graph, prefix, kernel.name, kernel.source_lines)}</p>"
            body += highlight(kernel.code, kernel.language) if kernel.code else ""
            parts.append(section(title, body, is_open=index == 0))
    # The whole generated module (with the wrapper that calls the kernels) is the codegen stage.
    return section("generated code", "".join(parts)) if parts else ""


def stage_bar(stages: list[StageRecord]) -> str:
    """Compile time per stage as one stacked bar of HTML boxes (readable without JavaScript)."""
    total = sum(s.seconds for s in stages) or 1.0
    boxes = "".join(
        f"<div title='{esc(s.name)}: {milliseconds(s.seconds)}' "
        f"style='width: {100 * s.seconds / total:.2f}%; background: {kernel_color(i)}; "
        "overflow: hidden; white-space: nowrap; font-size: 11px; padding: 2px 0'>"
        f"&nbsp;{esc(s.name)}</div>"
        for i, s in enumerate(stages)
    )
    return f"<div style='display: flex; width: 100%; max-width: 700px; border: 1px solid #ccc'>{boxes}</div>"


def timing_section(report: CompileReport, prefix: str) -> str:
    parts = []
    for graph in report.graphs:
        rows = [[esc(s.name), milliseconds(s.seconds)] for s in graph.stages]
        parts.append(stage_bar(graph.stages) + table(["stage", "time"], rows))
    if report.run_times:
        rows = [[esc(name), f"{seconds * 1e6:.1f} µs"] for name, seconds in report.run_times.items()]
        parts.append("<p>time per call (median):</p>" + table(["run", "time"], rows))
    return section(f"compile time ({milliseconds(report.compile_seconds)})", "".join(parts)) if parts else ""
