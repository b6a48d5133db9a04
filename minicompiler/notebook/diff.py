"""What changed between two printed graphs: a line diff that ignores column alignment.

The printer pads every line to one comment column, so one longer line re-pads them all; lines
are compared with runs of spaces collapsed, and shown as the new text with removed lines in
between (red) and added lines marked (green).
"""

from __future__ import annotations

import difflib
from dataclasses import dataclass

from minicompiler.notebook.markup import ADDED_BACKGROUND, PRE, REMOVED_BACKGROUND, esc, highlight_lines


@dataclass(frozen=True)
class DiffLine:
    kind: str  # "same" | "added" | "removed"
    text: str


def _normalized(line: str) -> str:
    return " ".join(line.split())


def diff_lines(old: str, new: str) -> list[DiffLine]:
    """The new text line by line, with the old text's removed lines placed where they were."""
    old_lines, new_lines = old.splitlines(), new.splitlines()
    matcher = difflib.SequenceMatcher(
        None, [_normalized(s) for s in old_lines], [_normalized(s) for s in new_lines], autojunk=False
    )
    out: list[DiffLine] = []
    for tag, i1, i2, j1, j2 in matcher.get_opcodes():
        if tag == "equal":
            out += [DiffLine("same", s) for s in new_lines[j1:j2]]
            continue
        out += [DiffLine("removed", s) for s in old_lines[i1:i2]]
        out += [DiffLine("added", s) for s in new_lines[j1:j2]]
    return out


def diff_summary(lines: list[DiffLine]) -> str:
    added = sum(d.kind == "added" for d in lines)
    removed = sum(d.kind == "removed" for d in lines)
    return "no change" if not added and not removed else f"+{added} -{removed} lines"


def diff_html(old: str, new: str, language: str = "python") -> str:
    """The diff as highlighted code: added lines green with '+', removed lines red with '-'."""
    lines = diff_lines(old, new)
    highlighted = highlight_lines("\n".join(d.text for d in lines), language) if lines else []
    styles = {"added": f"background: {ADDED_BACKGROUND}",
              "removed": f"background: {REMOVED_BACKGROUND}; text-decoration: line-through; opacity: 0.7"}
    marks = {"same": "  ", "added": "+ ", "removed": "- "}
    rows = []
    for d, text in zip(lines, highlighted, strict=False):
        row = f"<span style='color: #999'>{marks[d.kind]}</span>{text}"
        rows.append(f"<span style='display: block; {styles[d.kind]}'>{row}</span>" if d.kind in styles
                    else row + "\n")
    return f"<pre style='{PRE}'>{''.join(rows)}</pre>" if rows else f"<p>{esc('(empty)')}</p>"
