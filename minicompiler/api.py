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
import threading
import time
import warnings
from collections.abc import Callable
from typing import Any, overload

import torch

from minicompiler import logs
from minicompiler.capture import (
    CaptureResult,
    Guard,
    RealFrame,
    ResumePoint,
    Unsupported,
    capture,
    capture_resume,
    first_failing_guard,
    run_instruction,
)
from minicompiler.capture.resume import REAL_NULL
from minicompiler.capture.resume_function import resume_function
from minicompiler.capture_report import add_trace, break_info, merge_bytecode, segment_reason, slot_name
from minicompiler.compiled_module import CompiledModule
from minicompiler.dynamic_shapes import DynamicShapes
from minicompiler.pipeline import BACKENDS, compile_graph
from minicompiler.report import CompileReport, InstructionInfo
from minicompiler.runtime import parallel_compile
from minicompiler.runtime.cache import CacheEntry, first_passing, first_runnable, why_not_runnable

# torch.compile's modes, and what each switches on here: (CUDA graphs, autotuned launch configs)
MODES = {
    "default": (False, False),
    "reduce-overhead": (True, False),
    "max-autotune": (True, True),
    "max-autotune-no-cudagraphs": (False, True),
}
# torch.compile(options=...) keys understood (TorchInductor's names), and which switch each sets
OPTIONS = {"triton.cudagraphs": 0, "max_autotune": 1}
# and TorchInductor's layout optimization: convolutions channels-last (layout.py); unset: on CUDA only
LAYOUT_OPTION = "layout_optimization"
CACHE_SIZE_LIMIT = 8


class GraphBreakError(RuntimeError):
    """Raised with fullgraph=True when the function cannot be captured as one graph, and when a
    later segment of a function with graph breaks cannot resume (earlier segments' side effects
    have already happened, so running the whole call eagerly again would repeat them)."""


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


class CompiledFunction(DynamicShapes):
    """What `minicompiler.compile(fn)` returns: call it like `fn`; read `.report`."""

    def __init__(self, fn: Callable, backend: str, mode: str, dynamic: bool | None, fullgraph: bool,
                 options: dict[str, Any] | None = None):
        self.fn = fn
        self.backend = backend
        self.mode = mode
        self.options = dict(options or {})
        self.cuda_graphs, self.autotune = _switches(mode, self.options)
        self.dynamic = dynamic
        self.fullgraph = fullgraph
        self.cache: list[CacheEntry] = []
        # segments after a graph break: (code, instruction, stack depth, local names) -> entries
        self.resume_cache: dict[tuple, list[CacheEntry]] = {}
        self.uncapturable_segments: set[tuple] = set()  # resume keys whose rest runs for real
        self.float_inputs: dict[tuple, frozenset[str]] = {}  # resume key -> float slots read as inputs
        self.reports: list[CompileReport] = []  # one per compilation, oldest first
        self.dynamic_dims: dict[str, set[int]] = {}  # input source path -> dims seen changing (dynamic=None)
        self.symbolic_off: str | None = None  # why symbolic sizes were given up for this function, if they were
        self._warned_cache_limit = False
        # Held while compiling: threads that miss the cache at once compile one after the other (the
        # second finds the first's entry); a call whose entry exists takes no lock
        self._compile_lock = threading.RLock()
        # Set when a call could not be captured at all (not even up to a resumable graph break):
        # like TorchDynamo's skipped frames, later calls then run eagerly without trying again.
        self.runs_eagerly: str | None = None
        functools.update_wrapper(self, fn, updated=())

    @property
    def report(self) -> CompileReport | None:
        """The report of the most recent compilation (None before the first call)."""
        return self.reports[-1] if self.reports else None

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        if self.runs_eagerly is not None:
            return self.fn(*args, **kwargs)
        entry, inputs = first_passing(self.cache, args, kwargs)  # inputs: fetched by the guard function
        if entry is None or entry.captured.dynamic_inputs:
            with self._compile_lock:
                entry, report = self._entry_for(args, kwargs)
            inputs = None
        else:
            report = None
        if entry is None:
            if report is not None:
                logs.emit_compilation(report)
            return self.fn(*args, **kwargs)
        return self._run_segments(entry, args, kwargs, report, inputs)

    def _entry_for(self, args: tuple, kwargs: dict) -> tuple[CacheEntry | None, CompileReport | None]:
        """The entry that runs this call, compiled if none passes (called under the compile lock);
        with this call's new report, if it compiled one. No entry: run the call eagerly."""
        entry, _ = first_passing(self.cache, args, kwargs)  # again: another thread may have added it
        if entry is not None:
            entry, report = self._for_sizes(entry, args, kwargs)
            return entry, report if entry is not None else self.reports[-1]
        if self.runs_eagerly is not None:
            return None, None
        if len(self.cache) >= CACHE_SIZE_LIMIT:
            self._warn_cache_limit()
            return None, None
        reason = self._recompile_reason(args, kwargs)
        self._learn_dynamic_dims(args, kwargs)
        entry = self._compile(args, kwargs, reason)
        if entry is None:
            return None, self.reports[-1]
        self.cache = [*self.cache, entry]  # a new list: threads reading the old one see it whole
        return entry, entry.report

    def _warn_cache_limit(self) -> None:
        if not self._warned_cache_limit:
            warnings.warn(
                f"minicompiler: {self.__name__} recompiled {CACHE_SIZE_LIMIT} times "
                "(cache size limit); running it eagerly from now on",
                stacklevel=4,
            )
            self._warned_cache_limit = True

    def _run_segments(self, entry: CacheEntry, args: tuple, kwargs: dict, report: CompileReport | None,
                      inputs: list[torch.Tensor] | None = None) -> Any:
        """Run `entry`'s graph; at each graph break, run the breaking instruction for real on the
        rebuilt frame and go on with the next segment. `report` is this call's new report, if any;
        `inputs` the first graph's inputs, if the guard check fetched them already."""
        while True:
            outputs = self._run(entry, args, kwargs, inputs)
            inputs = None
            point = entry.captured.resume
            if point is None:
                if report is not None:  # this call compiled something: its code exists now, log it
                    logs.emit_compilation(report)
                return entry.captured.returned_value(outputs, args, kwargs)
            stack, local = point.frame.rebuild(outputs, args, kwargs)
            frame = RealFrame(stack, local, point.index)
            run_instruction(point, frame)
            args, kwargs = frame.arguments(), {}
            key = (point.function.__code__, frame.shape_key())
            if key in self.uncapturable_segments:
                return _run_rest_for_real(point, frame)
            with self._compile_lock:  # segments after a break: rarer, so always locked
                entry, report = self._segment_entry(point, frame, key, report)
            if entry is None:
                return _run_rest_for_real(point, frame)

    def _segment_entry(self, point: ResumePoint, frame: RealFrame, key: tuple,
                       report: CompileReport | None) -> tuple[CacheEntry | None, CompileReport | None]:
        """The entry for the segment from `point` (compiled if none runs), and this call's report.
        No entry: the rest of the function runs for real."""
        args = frame.arguments()
        if key in self.uncapturable_segments:
            return None, report
        entries = self.resume_cache.setdefault(key, [])
        entry = first_runnable(entries, args)
        if entry is not None:
            return entry, report
        failed = why_not_runnable(entries[-1], args) if entries else None
        report = report or self._new_report(segment_reason(point, failed))
        self._learn_float_inputs(key, failed, args)
        symbolic = not any(e.captured.sizes is not None for e in entries)  # one symbolic entry a segment
        entry = self._compile_segment(point, frame, report, self.float_inputs.get(key, frozenset()), symbolic)
        if entry is None:
            self.uncapturable_segments.add(key)
            logs.emit_compilation(report)
            return None, report
        if len(entries) >= CACHE_SIZE_LIMIT:
            entries.pop(0)  # the oldest goes: segments are cheap to capture again
        entries.append(entry)
        return entry, report

    def _run(self, entry: CacheEntry, args: tuple, kwargs: dict, inputs: list[torch.Tensor] | None = None) -> Any:
        if inputs is None:
            inputs = entry.captured.fetch_inputs(args, kwargs)
        outputs = entry.compiled.run(inputs)  # the training program when an input needs a gradient
        outputs, new_values = entry.captured.split_mutations(outputs)
        _write_back(inputs, entry.captured.mutated_inputs, new_values)
        entry.captured.replay_side_effects()  # attribute writes on objects from outside
        return outputs

    def _recompile_reason(self, args: tuple, kwargs: dict) -> str | None:
        if not self.cache:
            return None
        failed = first_failing_guard(self.cache[-1].guards, args, kwargs)
        return f"guard failed: {failed.description} ({failed.source})" if failed else None

    def _new_report(self, recompile_reason: str | None) -> CompileReport:
        report = self._unrecorded_report(recompile_reason)
        self.reports.append(report)
        return report

    def _unrecorded_report(self, recompile_reason: str | None) -> CompileReport:
        name, filename, firstlineno, source = _function_info(self.fn)
        report = CompileReport(name, filename, firstlineno, source)
        report.recompile_reason = recompile_reason
        return report

    def _symbols_allowed(self, args: tuple, kwargs: dict) -> bool:
        # CUDA graphs and autotuning are recorded for one set of sizes; `eager` compiles nothing
        return not (self.symbolic_off or self.dynamic is False or self.cuda_graphs or self.autotune
                    or _choose_backend(self.backend, args, kwargs) == "eager")

    def _compile(self, args: tuple, kwargs: dict, recompile_reason: str | None,
                 symbolic: bool = True) -> CacheEntry | None:
        """Capture and compile the first segment for these arguments; None means: run this call eagerly.
        With dynamic dims, a graph with symbolic sizes is tried first (unless `symbolic` is False)."""
        if symbolic and (entry := self._compile_symbolic(args, kwargs, recompile_reason)) is not None:
            return entry
        report = self._new_report(recompile_reason)
        start = time.perf_counter()
        if _choose_backend(self.backend, args, kwargs) == "triton":  # kernel compilers start during capture
            parallel_compile.start_workers()
        try:
            captured = capture(self.fn, args, kwargs, allow_breaks=not self.fullgraph,
                               dynamic_dims=self._dynamic_dims_of)
        except Unsupported as error:
            report.graph_breaks.append(break_info(error))
            report.compile_seconds = time.perf_counter() - start
            report.bytecode = [InstructionInfo(**vars(record)) for record in error.bytecode]
            if error.trace is not None:
                add_trace(report, error.trace)
            if self.fullgraph:
                raise GraphBreakError(f"fullgraph=True but the graph breaks at {error}") from error
            report.eager_fallback = str(error)
            self.runs_eagerly = report.eager_fallback
            return None
        return self._compile_captured(captured, report, args, kwargs, start)

    def _learn_float_inputs(self, key: tuple, failed: Guard | str | None, args: tuple) -> None:
        """A segment captured again because a float in its frame changed (what `.item()` returned
        before the break, say) reads that float as a graph input from now on, as Dynamo does,
        instead of compiling again for every new value."""
        if isinstance(failed, Guard) and failed.kind == "constant" and type(failed.fetch(args, {})) is float:
            self.float_inputs[key] = self.float_inputs.get(key, frozenset()) | {failed.source}

    def _compile_segment(self, point: ResumePoint, frame: RealFrame, report: CompileReport,
                         float_inputs: frozenset[str], symbolic: bool) -> CacheEntry | None:
        """Capture and compile the segment after a graph break, from the real frame there (with
        symbolic sizes first, if `symbolic`); None if it cannot be captured (a break in it that
        cannot resume): then the rest runs for real."""
        start = time.perf_counter()
        report.dynamic += [f"the float {slot_name(point, frame, path)} is a graph input, not a constant"
                           for path in sorted(float_inputs)]
        arguments = frame.arguments()
        if symbolic and self._symbols_allowed(arguments, {}):
            try:
                captured = capture_resume(point, frame, float_inputs, self._dynamic_dims_of, symbolic=True)
            except Unsupported:
                pass  # captured again below, which reports the reason
            else:
                entry = self._compile_with_symbols(captured, report, arguments, {}, start)
                if entry is not None:
                    return entry
        try:
            captured = capture_resume(point, frame, float_inputs)
        except Unsupported as error:
            report.graph_breaks.append(break_info(error))
            line = point.instruction.positions.lineno  # in the compiled function's own code
            report.eager_fallback = (f"from the graph break at line {line} on, the function runs uncompiled "
                                     f"(the code after it cannot be captured: {error})")
            return None
        return self._compile_captured(captured, report, arguments, {}, start)

    def _compile_captured(self, captured: CaptureResult, report: CompileReport, args: tuple, kwargs: dict,
                          start: float, prepare: bool = False) -> CacheEntry:
        """Compile one captured segment and record it (and the break it ends at) in `report`.
        `prepare`: also generate the program this call runs now, before anything is recorded
        (with symbolic sizes that is where a stage may fail)."""
        backend = _choose_backend(self.backend, args, kwargs)
        compiled = compile_graph(
            captured.graph, backend, time.perf_counter() - start, strict=self.backend != "auto",
            dynamic=bool(captured.dynamic_inputs), cuda_graphs=self.cuda_graphs, autotune=self.autotune,
            written_back=captured.mutated_inputs, channels_last=self.options.get(LAYOUT_OPTION),
        )
        if prepare:
            compiled.program_for(captured.fetch_inputs(args, kwargs))
        merge_bytecode(report, captured)
        add_trace(report, captured.trace)
        if captured.resume is not None:
            report.graph_breaks.append(break_info(captured.resume.error))
        report.dynamic += [f"dims {', '.join(map(str, dims))} of {source.label or source.path}"
                           for source, dims in captured.dynamic_inputs]
        compiled.report.guards = [g.description for g in captured.guards]
        if captured.sizes is not None:
            size_guards = [f"size guard: {guard}" for guard in captured.sizes.guards]
            report.dynamic += [f"{symbol} = {source.label or source.path}{'' if dim is None else f'.shape[{dim}]'}"
                               " (a symbol in the graph)" for symbol, (source, dim) in captured.symbols.items()]
            report.dynamic += size_guards
            compiled.report.guards += size_guards  # checked with the others on every call
        report.graphs.append(compiled.report)
        report.compile_seconds += time.perf_counter() - start
        compiled.compile_report = report  # programs generated later add their time
        needs_autograd = any(
            p.meta is not None and p.meta.requires_grad for p in captured.graph.inputs
        )
        return CacheEntry(captured.guards, captured, compiled, report, needs_autograd,
                          captured.dynamic_sizes(args, kwargs))


def _write_back(inputs: list[torch.Tensor], mutated: list[int], new_values: list[torch.Tensor]) -> None:
    """Finish the in-place updates the graph computed functionally (`x.add_(1)`, BatchNorm's running
    statistics): copy each new value into the caller's tensor, in the order eager changed them."""
    if not mutated:
        return
    written_in_place = []
    with torch.no_grad():  # an update of a buffer is not part of what autograd differentiates
        for index, value in zip(mutated, new_values, strict=True):
            if value is None:  # a kernel wrote it in place; a training forward hands back None then
                written_in_place.append(inputs[index])
            elif _same_memory(value, inputs[index]):  # a kernel wrote it in place (fuse/in_place.py)
                written_in_place.append(value)
            else:
                inputs[index].copy_(value)
    if written_in_place:  # as copy_ would: autograd (and layout.py's weight copies) see them changed
        torch.autograd.graph.increment_version(written_in_place)


def _same_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    """The same elements of the same memory: `a` is `b`, or the alias of it that an autograd
    Function returns for an input it hands back (the training forward's in-place writes)."""
    return a is b or (a.data_ptr() == b.data_ptr() and a.shape == b.shape and a.stride() == b.stride()
                      and a.dtype == b.dtype and a.device == b.device)


def _run_rest_for_real(point: ResumePoint, frame: RealFrame) -> Any:
    """The code before the break has run (compiled), so the call cannot start again eagerly:
    CPython runs the rest of the function from the break on (a resume function, as Dynamo makes)."""
    offset = point.instructions[frame.index].offset
    return resume_function(point.function, offset, frame.stack, frame.locals, REAL_NULL)()


@overload
def compile(fn: torch.nn.Module, **settings: Any) -> CompiledModule: ...
@overload
def compile(fn: Callable, **settings: Any) -> CompiledFunction: ...
@overload
def compile(fn: None = None, **settings: Any) -> Callable[[Callable], Any]: ...


def compile(
    fn: Callable | None = None,
    *,
    backend: str = "auto",
    mode: str = "default",
    dynamic: bool | None = None,
    fullgraph: bool = False,
    options: dict[str, Any] | None = None,
    disable: bool = False,
) -> Any:
    """Compile a function (-> CompiledFunction) or nn.Module (-> CompiledModule, an nn.Module
    like torch.compile's OptimizedModule: see compiled_module.py). An optimizer's bound `opt.step`
    gets a CompiledOptimizerStep (optim.py): Adam, AdamW and SGD updates as fused kernels. Works as `compile(fn)`,
    `@compile` and `@compile(backend=...)`.
    The parameters are torch.compile's:

    backend: "auto" (C++ for CPU tensors, Triton for CUDA tensors), "cpp", "triton", or "eager"
             (capture only: run the captured graph with torch ops).
    mode: "default"; "reduce-overhead" (CUDA tensors: programs replayed from CUDA graphs);
          "max-autotune" (also Triton block sizes timed on the first call; C++ has none to tune);
          "max-autotune-no-cudagraphs" (the tuning without the CUDA graphs).
    dynamic: True: sizes may change without recompiling; None: a size that changed once is
             treated as dynamic from the recompile on; False: every size is guarded.
    fullgraph: raise GraphBreakError instead of falling back to eager when capture stops.
    options: instead of a mode, {"triton.cudagraphs": bool, "max_autotune": bool}; also
             {"layout_optimization": bool}: convolutions channels-last (default: on CUDA only).
    disable: return `fn` itself, uncompiled.
    """
    if backend not in BACKENDS:
        raise ValueError(f"unknown backend {backend!r}; choose one of {', '.join(BACKENDS)}")
    _switches(mode, options or {})  # a bad mode or option fails here, not at the first call
    if disable:
        return fn if fn is not None else (lambda f: f)
    if fn is None:
        return lambda f: compile(f, backend=backend, mode=mode, dynamic=dynamic, fullgraph=fullgraph, options=options)
    if not callable(fn):  # at once, not at the first call (torch.compile asserts the same)
        raise TypeError(f"minicompiler.compile expects a function or nn.Module, but got {type(fn).__name__!r}: "
                        f"{fn!r:.80}")
    if _is_optimizer_step(fn):  # compile(opt.step): the update as a few fused kernels (optim.py)
        from minicompiler.optim import compile_optimizer  # optim.py is built on this module

        return compile_optimizer(fn.__self__, backend=backend, mode=mode, dynamic=dynamic, fullgraph=fullgraph,
                                 options=options)
    if isinstance(fn, torch.nn.Module):  # a module gets a module: parameters(), train(), state_dict()...
        inner = fn.module if isinstance(fn, torch.nn.parallel.DistributedDataParallel) else fn
        # its bound `forward`: the wrapper runs the module's hooks (capture would refuse them)
        return CompiledModule(fn, CompiledFunction(inner.forward, backend, mode, dynamic, fullgraph, options))
    return CompiledFunction(fn, backend, mode, dynamic, fullgraph, options)


def _is_optimizer_step(fn: Callable) -> bool:
    """`opt.step`, bound to a torch.optim.Optimizer."""
    return inspect.ismethod(fn) and isinstance(fn.__self__, torch.optim.Optimizer) and fn.__name__ == "step"


def _switches(mode: str, options: dict[str, Any]) -> tuple[bool, bool]:
    """(CUDA graphs, autotuning) for a mode or, instead of one, options (as torch.compile)."""
    if mode not in MODES:
        raise ValueError(f"unknown mode {mode!r}; choose one of {', '.join(MODES)}")
    if options and mode != "default":
        raise ValueError("give a mode or options, not both (as torch.compile)")
    if unknown := sorted(set(options) - set(OPTIONS) - {LAYOUT_OPTION}):
        raise ValueError(f"unknown option(s) {', '.join(unknown)}; minicompiler understands "
                         f"{', '.join([*OPTIONS, LAYOUT_OPTION])}")
    switches = list(MODES[mode])
    for key, value in options.items():
        if key in OPTIONS:
            switches[OPTIONS[key]] = bool(value)
    return switches[0], switches[1]
