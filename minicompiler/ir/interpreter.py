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


def run_graph(graph: Graph, *inputs: torch.Tensor, observe: Callable[[Node, Any], None] | None = None) -> Any:
    """Execute `graph` on real tensors; returns its output structure with tensors in it.
    `observe(node, value)`, if given, sees each node's value as it is computed."""
    placeholders = graph.inputs
    if len(inputs) != len(placeholders):
        raise TypeError(f"graph takes {len(placeholders)} inputs, got {len(inputs)}")
    values: dict[Node, Any] = dict(zip(placeholders, inputs, strict=True))

    def value_of(arg: Any) -> Any:
        return values[arg] if isinstance(arg, Node) else arg

    for node in graph.compute_nodes():
        args = map_structure(value_of, node.args)
        kwargs = map_structure(value_of, node.kwargs)
        values[node] = OPS[node.op].impl(*args, **kwargs)
        if observe is not None:
            observe(node, values[node])
    return map_structure(value_of, graph.outputs)
