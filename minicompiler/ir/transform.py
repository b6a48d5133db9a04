"""Rebuild a graph node by node: the one loop every rewriting pass shares.

A pass gives `rewrite` a function `rule(graph, node, args, kwargs)`; `args`/`kwargs` are the
node's arguments already mapped into the new graph. The rule returns what should stand for
the node in the new graph (a new Node, an existing Node, or a Python constant), or `None`
to copy the node unchanged. New nodes made by the rule inherit the old node's source line,
so provenance survives every pass.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from minicompiler.ir.graph import Graph, Node, map_structure

Rule = Callable[[Graph, Node, tuple[Any, ...], dict[str, Any]], Any]


def rewrite(graph: Graph, rule: Rule) -> Graph:
    new = Graph()
    env: dict[Node, Any] = {}

    def mapped(value: Any) -> Any:
        return env[value] if isinstance(value, Node) else value

    for node in graph.nodes:
        if node.op == "placeholder":
            env[node] = new.placeholder(node.name, node.meta, node.source)
            continue
        if node.op == "output":
            new.output(map_structure(mapped, node.args[0]))
            continue
        args, kwargs = map_structure(mapped, node.args), map_structure(mapped, node.kwargs)
        with new.provenance(node.source):
            result = rule(new, node, args, kwargs)
            if result is None:
                result = new.copy_of(node, args, kwargs)
                result.tags.update(node.tags)
        env[node] = result
    return new


def copy_graph(graph: Graph) -> Graph:
    return rewrite(graph, lambda g, n, a, k: None)
