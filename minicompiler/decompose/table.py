"""The decomposition table and the one function that applies it.

A decomposition is a small function that writes one op in simpler ops:

    @register_decomposition("silu")
    def silu(ops, x):
        return ops.mul(x, ops.sigmoid(x))  # x * sigmoid(x)

`ops` appends nodes to the graph being built (`ops.mul(a, b)` makes a `mul` node). When the
op called has a decomposition of its own, `ops` runs that instead, so decompositions build on
each other: above, `ops.sigmoid` is itself decomposed into exp, add and reciprocal.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, TypeVar

import torch

from minicompiler.ir import OPS, Graph, Node, flatten, infer_meta, map_structure, rewrite

Decomposition = Callable[..., Node]
DECOMPOSITIONS: dict[str, Decomposition] = {}
LOW_PRECISION = (torch.float16, torch.bfloat16)

F = TypeVar("F", bound=Decomposition)


class DecompositionError(Exception):
    """A composite op has no decomposition, or a decomposition changed a result's shape or dtype."""


class GraphOps:
    """`ops.<op name>(*args)` appends that op to `graph` (through its decomposition, if it has one)."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph

    def __getattr__(self, op: str) -> Callable[..., Node]:
        if op not in OPS:
            raise AttributeError(f"no op named {op!r} in the op table")
        return functools.partial(self.call, op)

    def call(self, op: str, *args: Any, **kwargs: Any) -> Node:
        decomposition = DECOMPOSITIONS.get(op)
        if decomposition is None:
            return self.graph.call(op, *args, **kwargs)
        return decomposition(self, *args, **kwargs)

    def primitive(self, op: str, *args: Any) -> Node:
        """Append `op(*args)` as is: for a decomposition that only puts a primitive's args in order."""
        return self.graph.call(op, *args)


def register_decomposition(op: str, *, upcast: bool = False) -> Callable[[F], F]:
    """Make the decorated function the way to write `op`.

    `upcast=True`: float16/bfloat16 tensor arguments are converted to float32, the op is
    computed in float32 and the result converted back. PyTorch's kernels compute these ops
    in float32 internally too ("opmath"), so the results match to the last bit or so,
    where rounding every step to 8 or 11 bits of mantissa would not.
    """

    def register(fn: F) -> F:
        DECOMPOSITIONS[op] = computed_in_float32(op, fn) if upcast else fn
        return fn

    return register


def computed_in_float32(op: str, fn: Decomposition) -> Decomposition:
    """`fn` (a way to write `op`) computing in float32 where an argument is float16/bfloat16."""
    def is_low(value: Any) -> bool:
        return isinstance(value, Node) and value.meta.dtype in LOW_PRECISION

    @functools.wraps(fn)
    def decomposition(ops: GraphOps, *args: Any, **kwargs: Any) -> Node:
        if not any(is_low(value) for value in flatten((args, kwargs))):
            return fn(ops, *args, **kwargs)
        result_dtype = infer_meta(op, args, kwargs).dtype  # what torch would return

        def upcast(value: Any) -> Any:
            return ops.convert(value, torch.float32) if is_low(value) else value

        result = fn(ops, *map_structure(upcast, args), **map_structure(upcast, kwargs))
        return result if result.meta.dtype == result_dtype else ops.convert(result, result_dtype)

    return decomposition


def decompose(graph: Graph) -> Graph:
    """A new graph with every composite op written in primitives and every primitive's
    arguments in canonical form. New nodes keep the source line of the node they replace
    and are tagged `origin=<composite op>` so a report can say "from layer_norm"."""

    def rule(new: Graph, node: Node, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Node | None:
        decomposition = DECOMPOSITIONS.get(node.op)
        if decomposition is None:
            if not OPS[node.op].is_primitive:
                raise DecompositionError(
                    f"no decomposition for composite op {node.op!r} ({node.name}); "
                    "add one with @register_decomposition in minicompiler/decompose/"
                )
            return None
        first_new = len(new.nodes)
        result = decomposition(GraphOps(new), *args, **kwargs)
        if (result.meta.shape, result.meta.dtype) != (node.meta.shape, node.meta.dtype):
            raise DecompositionError(
                f"decomposition of {node.op} ({node.name}) gives {result.meta}, torch gives {node.meta}"
            )
        for made in new.nodes[first_new:]:
            made.tags.update(node.tags)
            if not OPS[node.op].is_primitive:
                made.tags["origin"] = node.op
        return result

    return rewrite(graph, rule)
