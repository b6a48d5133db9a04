"""Dead code elimination: drop every node that no output depends on."""

from __future__ import annotations

from typing import Any

from minicompiler.ir import Graph, Node, rewrite
from minicompiler.simplify.facts import is_pure, location

# `rewrite` has no "delete" answer, so a dropped node is replaced by this marker. Nothing
# reads it: every node that read a dead node is dead itself.
_DROPPED = object()


def eliminate_dead_code(graph: Graph, log: list[str] | None = None) -> Graph:
    """A new graph without the nodes whose values are never used (impure nodes always stay)."""
    needed: set[Node] = set()
    for node in reversed(graph.nodes):  # users come after their inputs: walk back from the output
        if node.op == "output" or node in needed or not is_pure(node):
            needed.add(node)
            needed.update(node.inputs())

    def rule(new: Graph, node: Node, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if node in needed:
            return None
        if log is not None:
            log.append(f"dce: %{node.name}: unused, removed{location(node)}")
        return _DROPPED

    return rewrite(graph, rule)
