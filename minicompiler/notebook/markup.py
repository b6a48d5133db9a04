"""Small HTML building blocks shared by every view.

Styles are inline (not a <style> block) because GitHub's notebook renderer drops <style>; the
views must read the same on GitHub, in nbconvert HTML and in a live kernel, with no JavaScript.
"""

from __future__ import annotations

import hashlib
import html
import re
from collections.abc import Iterable, Sequence

from minicompiler.report import CompileReport

MONO = "font-family: ui-monospace, SFMono-Regular, Menlo, monospace; font-size: 12px"
PRE = f"{MONO}; background: #f7f7f9; padding: 6px 8px; margin: 4px 0; overflow-x: auto; line-height: 1.35"

# One background per instruction status, used by the bytecode listing and the stepper.
STATUS_COLORS = {"captured": "#d9f2e3", "constant": "#eeeeee", "break": "#ffd6d6", "not reached": "#ffffff"}
BREAK_BACKGROUND = "#fff3cd"
ADDED_BACKGROUND = "#dcfce7"
REMOVED_BACKGROUND = "#fee2e2"
SELECTED_BACKGROUND = "#fde68a"

# Kernel colours: distinct pastel fills, cycled when a graph has more kernels than colours.
KERNEL_COLORS = ["#a5d8ff", "#b2f2bb", "#ffd8a8", "#d0bfff", "#ffc9c9", "#99e9f2", "#ffec99", "#eebefa"]
UNFUSED_COLOR = "#f1f3f5"


def esc(text: object) -> str:
    return html.escape(str(text), quote=True)


# Bytecode (opcode names, offsets, how many instructions a line takes) changes with every CPython
# release. Views wrap what they draw from it in these comments, so the notebooks' output checks can
# leave it out of the comparison (notebooks/sanitize.cfg) while every other part is compared.
PYTHON_VERSION_START, PYTHON_VERSION_END = "<!--python-version-->", "<!--/python-version-->"


def varies_with_python(html_text: str) -> str:
    """Marks HTML that differs between Python versions. Marks inside are dropped (no nesting), so
    one pair of comments always encloses the whole version-dependent part."""
    inner = html_text.replace(PYTHON_VERSION_START, "").replace(PYTHON_VERSION_END, "")
    return f"{PYTHON_VERSION_START}{inner}{PYTHON_VERSION_END}"


def kernel_color(index: int) -> str:
    return KERNEL_COLORS[index % len(KERNEL_COLORS)]


def anchor_prefix(report: CompileReport) -> str:
    """A prefix for element ids, the same on every render of the same report (stable notebook
    outputs) and different between reports shown in one notebook (links stay inside their report)."""
    return "mc" + hashlib.sha1(report.to_json().encode()).hexdigest()[:8]


def section(title: str, body: str, is_open: bool = False) -> str:
    """A collapsible block: <details> needs no JavaScript."""
    return (f"<details{' open' if is_open else ''} style='margin: 4px 0'>"
            f"<summary style='cursor: pointer'><b>{title}</b></summary>{body}</details>")


def table(headers: Sequence[str], rows: Iterable[Sequence[str]],
          row_styles: Iterable[str] | None = None) -> str:
    """An HTML table; cells are HTML already (escape text before passing it). Cell borders come
    from the table's `rules` and `cellpadding`, not a style on every cell, to keep outputs small."""
    head = "".join(f"<th align='left'>{h}</th>" for h in headers)
    styles = iter(row_styles) if row_styles is not None else None
    body = "".join(
        f"<tr valign='top' style='{next(styles) if styles else ''}'>" + "".join(f"<td>{c}</td>" for c in row)
        + "</tr>"
        for row in rows
    )
    return (f"<table rules='all' cellpadding='3' style='border: 1px solid #ddd; border-collapse: collapse; "
            f"margin: 4px 0'><tr style='background: #f1f3f5'>{head}</tr>{body}</table>")


def code_lines(lines: Sequence[str], first_lineno: int = 1, line_styles: dict[int, str] | None = None,
               line_ids: dict[int, str] | None = None, notes: dict[int, str] | None = None) -> str:
    """Plain code with line numbers; `line_styles`/`line_ids`/`notes` are keyed by line number.
    `lines` are HTML already (escaped, maybe highlighted)."""
    line_styles, line_ids, notes = line_styles or {}, line_ids or {}, notes or {}
    rows = []
    for number, text in enumerate(lines, start=first_lineno):
        note = f"  <span style='color: #9a3412'>&larr; {notes[number]}</span>" if number in notes else ""
        row = f"<span style='color: #999'>{number:4d} </span>{text}{note}"
        if number in line_styles or number in line_ids:  # a marked line is a block of its own
            ident = f" id='{line_ids[number]}'" if number in line_ids else ""
            rows.append(f"<span{ident} style='display: block; {line_styles.get(number, '')}'>{row}</span>")
        else:
            rows.append(row + "\n")
    return f"<pre style='{PRE}'>{''.join(rows)}</pre>"


def highlight_lines(code: str, language: str) -> list[str]:
    """Syntax-highlighted HTML for each line of `code` (pygments, inline colours); escaped text
    if pygments is missing. One entry per source line, so views can mark lines."""
    try:
        from pygments import highlight
        from pygments.formatters import HtmlFormatter
        from pygments.lexers import get_lexer_by_name
    except ImportError:
        return [esc(line) for line in code.splitlines()]
    lexer = get_lexer_by_name({"cpp": "cpp", "python": "python", "triton": "python"}.get(language, "text"))
    formatter = HtmlFormatter(noclasses=True, nowrap=True, style="default")
    text = PLAIN_TOKEN.sub(r"\1", highlight(code, lexer, formatter))
    # nowrap output is one span soup; spans never cross a newline with the default lexers' tokens
    # except multi-line strings and comments, which we close and reopen at each line break.
    return _split_spans(text)[: len(code.splitlines())] or [""]


# Operators, whitespace and lexer "errors" stay plain: colouring every `=` and `.` would double
# the size of a saved notebook for little help to the reader.
PLAIN_TOKEN = re.compile(r'<span style="(?:color: #666|color: #BBB|border: 1px solid #F00)">([^<]*)</span>')


def _split_spans(text: str) -> list[str]:
    lines, open_tags = [], []
    for raw in text.split("\n"):
        prefix = "".join(open_tags)
        for tag in re.findall(r"<span[^>]*>|</span>", raw):
            if tag == "</span>":
                if open_tags:
                    open_tags.pop()
            else:
                open_tags.append(tag)
        lines.append(prefix + raw + "</span>" * len(open_tags))
    return lines


def highlight(code: str, language: str, line_styles: dict[int, str] | None = None,
              line_ids: dict[int, str] | None = None) -> str:
    """Highlighted code with line numbers from 1, some lines marked."""
    return code_lines(highlight_lines(code, language), 1, line_styles, line_ids)


def badge(text: str, background: str) -> str:
    return (f"<span style='background: {background}; border-radius: 3px; padding: 0 4px; "
            f"{MONO}'>{esc(text)}</span>")


def milliseconds(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"
