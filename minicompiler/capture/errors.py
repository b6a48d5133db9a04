"""`Unsupported`: why capture gave up, and where; `break_kind`: what kind of graph break it is.

Capture never guesses. When the translator meets something it cannot represent in a
graph (printing, reading a tensor's value, branching on a tensor, an unknown C function),
it raises `Unsupported`. In the function being compiled that becomes a graph break (the
graph so far runs, the instruction runs for real, capture resumes after it: see
`resume.py`); where it cannot resume, the whole call runs eagerly (or, in a later segment,
whose code before the break has already run, the rest of the function: `resume_function.py`).
The exception names the user's line and the bytecode instruction, so a learner can see exactly
what broke the graph.
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
        # Filled in by `capture`: the bytecode listing with the instruction that broke, and the
        # trace of the instructions run until then (a TraceLog).
        self.bytecode: list[Any] = []
        self.trace: Any = None

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


_VALUE_HINT = "a tensor's value is only known when the graph runs; keep it a tensor (torch.where, masks)"
# (words in the reason, kind, hint): the first match names the kind of break and what to do about it.
_KINDS = [
    ("reads the tensor's", "data-dependent value", _VALUE_HINT),
    ("reads a tensor's", "data-dependent value", _VALUE_HINT),
    ("print()", "side effect", "printing runs eagerly between two graphs; move it out of the hot path"),
    ("branching on a tensor", "data-dependent control flow",
     "replace `if tensor:` by torch.where(cond, a, b), or branch on shapes / Python values"),
    ("side effect", "side effect", "side effects run eagerly between two graphs"),
    ("is not supported", "unsupported operation", "the operation runs eagerly between two graphs"),
]


def break_kind(reason: str) -> tuple[str, str]:
    """The kind of a graph break and a hint for the user, read from its reason."""
    for words, kind, hint in _KINDS:
        if words in reason:
            return kind, hint
    return "unsupported", "this instruction runs eagerly between two graphs"
