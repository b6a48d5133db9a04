"""Common subexpression elimination: the same op on the same arguments is computed once."""

from __future__ import annotations

from typing import Any

from minicompiler.ir import Graph, Node, rewrite
from minicompiler.simplify.facts import is_pure, location


def _key(value: Any) -> Any:
    """A hashable stand-in for an argument that is equal only for interchangeable arguments.

    The type is part of the key: `add(x, 1)` and `add(x, 1.0)` differ in dtype for an
    integer x, although `1 == 1.0` in Python. Floats compare by their bits: `-0.0 == 0.0`
    but `mul(x, -0.0)` and `mul(x, 0.0)` differ in sign.
    """
    if isinstance(value, Node):
        return value  # nodes hash by identity
    if isinstance(value, float):
        return (float, value.hex())
    if isinstance(value, (tuple, list)):
        return (type(value), tuple(_key(v) for v in value))
    if isinstance(value, dict):
        return (dict, tuple((k, _key(v)) for k, v in value.items()))
    return (type(value), value)


def eliminate_common_subexpressions(graph: Graph, log: list[str] | None = None) -> Graph:
    """A new graph where a pure node repeating an earlier one (same op, same inputs, same
    constants) is replaced by that earlier node."""
    first: dict[Any, tuple[Node, Node]] = {}  # key -> (node in the new graph, the node it came from)

    def rule(new: Graph, node: Node, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Node | None:
        if not is_pure(node) or node.op == "clone":  # two copies of x are two tensors: a.add_(1) leaves b
            return None
        key = (node.op, _key(args), _key(kwargs))
        if key in first:
            kept, original = first[key]
            if log is not None:
                log.append(f"cse: %{node.name}: repeats %{original.name}{location(node)}")
            return kept
        made = new.copy_of(node, args, kwargs)
        made.tags.update(node.tags)
        first[key] = (made, node)
        return made

    return rewrite(graph, rule)
