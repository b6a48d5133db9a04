"""The guarded cache of compiled segments: what an entry holds, and which entry runs a call.

An entry runs a call when all its guards pass and, for a graph with symbolic sizes, all its
size guards pass for the call's sizes too (see ir/symbolic.py). Generating a program an entry
has not needed before may decide more about sizes, so the size guards are read again after it.
An entry's guards are checked by one generated function that also fetches the graph's inputs
(guard_code.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

import torch

from minicompiler.capture import CaptureResult, Guard, first_failing_guard
from minicompiler.pipeline import CompiledGraph
from minicompiler.report import CompileReport
from minicompiler.runtime.guard_code import CheckAndFetch, guard_function


@dataclass
class CacheEntry:
    """One compiled segment, and the guards under which it may run."""

    guards: list[Guard]
    captured: CaptureResult
    compiled: CompiledGraph
    report: CompileReport
    needs_autograd: bool
    # With dynamic dims: the sizes this entry was captured for, and the graphs captured for other
    # sizes that pass the same guards (their kernels are shape-generic, so shared)
    sizes: tuple[int, ...] = ()
    variants: dict[tuple[int, ...], CacheEntry] = field(default_factory=dict)
    # With symbolic sizes: why a program this entry needed later could not be generated (every
    # call then compiles for its own sizes)
    symbolic_failure: str | None = None
    # The guards as one generated function: None if one fails, else the graph's inputs
    check_and_fetch: CheckAndFetch = field(init=False, repr=False)
    check_source: str = field(init=False, repr=False)  # its text, for reading

    def __post_init__(self) -> None:
        self.check_and_fetch, self.check_source = guard_function(self.guards, self.captured.input_sources)


def failed_size_guard(entry: CacheEntry, args: tuple, kwargs: dict) -> str | None:
    """Why a symbolic entry cannot run this call (a size guard that fails), or None when it can.
    The program the call needs is generated first: generating it may decide more about sizes."""
    captured = entry.captured
    assert captured.sizes is not None
    if entry.symbolic_failure is not None:
        return entry.symbolic_failure
    values = captured.symbol_values(args, kwargs)
    sizes = captured.sizes
    failed = sizes.first_failing(values)
    if failed is None and not entry.compiled.has_program(torch.is_grad_enabled() and entry.needs_autograd):
        known = len(sizes.guards)
        try:
            entry.compiled.program_for(captured.fetch_inputs(args, kwargs))
        except Exception as error:  # noqa: BLE001 - as when compiling it: compile for the call's sizes instead
            entry.symbolic_failure = f"a program for symbolic sizes failed: {type(error).__name__}: {error}"
            return entry.symbolic_failure
        if len(sizes.guards) != known:
            failed = sizes.first_failing(values)
    if failed is None:
        return None
    call_sizes = ", ".join(f"{name}={value}" for name, value in values.items())
    return f"size guard failed: {failed} ({call_sizes})"


def first_runnable(entries: list[CacheEntry], args: tuple) -> CacheEntry | None:
    """The first segment entry whose guards (and size guards, if symbolic) pass for a frame."""
    for entry in entries:
        if why_not_runnable(entry, args) is None:
            return entry
    return None


def why_not_runnable(entry: CacheEntry, args: tuple) -> Guard | str | None:
    """The guard (or, as text, the size guard) that keeps a segment entry from running a frame."""
    passes = entry.check_and_fetch(args, {}) is not None  # the fast answer; which guard, only on a miss
    failed = None if passes else first_failing_guard(entry.guards, args, {})
    if failed is None and entry.captured.sizes is not None:
        return failed_size_guard(entry, args, {})
    return failed


def first_passing(entries: list[CacheEntry], args: tuple,
                  kwargs: dict) -> tuple[CacheEntry, list[torch.Tensor]] | tuple[None, None]:
    """The first entry whose guards pass, with its graph's inputs for this call (its size guards
    are checked by the caller); (None, None) when none passes."""
    for entry in entries:
        inputs = entry.check_and_fetch(args, kwargs)
        if inputs is not None:
            return entry, inputs
    return None, None
