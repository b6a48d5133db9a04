"""`with torch.no_grad():` and `with torch.enable_grad():` inside a captured function.

Values are the same with or without gradients; what no_grad changes is that no gradient flows
back through what its block computes. Capture gives the block's tensor results a `detach` node
where a gradient could flow (builder.wrap_result), so the graph is right both when it is
differentiated and when it is not (the decorator form, `@torch.no_grad()` on a method such as a
rotary embedding's forward, is the same `with` once inlined). `enable_grad()` would turn
gradients back on inside a no_grad region: capture refuses it when an input requires grad.
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
        if self.enabled and any(node.meta is not None and node.meta.requires_grad for node in tx.state.graph.inputs):
            raise Unsupported(f"{self.describe()} in a function whose inputs require grad")
        if not self.enabled:
            tx.state.no_grad_depth += 1
        return ConstantVariable(None)

    def exit_variable(self) -> Variable:
        return _GradModeExit(self.enabled)


class _GradModeExit(Variable):
    """The `__exit__` BEFORE_WITH leaves on the stack; the block's end calls it with (None, None, None)."""

    def __init__(self, enabled: bool) -> None:
        self.enabled = enabled

    def call(self, tx: Tracer, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if not self.enabled:
            tx.state.no_grad_depth -= 1
        return ConstantVariable(None)

