"""What the simplify passes ask about a node: may it be merged or dropped, is it a constant,
and where did it come from (for the log)."""

from __future__ import annotations

from typing import Any

from minicompiler.ir import Node

# Ops whose result is not a function of their arguments alone: `torch_call` runs arbitrary
# torch code (random numbers, in-place updates, ...). They are never merged or dropped.
IMPURE_OPS = frozenset({"torch_call", "recorded_call"})  # recorded_call also writes the step's tape


def is_pure(node: Node) -> bool:
    return node.op not in IMPURE_OPS


def full_value(node: Node) -> Any:
    """The fill value of a `full(shape, value, dtype, device)` node."""
    return node.args[1] if len(node.args) > 1 else node.kwargs["value"]


def constant_value(value: Any) -> int | float | bool | None:
    """The number `value` stands for: a Python number, or the fill value of a `full` node."""
    if isinstance(value, Node):
        return full_value(value) if value.op == "full" else None
    return value if isinstance(value, (bool, int, float)) else None


def location(node: Node) -> str:
    """' at user.py:4 (y = x * 1)' for the log, or "" when the node has no source line."""
    source = node.source
    if source is None:
        return ""
    text = f" at {source.filename.rsplit('/', 1)[-1]}:{source.lineno}"
    return f"{text} ({source.line})" if source.line else text
