"""`with torch.no_grad():` and `with torch.enable_grad():` inside a captured function.

Values are the same with or without gradients, so a graph that nothing differentiates through
needs no change: the block is captured like any other code. When a graph input requires a
gradient, switching gradients off would change what the backward computes; capture refuses
that case (the call then runs eagerly) rather than differentiate through a no_grad block.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from minicompiler.capture.errors import Unsupported
from minicompiler.capture.variables import ConstantVariable, Variable

if TYPE_CHECKING:
    from minicompiler.capture.frame import Tracer


class GradModeVariable(Variable):
    """`torch.no_grad()` (enabled=False) or `torch.enable_grad()` (enabled=True)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def describe(self) -> str:
        return "torch.enable_grad()" if self.enabled else "torch.no_grad()"

    def enter(self, tx: Tracer) -> Variable:
        if any(node.meta is not None and node.meta.requires_grad for node in tx.state.graph.inputs):
            raise Unsupported(f"{self.describe()} in a function whose inputs require grad")
        return ConstantVariable(None)

    def exit_variable(self) -> Variable:
        return _GradModeExit()


class _GradModeExit(Variable):
    """The `__exit__` BEFORE_WITH leaves on the stack; the block's end calls it with (None, None, None)."""

    def call(self, tx: Tracer, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return ConstantVariable(None)

