"""Provenance lookups: which source line made which graph node, kernel and generated line.

Every node carries the user line it came from (StageRecord.node_lines), every kernel lists its
nodes (KernelInfo.nodes), and generated code comments each line with `<- file:line`. These
functions follow those links in both directions, for the static views and the cross-stage widget.
"""

from __future__ import annotations

import re

from minicompiler.report import GraphReport, StageRecord

# `    cos_1 = ops.cos(cos)   # float32[8]  cell.py:3  ...`: a node definition in a printed graph
NODE_DEFINITION = re.compile(r"^\s+(\w+) = ops\.(\w+)\(")
PRINTED_SOURCE = re.compile(r"#\s*\S+\[[^\]]*\]\s+(\S+):(\d+)")  # the `cell.py:3` after the type
# `// cos = cos(x)  <- cell.py:11` (C++) or `# ... <- cell.py:11` (Triton): a generated line's origin
ORIGIN_COMMENT = re.compile(r"<-\s*(\S+?):(\d+)")
FILE_LINE = re.compile(r":(\d+)\b")


def node_definition_lines(text: str) -> dict[str, int]:
    """Node name -> line number (from 1) of its definition in a printed graph."""
    found = {}
    for number, line in enumerate(text.splitlines(), start=1):
        match = NODE_DEFINITION.match(line)
        if match:
            found[match.group(1)] = number
    return found


def stage_node_lines(stage: StageRecord) -> dict[str, int]:
    """Node name -> user line for one stage: its recorded provenance, or else the `file:line`
    the printer wrote after each node's type."""
    if stage.node_lines:
        return stage.node_lines
    found = {}
    for line in stage.text.splitlines():
        definition, source = NODE_DEFINITION.match(line), PRINTED_SOURCE.search(line)
        if definition and source:
            found[definition.group(1)] = int(source.group(2))
    return found


def node_lines(graph: GraphReport) -> dict[str, int]:
    """Node name -> user line, over all stages (later stages' names win)."""
    lines: dict[str, int] = {}
    for stage in graph.stages:
        lines.update(stage_node_lines(stage))
    return lines


def kernel_lines(graph: GraphReport) -> dict[str, list[int]]:
    """Kernel name -> the user lines it computes, from its nodes' provenance, else its source_lines."""
    by_node = node_lines(graph)
    result = {}
    for kernel in graph.kernels:
        lines = {by_node[n] for n in kernel.nodes if n in by_node}
        if not lines:
            lines = {int(m.group(1)) for s in kernel.source_lines if (m := FILE_LINE.search(s))}
        result[kernel.name] = sorted(lines)
    return result


def kernels_at(graph: GraphReport, lineno: int) -> list[str]:
    return [name for name, lines in kernel_lines(graph).items() if lineno in lines]


def nodes_at(stage: StageRecord, lineno: int) -> list[str]:
    return [name for name, line in stage_node_lines(stage).items() if line == lineno]


def stage_lines_at(stage: StageRecord, lineno: int) -> set[int]:
    """Lines of a stage's printed text that come from user line `lineno`: node definitions with
    that provenance, or generated lines whose `<- file:line` comment names it."""
    defined = node_definition_lines(stage.text)
    lines = {defined[n] for n in nodes_at(stage, lineno) if n in defined}
    return lines | generated_lines_at(stage.text, lineno)


def generated_lines_at(code: str, lineno: int) -> set[int]:
    """Lines of generated code whose origin comment names user line `lineno`."""
    return {
        number for number, line in enumerate(code.splitlines(), start=1)
        if any(int(m.group(2)) == lineno for m in ORIGIN_COMMENT.finditer(line))
    }


def node_kernels(graph: GraphReport) -> dict[str, int]:
    """Node name -> index of the kernel that computes it."""
    return {node: index for index, kernel in enumerate(graph.kernels) for node in kernel.nodes}
