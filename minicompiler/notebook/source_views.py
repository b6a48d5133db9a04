"""Views of what capture saw: the source with graph breaks marked, the bytecode listing with
each instruction's fate, and the guards."""

from __future__ import annotations

from collections.abc import Set

from minicompiler.notebook.markup import (
    BREAK_BACKGROUND,
    SELECTED_BACKGROUND,
    STATUS_COLORS,
    badge,
    code_lines,
    esc,
    highlight_lines,
    section,
    table,
    varies_with_python,
)
from minicompiler.notebook.provenance import kernels_at
from minicompiler.report import CompileReport, InstructionInfo


def _same_file(report: CompileReport, filename: str) -> bool:
    if not filename or not report.filename:
        return True
    return filename.rsplit("/", 1)[-1] == report.filename.rsplit("/", 1)[-1]


def break_lines(report: CompileReport) -> dict[int, str]:
    """User line -> why the graph broke there."""
    return {
        b.lineno: b.reason for b in report.graph_breaks
        if b.lineno is not None and _same_file(report, b.filename)
    }


def source_html(report: CompileReport, prefix: str, selected: Set[int] = frozenset()) -> str:
    """The function's source, graph-break lines highlighted with their reason and every line that
    became a kernel labelled with it; each line has the id `{prefix}-L{lineno}` for links."""
    if not report.source:
        return "<p><i>source not available</i></p>"
    lines = report.source.rstrip("\n").splitlines()
    first = report.firstlineno or 1
    numbers = range(first, first + len(lines))
    breaks = break_lines(report)
    styles = {n: f"background: {BREAK_BACKGROUND}" for n in breaks}
    styles.update(dict.fromkeys(selected, f"background: {SELECTED_BACKGROUND}"))
    notes = {n: f"graph break: {esc(reason)}" for n, reason in breaks.items()}
    for n in numbers:
        kernels = [k for g in report.graphs for k in kernels_at(g, n)]
        if kernels and n not in notes:
            notes[n] = "computed in " + ", ".join(f"<code>{esc(k)}</code>" for k in kernels)
    return code_lines(highlight_lines("\n".join(lines), "python"), first, styles,
                      {n: f"{prefix}-L{n}" for n in numbers}, notes)


def breaks_html(report: CompileReport) -> str:
    """Each graph break (and a whole-call eager fallback) as a highlighted line, not an error."""
    parts = []
    if report.eager_fallback:
        parts.append(f"<p style='background: {BREAK_BACKGROUND}; padding: 4px'>runs eagerly: "
                     f"{esc(report.eager_fallback)}</p>")
    for brk in report.graph_breaks:
        where = f"{esc(brk.filename.rsplit('/', 1)[-1])}:{brk.lineno}"
        hint = f"<br><i>hint: {esc(brk.hint)}</i>" if brk.hint else ""
        instruction = f" ({esc(brk.instruction)})" if brk.instruction else ""
        parts.append(
            f"<div style='background: {BREAK_BACKGROUND}; padding: 4px; margin: 2px 0'>"
            f"graph break at {where} "
            f"<code>{esc(brk.line)}</code>{instruction}: {esc(brk.reason)}{hint}</div>"
        )
    return "".join(parts)


def bytecode_html(report: CompileReport, selected: int | None = None,
                  selected_lines: Set[int] = frozenset()) -> str:
    """The `dis` listing, one row per instruction, coloured by what capture did with it.

    `selected` marks one row (by position in report.bytecode); `selected_lines` marks every
    instruction of those source lines."""
    if not report.bytecode:
        return "<p><i>no bytecode recorded</i></p>"
    legend = " ".join(badge(status, color) for status, color in STATUS_COLORS.items())
    parts = [f"<p>{legend}</p>"]
    for function, rows in _by_function(report.bytecode).items():
        styles = []
        for index, inst in rows:
            color = STATUS_COLORS.get(inst.status, "#fff")
            if index == selected or inst.lineno in selected_lines:
                color = SELECTED_BACKGROUND
            styles.append(f"background: {color}")
        cells = [
            [str(i.lineno or ""), str(i.offset), f"<code>{esc(i.opname)}</code>",
             f"<code>{esc(i.argrepr)}</code>", esc(i.status)]
            for _, i in rows
        ]
        title = f"<p><code>{esc(function)}</code></p>" if function else ""
        parts.append(title + table(["line", "offset", "instruction", "argument", "status"], cells, styles))
    return varies_with_python("".join(parts))


def _by_function(bytecode: list[InstructionInfo]) -> dict[str, list[tuple[int, InstructionInfo]]]:
    """Instructions grouped by function (inlined callees get their own listing), keeping indices."""
    groups: dict[str, list[tuple[int, InstructionInfo]]] = {}
    for index, inst in enumerate(bytecode):
        groups.setdefault(inst.function, []).append((index, inst))
    return groups


def guards_html(report: CompileReport) -> str:
    """The guards of every graph: what must stay true for the compiled code to be reused."""
    parts = []
    for index, graph in enumerate(report.graphs):
        items = "".join(f"<li><code>{esc(g)}</code></li>" for g in graph.guards) or "<li><i>none</i></li>"
        title = f"<p>graph {index}: {len(graph.guards)} guard(s)</p>" if len(report.graphs) > 1 else ""
        parts.append(f"{title}<ul style='margin: 2px 0'>{items}</ul>")
    if report.recompile_reason:
        parts.insert(0, f"<p>recompiled because {esc(report.recompile_reason)}</p>")
    return "".join(parts)


def source_section(report: CompileReport, prefix: str) -> str:
    # The graph breaks themselves are in the report's summary line, above every view.
    return section("source", source_html(report, prefix), is_open=bool(report.graph_breaks))


def bytecode_section(report: CompileReport, prefix: str) -> str:
    counts = {s: sum(i.status == s for i in report.bytecode) for s in STATUS_COLORS}
    summary = ", ".join(f"{n} {s}" for s, n in counts.items() if n)
    return section(f"bytecode ({varies_with_python(summary or 'none')})", bytecode_html(report))


def guards_section(report: CompileReport, prefix: str) -> str:
    total = sum(len(g.guards) for g in report.graphs)
    return section(f"guards ({total})", guards_html(report))
