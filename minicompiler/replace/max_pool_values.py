"""A max pool's values as the window's maximum, once gradients are worked out.

Where x needs a gradient, decompose reads each window's value from x at the window's argmax
(decompose/pooling.py), roughly:

    best = argmax(window, (4, 5))
    value = load_at(x, (n, c, oh * 2 - 1 + best // 3, ow * 2 - 1 + best % 3))   # tagged WINDOW_MAXIMUM

so that autograd sends the window's gradient to that one element, as torch does (amax's rule
would share it among ties). The value is the window's maximum all the same: the first largest
element is a largest element (and a NaN, if any, in both). Once the backward is derived (or for
the inference program, which has none) the read has done its work, and the value is one more
reduction over the same window as the argmax, `amax(window, (4, 5))`: one sweep over each window
computes both in one kernel, where the argmax and then the read were two (and an inference pool
needs no argmax at all). Runs on a graph just before it is lowered, in place.
"""

from __future__ import annotations

from minicompiler.decompose.pooling import WINDOW_MAXIMUM, argmax_behind
from minicompiler.ir import Graph, Node
from minicompiler.simplify.facts import is_pure, location


def max_pool_values(graph: Graph) -> list[str]:
    """Turn each read at an argmax into an `amax` of the same window, in place; one note each."""
    notes = []
    for node in graph.compute_nodes():
        if (best := _argmax_read(node)) is not None:
            read = node.inputs()
            node.op, node.args, node.kwargs = "amax", (best.args[0], best.args[1], False), {}
            _drop_unused(graph, read)
            notes.append(f"{node.name}: the window's maximum (amax), no longer read at its argmax{location(node)}")
    return notes


def picks_at_argmax(graph: Graph) -> bool:
    """Does `graph` read a max pool's values at the argmax (what `max_pool_values` rewrites)?"""
    return any(_argmax_read(node) is not None for node in graph.compute_nodes())


def _argmax_read(node: Node) -> Node | None:
    """The argmax whose window's maximum `node` is (decompose/pooling.py's tag), if that can still be
    told: `node` reads x where the one argmax its positions come from finds the largest of a window
    of the same x (the tag, which rewrites of the node pass on to what they make, alone is not
    enough: a part of a rewritten node could carry it)."""
    if not node.tags.get(WINDOW_MAXIMUM) or (read := _read_of(node)) is None:
        return None
    best = argmax_behind(read.inputs()[1:])  # the positions, not the tensor read
    if best is None:
        return None
    window = best.args[0]
    fits = (isinstance(window, Node) and best.args[2] is False and best.meta.shape == node.meta.shape
            and window.meta.dtype == node.meta.dtype and (of_window := _read_of(window)) is not None
            and of_window.args[0] is read.args[0])
    return best if fits else None


def _read_of(node: Node) -> Node | None:
    """The load_at under `node`'s masks: where(ok, ..., constant) around it."""
    while node.op == "where" and isinstance(node.args[1], Node) and not isinstance(node.args[2], Node):
        node = node.args[1]
    return node if node.op == "load_at" else None


def _drop_unused(graph: Graph, starts: list[Node]) -> None:
    """Remove the `starts` and what they alone read, where nothing reads them now."""
    users = graph.users()
    todo = list(starts)
    while todo:
        node = todo.pop()
        if node not in users or users[node] or not is_pure(node) or node.op == "placeholder":
            continue
        graph.nodes.remove(node)
        del users[node]
        for read in dict.fromkeys(node.inputs()):
            users[read] = [u for u in users[read] if u is not node]
            todo.append(read)
