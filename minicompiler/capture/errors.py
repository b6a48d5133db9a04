"""`Unsupported`: why capture gave up, and where.

Capture never guesses. When the translator meets something it cannot represent in a
graph (printing, reading a tensor's value, branching on a tensor, an unknown C function),
it raises `Unsupported`; the caller then runs the function eagerly. The exception names the
user's line and the bytecode instruction, so a learner can see exactly what broke the graph.
"""

from __future__ import annotations

from typing import Any

from minicompiler.ir import SourceLoc


class Unsupported(Exception):
    """Capture cannot handle something; `str(e)` reads like
    "user.py:12 `y = x.item()`: Tensor.item() reads a tensor's value (CALL)"."""

    def __init__(self, reason: str, loc: SourceLoc | None = None, instruction: str | None = None) -> None:
        super().__init__(reason)
        self.reason = reason
        self.loc = loc
        self.instruction = instruction
        # Filled in by `capture`: the bytecode listing with the instruction that broke.
        self.bytecode: list[Any] = []

    def locate(self, loc: SourceLoc, instruction: str) -> None:
        """Record where it happened; the innermost frame (the user's own line) wins."""
        if self.loc is None:
            self.loc, self.instruction = loc, instruction

    def __str__(self) -> str:
        text = self.reason
        if self.loc is not None:
            where = f"{self.loc.filename.rsplit('/', 1)[-1]}:{self.loc.lineno}"
            where += f" `{self.loc.line}`" if self.loc.line else ""
            text = f"{where}: {text}"
        if self.instruction is not None:
            text += f" ({self.instruction})"
        return text
