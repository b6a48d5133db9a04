"""Tiny patterns over graph nodes, for the algebraic rewrite rules.

    P("exp", P("log", "x"))     matches exp(log(<a tensor>)) and binds the tensor to "x"
    P("mul", "x", 1)            matches x*1 and 1*x (mul and add are commutative), 1 or 1.0,
                                or a `full` node filled with 1

A pattern argument is one of
  Pattern       a node applying that op
  "x"           a tensor variable: matches any node and binds it by name (a repeated name
                must match the same node)
  Arg("dims")   an argument variable: matches any value (a shape, a dtype, a number, ...)
  1, 0.5, ...   a constant: a Python number, or a `full` node with that value
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from minicompiler.ir import Node
from minicompiler.simplify.facts import constant_value

COMMUTATIVE = frozenset({"add", "mul"})
Bindings = dict[str, Any]


@dataclass(frozen=True)
class Pattern:
    op: str
    args: tuple[Any, ...]


@dataclass(frozen=True)
class Arg:
    name: str


def P(op: str, *args: Any) -> Pattern:  # short on purpose: rules read like math
    return Pattern(op, args)


def match_call(pattern: Pattern, op: str, args: tuple[Any, ...], bindings: Bindings) -> Bindings | None:
    """Bindings extended so that `op(*args)` matches `pattern`, or None if it does not match."""
    if op != pattern.op or len(args) != len(pattern.args):
        return None
    orders = [args, args[::-1]] if op in COMMUTATIVE else [args]
    for ordered in orders:
        found = _match_all(pattern.args, ordered, bindings)
        if found is not None:
            return found
    return None


def _match_all(patterns: tuple[Any, ...], values: tuple[Any, ...], bindings: Bindings) -> Bindings | None:
    for pattern, value in zip(patterns, values, strict=True):
        found = _match(pattern, value, bindings)
        if found is None:
            return None
        bindings = found
    return bindings


def _match(pattern: Any, value: Any, bindings: Bindings) -> Bindings | None:
    if isinstance(pattern, Pattern):
        if not isinstance(value, Node) or value.kwargs:
            return None
        return match_call(pattern, value.op, value.args, bindings)
    if isinstance(pattern, Arg):
        return {**bindings, pattern.name: value}
    if isinstance(pattern, str):
        if not isinstance(value, Node) or (pattern in bindings and bindings[pattern] is not value):
            return None
        return {**bindings, pattern: value}
    constant = constant_value(value)
    return bindings if constant is not None and constant == pattern else None
