"""How capture is written into the CompileReport: graph breaks, the bytecode listing, the trace,
and the words for why a segment after a break was captured (again)."""

from __future__ import annotations

from minicompiler.capture import (
    CaptureResult,
    Guard,
    RealFrame,
    ResumePoint,
    Unsupported,
    break_kind,
)
from minicompiler.capture.records import MAX_TRACE_STEPS, STATUS_RANK, TraceLog
from minicompiler.report import CompileReport, GraphBreakInfo, InstructionInfo


def break_line(point: ResumePoint) -> int | None:
    return point.error.loc.lineno if point.error.loc else None


def slot_name(point: ResumePoint, frame: RealFrame, path: str) -> str:
    """A rebuilt frame's slot ("args[0]") as a reader knows it: a local's name, or for a value on
    the stack, the line that left it there."""
    label = frame.labels()[int(path.removeprefix("args[").removesuffix("]"))]
    if label.startswith("stack") and point.error.loc is not None:
        return f"{label} (from `{point.error.loc.line}`)"
    return label


def segment_reason(point: ResumePoint, failed: Guard | str | None) -> str:
    """Why the segment after `point` is captured: the first time, which guard failed, or (text)
    which size guard failed."""
    where = f"the segment after the graph break at line {break_line(point)}"
    if failed is None:
        return f"{where}: first time this path is taken"
    if isinstance(failed, str):
        return f"{where}: {failed}"
    return f"{where}: guard failed: {failed.description} ({failed.source})"


def merge_bytecode(report: CompileReport, captured: CaptureResult) -> None:
    """One listing for all segments: each instruction shows its most telling status."""
    known = {(i.function, i.offset): i for i in report.bytecode}
    for record in captured.bytecode:
        info = known.get((record.function, record.offset))
        if info is None:
            report.bytecode.append(InstructionInfo(**vars(record)))
        elif STATUS_RANK[record.status] > STATUS_RANK[info.status]:
            info.status = record.status


def add_trace(report: CompileReport, trace: TraceLog) -> None:
    """Append a segment's trace (segments after graph breaks follow the first), within the cap."""
    room = MAX_TRACE_STEPS - len(report.trace)
    report.trace += trace.steps[:room]
    report.trace_truncated = report.trace_truncated or trace.truncated or len(trace.steps) > room


def break_info(error: Unsupported) -> GraphBreakInfo:
    loc = error.loc
    kind, hint = break_kind(error.reason)
    return GraphBreakInfo(
        reason=error.reason,
        filename=loc.filename if loc else "",
        lineno=loc.lineno if loc else None,
        line=loc.line if loc else "",
        instruction=error.instruction or "",
        hint=hint,
        kind=kind,
    )
