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
        env[node] = new.copy_of(node, args, kwargs, source=node.source)
        env[node].tags.update(node.tags)


def extract(graph: Graph, inputs: list[Node], outputs: list[Node], late: Iterable[Node] = ()) -> Graph:
    """A new graph with `inputs` as its placeholders that returns the tuple `outputs`, computed
    from them. Only the nodes on the way are copied, in `graph`'s order, except the `late` ones:
    each of those moves down to just before the first node that reads it."""
    needed = ancestors(outputs, stop_at=inputs)
    new = Graph()
    env = {node: new.placeholder(node.name, node.meta, node.source) for node in inputs}
    missing = [n.name for n in graph.inputs if n in needed and n not in env]
    if missing:
        raise ValueError(f"{', '.join(missing)} needed to compute the outputs but not given as inputs")
    nodes = [n for n in graph.compute_nodes() if n in needed and n not in env]
    copy_nodes(new, _late_order(nodes, set(late) & set(nodes)), env)
    new.output(tuple(env[node] for node in outputs))
    return new


def _late_order(nodes: list[Node], late: set[Node]) -> list[Node]:
    """`nodes` (in graph order) with each of `late` placed just before its first reader, its own
    `late` inputs before it. A node in `late` reads only nodes before it or in `late` (the backward's
    recomputed forward values read saved tensors and each other), so the order stays valid."""
    order: list[Node] = []
    placed: set[Node] = set()
    for node in [n for n in nodes if n not in late] + [n for n in nodes if n in late]:
        stack = [(node, False)]
        while stack:  # depth first, without recursion: recomputed chains can be thousands long
            current, inputs_placed = stack.pop()
            if current in placed:
                continue
            if inputs_placed:
                placed.add(current)
                order.append(current)
                continue
            stack.append((current, True))
            stack.extend((i, False) for i in reversed(current.inputs()) if i in late and i not in placed)
    return order


def live_nodes(graph: Graph) -> set[Node]:
    """The placeholders, and every node the outputs read (directly or not)."""
    outputs = [v for v in flatten(graph.outputs) if isinstance(v, Node)]
    return ancestors(outputs) | set(graph.inputs) | {graph.output_node}
