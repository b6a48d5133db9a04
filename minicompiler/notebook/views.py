"""Static HTML views of a CompileReport: readable without a kernel or JavaScript.

Every view here renders the same CompileReport; the `%%compile` magic, `_repr_html_` and
executed notebooks on GitHub all show this HTML.
"""

from __future__ import annotations

import html

from minicompiler.report import CompileReport, GraphReport, StageRecord

STYLE = """<style>
.mc-report { font-family: system-ui, sans-serif; font-size: 13px; }
.mc-report pre { background: #f7f7f9; padding: 6px 8px; overflow-x: auto; font-size: 12px; }
.mc-report table { border-collapse: collapse; margin: 4px 0; }
.mc-report td, .mc-report th { border: 1px solid #ddd; padding: 2px 6px; text-align: left; vertical-align: top; }
.mc-break { background: #fff3cd; }
.mc-refused { color: #a33; }
.mc-fused { color: #2a7; }
.mc-note { color: #555; }
</style>"""


def highlight(code: str, language: str) -> str:
    """Syntax-highlighted HTML for code, if pygments is installed; plain <pre> otherwise."""
    try:
        from pygments import highlight as pyg_highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import get_lexer_by_name
    except ImportError:
        return f"<pre>{html.escape(code)}</pre>"
    lexer = get_lexer_by_name({"cpp": "cpp", "python": "python"}.get(language, "text"))
    return pyg_highlight(code, lexer, HtmlFormatter(noclasses=True, nowrap=False))


def stage_html(stage: StageRecord) -> str:
    notes = "".join(f"<li class='mc-note'>{html.escape(n)}</li>" for n in stage.notes)
    return (
        f"<details><summary><b>{html.escape(stage.name)}</b> "
        f"({stage.seconds * 1000:.1f} ms)</summary>"
        f"{highlight(stage.text, stage.language) if stage.text else ''}"
        f"{f'<ul>{notes}</ul>' if notes else ''}</details>"
    )


def fusion_html(graph: GraphReport) -> str:
    if not graph.fusion:
        return ""
    rows = "".join(
        f"<tr class='{'mc-fused' if f.fused else 'mc-refused'}'><td>{html.escape(f.producer)}</td>"
        f"<td>{html.escape(f.consumer)}</td><td>{'fused' if f.fused else 'not fused'}</td>"
        f"<td>{html.escape(f.reason)}</td></tr>"
        for f in graph.fusion
    )
    return (
        "<details><summary><b>fusion decisions</b></summary><table>"
        f"<tr><th>producer</th><th>consumer</th><th>decision</th><th>reason</th></tr>{rows}</table></details>"
    )


def kernels_html(graph: GraphReport) -> str:
    if not graph.kernels:
        return ""
    rows = "".join(
        f"<tr><td><code>{html.escape(k.name)}</code></td><td>{k.kind}</td>"
        f"<td>{html.escape(', '.join(k.nodes))}</td>"
        f"<td>{'<br>'.join(html.escape(s) for s in k.source_lines)}</td></tr>"
        for k in graph.kernels
    )
    return (
        "<table><tr><th>kernel</th><th>kind</th><th>graph nodes</th><th>from your code</th></tr>"
        f"{rows}</table>"
    )


def timing_html(graph: GraphReport) -> str:
    cells = "".join(f"<td>{s.name}<br>{s.seconds * 1000:.1f} ms</td>" for s in graph.stages)
    return f"<table><tr>{cells}</tr></table>"


def graph_html(index: int, graph: GraphReport) -> str:
    guards = "".join(f"<li><code>{html.escape(g)}</code></li>" for g in graph.guards)
    fallback = (
        f"<p class='mc-break'>runs with torch ops: {html.escape(graph.fallback)}</p>" if graph.fallback else ""
    )
    return (
        f"<h4>graph {index} &mdash; backend <code>{graph.backend}</code></h4>{fallback}"
        f"{timing_html(graph)}{kernels_html(graph)}"
        f"<details><summary><b>guards</b> ({len(graph.guards)})</summary><ul>{guards}</ul></details>"
        + "".join(stage_html(s) for s in graph.stages)
        + fusion_html(graph)
    )


def report_to_html(report: CompileReport) -> str:
    parts = [STYLE, "<div class='mc-report'>"]
    parts.append(
        f"<b>minicompiler</b>: <code>{html.escape(report.function)}</code> "
        f"({html.escape(report.filename)}:{report.firstlineno}), "
        f"compiled in {report.compile_seconds * 1000:.0f} ms"
    )
    if report.recompile_reason:
        parts.append(f"<p>recompiled because {html.escape(report.recompile_reason)}</p>")
    if report.eager_fallback:
        parts.append(f"<p class='mc-break'>runs eagerly: {html.escape(report.eager_fallback)}</p>")
    for brk in report.graph_breaks:
        parts.append(
            f"<p class='mc-break'>graph break at {html.escape(brk.filename)}:{brk.lineno} "
            f"<code>{html.escape(brk.line)}</code>: {html.escape(brk.reason)}</p>"
        )
    parts.extend(graph_html(i, g) for i, g in enumerate(report.graphs))
    parts.append("</div>")
    return "".join(parts)
