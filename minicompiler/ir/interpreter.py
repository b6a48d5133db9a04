"""The reference interpreter: runs any Graph with plain torch ops.

It is the oracle. Every stage's output graph must give the same answer here as the
user's function does eagerly, and every generated kernel must match it.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch

from minicompiler.ir.graph import Graph, Node, map_structure
from minicompiler.ir.ops import OPS
from minicompiler.ir.symbolic import SymSize, bind_symbols, evaluate, is_symbolic


def run_graph(graph: Graph, *inputs: torch.Tensor, observe: Callable[[Node, Any], None] | None = None) -> Any:
    """Execute `graph` on real tensors; returns its output structure with tensors in it.
    `observe(node, value)`, if given, sees each node's value as it is computed."""
    placeholders = graph.inputs
    if len(inputs) != len(placeholders):
        raise TypeError(f"graph takes {len(placeholders)} inputs, got {len(inputs)}")
    values: dict[Node, Any] = dict(zip(placeholders, inputs, strict=True))
    sizes = _symbol_values(graph, inputs)

    def value_of(arg: Any) -> Any:
        if isinstance(arg, SymSize):  # a symbolic size (a reshape's target, say): this call's number
            return evaluate(arg, sizes)
        return values[arg] if isinstance(arg, Node) else arg

    for node in graph.compute_nodes():
        args = map_structure(value_of, node.args)
        kwargs = map_structure(value_of, node.kwargs)
        values[node] = OPS[node.op].impl(*args, **kwargs)
        if observe is not None:
            observe(node, values[node])
    return map_structure(value_of, graph.outputs)


def _symbol_values(graph: Graph, inputs: tuple[torch.Tensor, ...]) -> dict[str, int]:
    """With symbolic sizes: what each symbol is in this call (read from the inputs' shapes)."""
    shapes = [p.meta.shape for p in graph.inputs if p.meta is not None]
    if not any(is_symbolic(shape) for shape in shapes):
        return {}
    tensors = [t for p, t in zip(graph.inputs, inputs, strict=True) if p.meta is not None]
    return bind_symbols(shapes, [tuple(t.shape) for t in tensors])
