"""`minicompiler.compile`: the user-facing entry point and the per-call runtime path.

A CompiledFunction keeps a small cache of compiled entries, each guarded by the assumptions its
capture made. A call checks the guards of each entry; the first entry whose guards all hold runs.
If none holds, the function is captured and compiled again, and the report says which guard failed.

A function with graph breaks runs as a chain of segments: a compiled graph, the breaking
instruction run for real on the rebuilt frame, then the next segment, captured from that frame.
Each resume point has its own guarded cache of segments, keyed by where the frame stopped.
"""

from __future__ import annotations

import functools
import inspect
import time
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, overload

import torch

from minicompiler.capture import (
    CaptureResult,
    Guard,
    RealFrame,
    ResumePoint,
    Unsupported,
    break_kind,
    capture,
    capture_resume,
    first_failing_guard,
    run_instruction,
)
from minicompiler.capture.records import STATUS_RANK
from minicompiler.pipeline import BACKENDS, CompiledGraph, compile_graph
from minicompiler.report import CompileReport, GraphBreakInfo, InstructionInfo

MODES = ("default", "reduce-overhead", "max-autotune")
CACHE_SIZE_LIMIT = 8


class GraphBreakError(RuntimeError):
    """Raised with fullgraph=True when the function cannot be captured as one graph, and when a
    later segment of a function with graph breaks cannot resume (earlier segments' side effects
    have already happened, so running the whole call eagerly again would repeat them)."""


@dataclass
class CacheEntry:
    guards: list[Guard]
    captured: CaptureResult
    compiled: CompiledGraph
    report: CompileReport
    needs_autograd: bool


def _choose_backend(backend: str, args: tuple, kwargs: dict) -> str:
    if backend != "auto":
        return backend
    tensors = [a for a in (*args, *kwargs.values()) if isinstance(a, torch.Tensor)]
    return "triton" if any(t.is_cuda for t in tensors) else "cpp"


def _function_info(fn: Callable) -> tuple[str, str, int, str]:
    target = type(fn).forward if isinstance(fn, torch.nn.Module) else fn
    target = inspect.unwrap(getattr(target, "__func__", target))
    name = getattr(target, "__qualname__", type(fn).__name__)
    try:
        lines, first = inspect.getsourcelines(target)
        return name, inspect.getsourcefile(target) or "", first, "".join(lines)
    except (OSError, TypeError):
        return name, "", 0, ""


class CompiledFunction:
    """What `minicompiler.compile(fn)` returns: call it like `fn`; read `.report`."""

    def __init__(self, fn: Callable, backend: str, mode: str, dynamic: bool | None, fullgraph: bool):
        self.fn = fn
        self.backend = backend
        self.mode = mode
        self.dynamic = dynamic
        self.fullgraph = fullgraph
        self.cache: list[CacheEntry] = []
        # segments after a graph break: (code, instruction, stack depth, local names) -> entries
        self.resume_cache: dict[tuple, list[CacheEntry]] = {}
        self.reports: list[CompileReport] = []  # one per compilation, oldest first
        self._warned_cache_limit = False
        functools.update_wrapper(self, fn, updated=())

    @property
    def report(self) -> CompileReport | None:
        """The report of the most recent compilation (None before the first call)."""
        return self.reports[-1] if self.reports else None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        entry = _first_passing(self.cache, args, kwargs)
        if entry is not None:
            return self._run_segments(entry, args, kwargs, None)
        if len(self.cache) >= CACHE_SIZE_LIMIT:
            self._warn_cache_limit()
            return self.fn(*args, **kwargs)
        entry = self._compile(args, kwargs)
        if entry is None:
            return self.fn(*args, **kwargs)
        return self._run_segments(entry, args, kwargs, entry.report)

    def _warn_cache_limit(self) -> None:
        if not self._warned_cache_limit:
            warnings.warn(
                f"minicompiler: {self.__name__} recompiled {CACHE_SIZE_LIMIT} times "
                "(cache size limit); running it eagerly from now on",
                stacklevel=3,
            )
            self._warned_cache_limit = True

    def _run_segments(self, entry: CacheEntry, args: tuple, kwargs: dict, report: CompileReport | None) -> Any:
        """Run `entry`'s graph; at each graph break, run the breaking instruction for real on the
        rebuilt frame and go on with the next segment. `report` is this call's new report, if any."""
        while True:
            outputs = self._run(entry, args, kwargs)
            point = entry.captured.resume
            if point is None:
                return entry.captured.returned_value(outputs, args, kwargs)
            stack, local = point.frame.rebuild(outputs, args, kwargs)
            frame = RealFrame(stack, local, point.index)
            run_instruction(point, frame)
            args, kwargs = frame.arguments(), {}
            key = (point.function.__code__, frame.shape_key())
            entries = self.resume_cache.setdefault(key, [])
            entry = _first_passing(entries, args, kwargs)
            if entry is None:
                report = report or self._new_report(_segment_reason(point, entries, args))
                entry = self._compile_segment(point, frame, report)
                if len(entries) >= CACHE_SIZE_LIMIT:
                    entries.pop(0)  # the oldest goes: segments are cheap to capture again
                entries.append(entry)

    def _run(self, entry: CacheEntry, args: tuple, kwargs: dict) -> Any:
        inputs = entry.captured.fetch_inputs(args, kwargs)
        return entry.compiled.run(inputs)  # the training program when an input needs a gradient

    def _recompile_reason(self, args: tuple, kwargs: dict) -> str | None:
        if not self.cache:
            return None
        failed = first_failing_guard(self.cache[-1].guards, args, kwargs)
        return f"guard failed: {failed.description} ({failed.source})" if failed else None

    def _new_report(self, recompile_reason: str | None) -> CompileReport:
        name, filename, firstlineno, source = _function_info(self.fn)
        report = CompileReport(name, filename, firstlineno, source)
        report.recompile_reason = recompile_reason
        self.reports.append(report)
        return report

    def _compile(self, args: tuple, kwargs: dict) -> CacheEntry | None:
        """Capture and compile the first segment for these arguments; None means: run this call eagerly."""
        report = self._new_report(self._recompile_reason(args, kwargs))
        start = time.perf_counter()
        try:
            captured = capture(self.fn, args, kwargs, allow_breaks=not self.fullgraph)
        except Unsupported as error:
            report.graph_breaks.append(_break_info(error))
            report.compile_seconds = time.perf_counter() - start
            if self.fullgraph:
                raise GraphBreakError(f"fullgraph=True but the graph breaks at {error}") from error
            report.eager_fallback = str(error)
            return None
        entry = self._compile_captured(captured, report, args, kwargs, start)
        self.cache.append(entry)
        return entry

    def _compile_segment(self, point: ResumePoint, frame: RealFrame, report: CompileReport) -> CacheEntry:
        """Capture and compile the segment after a graph break, from the real frame there."""
        start = time.perf_counter()
        try:
            captured = capture_resume(point, frame)
        except Unsupported as error:
            report.graph_breaks.append(_break_info(error))
            raise GraphBreakError(
                f"cannot resume after the graph break at line {_break_line(point)}: {error}. The code before "
                "it already ran, so the call cannot start again eagerly; move the construct out of the "
                "compiled function") from error
        return self._compile_captured(captured, report, frame.arguments(), {}, start)

    def _compile_captured(self, captured: CaptureResult, report: CompileReport, args: tuple, kwargs: dict,
                          start: float) -> CacheEntry:
        """Compile one captured segment and record it (and the break it ends at) in `report`."""
        _merge_bytecode(report, captured)
        if captured.resume is not None:
            report.graph_breaks.append(_break_info(captured.resume.error))
        backend = _choose_backend(self.backend, args, kwargs)
        compiled = compile_graph(
            captured.graph, backend, time.perf_counter() - start, strict=self.backend != "auto"
        )
        compiled.report.guards = [g.description for g in captured.guards]
        report.graphs.append(compiled.report)
        report.compile_seconds += time.perf_counter() - start
        needs_autograd = any(
            p.meta is not None and p.meta.requires_grad for p in captured.graph.inputs
        )
        return CacheEntry(captured.guards, captured, compiled, report, needs_autograd)


def _first_passing(entries: list[CacheEntry], args: tuple, kwargs: dict) -> CacheEntry | None:
    for entry in entries:
        if first_failing_guard(entry.guards, args, kwargs) is None:
            return entry
    return None


def _break_line(point: ResumePoint) -> int | None:
    return point.error.loc.lineno if point.error.loc else None


def _segment_reason(point: ResumePoint, entries: list[CacheEntry], args: tuple) -> str:
    where = f"the segment after the graph break at line {_break_line(point)}"
    failed = first_failing_guard(entries[-1].guards, args, {}) if entries else None
    if failed is None:
        return f"{where}: first time this path is taken"
    return f"{where}: guard failed: {failed.description} ({failed.source})"


def _merge_bytecode(report: CompileReport, captured: CaptureResult) -> None:
    """One listing for all segments: each instruction shows its most telling status."""
    known = {(i.function, i.offset): i for i in report.bytecode}
    for record in captured.bytecode:
        info = known.get((record.function, record.offset))
        if info is None:
            report.bytecode.append(InstructionInfo(**vars(record)))
        elif STATUS_RANK[record.status] > STATUS_RANK[info.status]:
            info.status = record.status


def _break_info(error: Unsupported) -> GraphBreakInfo:
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


@overload
def compile(fn: Callable, **options: Any) -> CompiledFunction: ...
@overload
def compile(fn: None = None, **options: Any) -> Callable[[Callable], CompiledFunction]: ...


def compile(
    fn: Callable | None = None,
    *,
    backend: str = "auto",
    mode: str = "default",
    dynamic: bool | None = None,
    fullgraph: bool = False,
) -> CompiledFunction | Callable[[Callable], CompiledFunction]:
    """Compile a function or nn.Module. Works as `compile(fn)`, `@compile` and `@compile(backend=...)`.

    backend: "auto" (C++ for CPU tensors, Triton for CUDA tensors), "cpp", "triton", or "eager"
             (capture only: run the captured graph with torch ops).
    fullgraph: raise GraphBreakError instead of falling back to eager when capture stops.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    if fn is None:
        return lambda f: CompiledFunction(f, backend, mode, dynamic, fullgraph)
    return CompiledFunction(fn, backend, mode, dynamic, fullgraph)
