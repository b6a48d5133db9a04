"""`minicompiler.fail_on_recompile()`: inside it, a recompile is an error, not a silent slowdown.

    with minicompiler.fail_on_recompile():
        for batch in loader:            # after warm-up: nothing here should compile again
            loss = compiled(batch)      # RecompileError names the guard that failed

torch.compile's switch is `torch._dynamo.config.error_on_recompile = True`, or the stricter
`torch.compiler.set_stance("fail_on_recompile")`, which refuses every compilation inside it, even
a function's first. A recompile is silent by default: the program still runs, only slower,
because every new compilation costs a capture and a build. In a loop that should be warm, that
is a bug to find, and an error with the failed guard finds it.

What counts as a recompile is what the `recompiles` log topic reports (`logs.py`): a compilation
whose report has a `recompile_reason`, i.e. a function, or a segment after a graph break, compiled
again because a guard of its earlier compilation failed; also a path after a graph break taken
for the first time (TorchDynamo would compile that as a new resume function, not a recompile).

Unlike TorchDynamo, which refuses before compiling, minicompiler checks each compilation as it
finishes (where it also logs it): the call that compiled again raises after running, its result
is lost, and the new compiled entry stays in the cache, so only the first such call raises.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from contextvars import ContextVar

from minicompiler.report import CompileReport

_FAILING: ContextVar[bool] = ContextVar("minicompiler_fail_on_recompile", default=False)


class RecompileError(RuntimeError):
    """Raised inside `fail_on_recompile()` by a call that compiled its function again."""

    def __init__(self, report: CompileReport) -> None:
        where = f"{report.filename}:{report.firstlineno}" if report.filename else "(no source file)"
        super().__init__(f"{report.function} in {where} was compiled again inside fail_on_recompile(): "
                         f"{report.recompile_reason}")
        self.report = report


@contextlib.contextmanager
def fail_on_recompile() -> Iterator[None]:
    """Inside this block (this thread or task only), a call that recompiles raises RecompileError."""
    token = _FAILING.set(True)
    try:
        yield
    finally:
        _FAILING.reset(token)


def check(report: CompileReport) -> None:
    """Called by the compiler with every finished compilation (through `logs.emit_compilation`)."""
    if _FAILING.get() and report.recompile_reason:
        raise RecompileError(report)
