"""A max pool's values as the window's maximum, once gradients are worked out.

Where x needs a gradient, decompose picks each window's value at its argmax (decompose/pooling.py):

    best = argmax(window, (4, 5), keepdim=True)
    value = sum(where(eq(tap, best), window, 0), (4, 5))

so that autograd sends the window's gradient to that one element, as torch does (amax's rule
would share it among ties). The value is the window's maximum all the same: the first largest
element is a largest element (and a NaN, if any, in both). Once the backward is derived (or for
the inference program, which has none) the rule has done its work, and the value is one more
reduction over the same window as the argmax, `amax(window, (4, 5))`: one sweep over each window
computes both in one kernel, where the argmax and then the pick made two (and an inference pool
needs no argmax at all). Runs on a graph just before it is lowered, in place.
"""

from __future__ import annotations

from minicompiler.ir import Graph, Node
from minicompiler.simplify.facts import is_pure, location


def max_pool_values(graph: Graph) -> list[str]:
    """Turn each pick-at-argmax into an `amax` of the same window, in place; one note each."""
    notes = []
    for node in graph.compute_nodes():
        if (window := _picked_window(node)) is not None:
            picked = node.args[0]
            node.op, node.args, node.kwargs = "amax", (window, node.args[1], False), {}
            _drop_unused(graph, picked)
            notes.append(f"{node.name}: the window's maximum (amax), no longer picked at its argmax{location(node)}")
    return notes


def picks_at_argmax(graph: Graph) -> bool:
    """Does `graph` pick a max pool's values at the argmax (what `max_pool_values` rewrites)?"""
    return any(_picked_window(node) is not None for node in graph.compute_nodes())


def _picked_window(node: Node) -> Node | None:
    """sum(where(eq(tap, argmax(window, dims, True)), window, 0), dims, False) -> window."""
    if node.op != "sum" or node.kwargs or len(node.args) != 3 or node.args[2] is not False:
        return None
    picked, dims = node.args[0], node.args[1]
    if not isinstance(picked, Node) or picked.op != "where" or isinstance(picked.args[2], Node) or picked.args[2] != 0:
        return None
    chosen, window = picked.args[0], picked.args[1]
    if not isinstance(chosen, Node) or chosen.op != "eq" or not isinstance(window, Node):
        return None
    best = chosen.args[1]
    if not (isinstance(best, Node) and best.op == "argmax" and best.args[0] is window
            and tuple(best.args[1]) == tuple(dims) and best.args[2] is True):
        return None
    return window if window.meta.dtype == node.meta.dtype else None


def _drop_unused(graph: Graph, start: Node) -> None:
    """Remove `start` and what it alone read, now that nothing reads them."""
    users = graph.users()
    todo = [start]
    while todo:
        node = todo.pop()
        if users[node] or not is_pure(node) or node.op == "placeholder" or node not in users:
            continue
        graph.nodes.remove(node)
        del users[node]
        for read in dict.fromkeys(node.inputs()):
            users[read] = [u for u in users[read] if u is not node]
            todo.append(read)
