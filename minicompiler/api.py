"""`minicompiler.compile`: the user-facing entry point and the per-call runtime path.

A CompiledFunction keeps a small cache of compiled entries, each guarded by the assumptions its
capture made. A call checks the guards of each entry; the first entry whose guards all hold runs.
If none holds, the function is captured and compiled again, and the report says which guard failed.
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
    Unsupported,
    capture,
    first_failing_guard,
)
from minicompiler.pipeline import BACKENDS, CompiledGraph, compile_graph
from minicompiler.report import CompileReport, GraphBreakInfo, InstructionInfo

MODES = ("default", "reduce-overhead", "max-autotune")
CACHE_SIZE_LIMIT = 8


class GraphBreakError(RuntimeError):
    """Raised with fullgraph=True when the function cannot be captured as one graph."""


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
        self.reports: list[CompileReport] = []  # one per compilation, oldest first
        self._warned_cache_limit = False
        functools.update_wrapper(self, fn, updated=())

    @property
    def report(self) -> CompileReport | None:
        """The report of the most recent compilation (None before the first call)."""
        return self.reports[-1] if self.reports else None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        for entry in self.cache:
            if first_failing_guard(entry.guards, args, kwargs) is None:
                return self._run(entry, args, kwargs)
        if len(self.cache) >= CACHE_SIZE_LIMIT:
            if not self._warned_cache_limit:
                warnings.warn(
                    f"minicompiler: {self.__name__} recompiled {CACHE_SIZE_LIMIT} times "
                    "(cache size limit); running it eagerly from now on",
                    stacklevel=2,
                )
                self._warned_cache_limit = True
            return self.fn(*args, **kwargs)
        entry = self._compile(args, kwargs)
        if entry is None:
            return self.fn(*args, **kwargs)
        return self._run(entry, args, kwargs)

    def _run(self, entry: CacheEntry, args: tuple, kwargs: dict) -> Any:
        inputs = entry.captured.fetch_inputs(args, kwargs)
        return entry.compiled.run(inputs)  # the training program when an input needs a gradient

    def _recompile_reason(self, args: tuple, kwargs: dict) -> str | None:
        if not self.cache:
            return None
        failed = first_failing_guard(self.cache[-1].guards, args, kwargs)
        return f"guard failed: {failed.description} ({failed.source})" if failed else None

    def _compile(self, args: tuple, kwargs: dict) -> CacheEntry | None:
        """Capture and compile for these arguments; None means: run this call eagerly."""
        name, filename, firstlineno, source = _function_info(self.fn)
        report = CompileReport(name, filename, firstlineno, source)
        report.recompile_reason = self._recompile_reason(args, kwargs)
        self.reports.append(report)
        start = time.perf_counter()
        try:
            captured = capture(self.fn, args, kwargs)
        except Unsupported as error:
            if self.fullgraph:
                raise GraphBreakError(f"fullgraph=True but capture stopped: {error}") from error
            report.eager_fallback = str(error)
            report.graph_breaks.append(_break_info(error))
            report.compile_seconds = time.perf_counter() - start
            return None
        report.bytecode = [InstructionInfo(**vars(i)) for i in captured.bytecode]
        backend = _choose_backend(self.backend, args, kwargs)
        compiled = compile_graph(
            captured.graph, backend, time.perf_counter() - start, strict=self.backend != "auto"
        )
        compiled.report.guards = [g.description for g in captured.guards]
        report.graphs.append(compiled.report)
        report.compile_seconds = time.perf_counter() - start
        needs_autograd = any(
            p.meta is not None and p.meta.requires_grad for p in captured.graph.inputs
        )
        entry = CacheEntry(captured.guards, captured, compiled, report, needs_autograd)
        self.cache.append(entry)
        return entry


def _break_info(error: Unsupported) -> GraphBreakInfo:
    loc = error.loc
    return GraphBreakInfo(
        reason=error.reason,
        filename=loc.filename if loc else "",
        lineno=loc.lineno if loc else None,
        line=loc.line if loc else "",
        instruction=error.instruction or "",
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
