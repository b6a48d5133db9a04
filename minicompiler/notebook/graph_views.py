"""Views of the graphs: the captured graph (as Python and as a DAG), each pass's result with what
it changed, and the joint / forward / backward graphs of training."""

from __future__ import annotations

from minicompiler.notebook.dag import dag_svg, parse_graph
from minicompiler.notebook.diff import diff_html, diff_lines, diff_summary
from minicompiler.notebook.markup import (
    ADDED_BACKGROUND,
    code_lines,
    esc,
    highlight,
    highlight_lines,
    milliseconds,
    section,
)
from minicompiler.notebook.provenance import node_definition_lines
from minicompiler.report import CompileReport, GraphReport, StageRecord


def _graph_title(report: CompileReport, index: int) -> str:
    return f" (graph {index})" if len(report.graphs) > 1 else ""


def _notes(stage: StageRecord) -> str:
    items = "".join(f"<li><code>{esc(n)}</code></li>" for n in stage.notes)
    return f"<ul style='margin: 2px 0; color: #555'>{items}</ul>" if items else ""


def captured_section(report: CompileReport, prefix: str) -> str:
    """The captured graph printed as Python, and drawn."""
    parts = []
    for index, graph in enumerate(report.graphs):
        if not graph.stages:
            continue
        stage = graph.stages[0]
        dag = parse_graph(stage.text)
        drawing = section("drawn as a DAG", dag_svg(dag)) if dag else ""
        parts.append(section(f"captured graph{_graph_title(report, index)}",
                             highlight(stage.text, stage.language) + drawing, is_open=True))
    return "".join(parts)


def stage_html(previous: StageRecord | None, stage: StageRecord) -> str:
    """One stage's result; a graph stage following another graph stage shows the diff."""
    if previous is not None and previous.language == stage.language == "python" and stage.text:
        return diff_html(previous.text, stage.text) + _notes(stage)
    return (highlight(stage.text, stage.language) if stage.text else "") + _notes(stage)


def _stage_title(previous: StageRecord | None, stage: StageRecord) -> str:
    title = f"{esc(stage.name)} ({milliseconds(stage.seconds)})"
    if previous is not None and previous.language == stage.language == "python":
        title += f" &mdash; {diff_summary(diff_lines(previous.text, stage.text))} vs {esc(previous.name)}"
    return title


def passes_section(report: CompileReport, prefix: str, names: set[str] | None = None) -> str:
    """Every stage after capture (or only those in `names`), each against the one before it."""
    parts = []
    for index, graph in enumerate(report.graphs):
        for previous, stage in zip([None, *graph.stages], graph.stages, strict=False):
            if previous is None or (names is not None and stage.name not in names):
                continue
            parts.append(section(_stage_title(previous, stage) + _graph_title(report, index),
                                 stage_html(previous, stage), is_open=names is not None))
    return "".join(parts)


def saved_names(graph: GraphReport) -> set[str]:
    """Names of the tensors the forward saves for the backward ("x: float32[8]" -> "x")."""
    return {s.split(":", 1)[0].strip() for s in graph.saved_tensors}


def autograd_stage_html(stage: StageRecord, saved: set[str]) -> str:
    """A joint/forward/backward graph with the lines that define a saved tensor marked."""
    defined = node_definition_lines(stage.text)
    marked = {defined[name] for name in saved if name in defined}
    if stage.text.startswith("def "):  # saved inputs are parameters, on the `def` line
        header = stage.text.split("\n", 1)[0]
        if any(f"{name}:" in header for name in saved):
            marked.add(1)
    notes = dict.fromkeys(marked, "saved for backward")
    return code_lines(highlight_lines(stage.text, stage.language), 1,
                      {n: f"background: {ADDED_BACKGROUND}" for n in marked}, None, notes) + _notes(stage)


def training_section(report: CompileReport, prefix: str) -> str:
    """Joint, forward and backward graphs and the saved tensors; nothing when no graph trains."""
    parts = []
    for index, graph in enumerate(report.graphs):
        if not graph.autograd:
            continue
        saved = saved_names(graph)
        listing = ", ".join(f"<code>{esc(s)}</code>" for s in graph.saved_tensors) or "none"
        body = f"<p>saved for backward: {listing}</p>" + "".join(
            section(f"{esc(stage.name)} ({milliseconds(stage.seconds)})", autograd_stage_html(stage, saved),
                    is_open=stage.name != "joint")
            for stage in graph.autograd
        )
        parts.append(section(f"training: joint / forward / backward{_graph_title(report, index)}", body))
    return "".join(parts)
