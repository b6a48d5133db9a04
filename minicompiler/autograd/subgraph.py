"""Cut a piece out of a graph: the nodes that compute some outputs from some inputs."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from minicompiler.ir import Graph, Node, flatten, map_structure


def ancestors(outputs: Iterable[Node], stop_at: Iterable[Node] = ()) -> set[Node]:
    """`outputs` and every node they read, transitively, not looking past `stop_at`."""
    stop, seen = set(stop_at), set()
    todo = list(outputs)
    while todo:
        node = todo.pop()
        if node not in seen:
            seen.add(node)
            if node not in stop:
                todo.extend(node.inputs())
    return seen


def copy_nodes(new: Graph, nodes: Iterable[Node], env: dict[Node, Node]) -> None:
    """Append a copy of each compute node to `new` (same op, source line and tags), reading
    its inputs through `env`, which maps old nodes to new ones and learns each copy."""

    def mapped(value: Any) -> Any:
        return env[value] if isinstance(value, Node) else value

    for node in nodes:
        args, kwargs = map_structure(mapped, node.args), map_structure(mapped, node.kwargs)
        env[node] = new.call(node.op, *args, source=node.source, **kwargs)
        env[node].tags.update(node.tags)


def extract(graph: Graph, inputs: list[Node], outputs: list[Node]) -> Graph:
    """A new graph with `inputs` as its placeholders that returns the tuple `outputs`, computed
    from them. Only the nodes on the way are copied, in `graph`'s order; the rest is dead here."""
    needed = ancestors(outputs, stop_at=inputs)
    new = Graph()
    env = {node: new.placeholder(node.name, node.meta, node.source) for node in inputs}
    missing = [n.name for n in graph.inputs if n in needed and n not in env]
    if missing:
        raise ValueError(f"{', '.join(missing)} needed to compute the outputs but not given as inputs")
    copy_nodes(new, [n for n in graph.compute_nodes() if n in needed and n not in env], env)
    new.output(tuple(env[node] for node in outputs))
    return new


def live_nodes(graph: Graph) -> set[Node]:
    """The placeholders, and every node the outputs read (directly or not)."""
    outputs = [v for v in flatten(graph.outputs) if isinstance(v, Node)]
    return ancestors(outputs) | set(graph.inputs) | {graph.output_node}
