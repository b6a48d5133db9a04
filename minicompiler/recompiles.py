"""`minicompiler.fail_on_recompile()`: inside it, compiling is an error, not a silent slowdown.

    compiled(example)                   # warm up: compile before the block
    with minicompiler.fail_on_recompile():
        for batch in loader:            # nothing here should compile again
            loss = compiled(batch)      # RecompileError names the guard that failed

This is torch.compile's `torch.compiler.set_stance("fail_on_recompile")`: every compilation inside
it is refused, a function's first included (so compile before entering). torch's older
`torch._dynamo.config.error_on_recompile = True` lets first compilations through. A recompile is
silent by default: the program still runs, only slower, because every new compilation costs a
capture and a build. In a loop that should be warm, that is a bug to find, and an error with the
failed guard finds it.

Every compilation counts: a function's, a segment's after a graph break (also a path taken for the
first time, which TorchDynamo would compile as a new resume function), a dynamic graph's for a new
set of sizes, and one made through `minicompiler.backend` (TorchDynamo's own recompiles are caught
by torch's stance).

Unlike TorchDynamo, which refuses before compiling, minicompiler checks each compilation as it
finishes (where it also logs it): the call that compiled raises after running, its result is
lost, and the new compiled entry stays in the cache, so only the first such call raises.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from minicompiler.report import CompileReport

_FAILING: ContextVar[bool] = ContextVar("minicompiler_fail_on_recompile", default=False)


class RecompileError(RuntimeError):
    """Raised inside `fail_on_recompile()` by a call that compiled."""

    def __init__(self, report: CompileReport) -> None:
        where = f"{report.filename}:{report.firstlineno}" if report.filename else "(no source file)"
        why = report.recompile_reason or "no earlier compilation's guard failed (a first compilation, or new sizes)"
        super().__init__(f"{report.function} in {where} was compiled inside fail_on_recompile(): {why}")
        self.report = report


@contextlib.contextmanager
def fail_on_recompile() -> Iterator[None]:
    """Inside this block (this thread or task only), a call that compiles raises RecompileError."""
    token = _FAILING.set(True)
    try:
        yield
    finally:
        _FAILING.reset(token)


def check(report: CompileReport) -> None:
    """Called by the compiler with every finished compilation (through `logs.emit_compilation`)."""
    if _FAILING.get():
        raise RecompileError(report)
