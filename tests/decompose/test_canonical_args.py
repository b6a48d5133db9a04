"""Primitives written with torch's argument conventions come out of decompose in canonical form."""

from __future__ import annotations

from typing import Any

import pytest
import torch

from minicompiler.decompose import decompose
from minicompiler.decompose.gathers import MAX_CAT_INPUTS
from minicompiler.ir import Graph, TensorMeta, run_graph, verify


def decompose_one(op: str, shape: tuple[int, ...], *args: Any) -> tuple[Any, ...]:
    """Decompose `op(x, *args)`; check it against eager torch and return the new node's args."""
    graph = Graph()
    x = graph.placeholder("x", TensorMeta(shape, torch.float32))
    graph.output(graph.call(op, x, *args))
    result = decompose(graph)
    verify(result, primitive_only=True)
    data = torch.randn(shape)
    torch.testing.assert_close(run_graph(result, data), run_graph(graph, data))
    (node,) = result.compute_nodes()
    assert node.op == op
    return node.args[1:]


@pytest.mark.parametrize(
    "op, shape, args, expected",
    [
        ("sum", (2, 3, 4), (None,), ((0, 1, 2), False)),
        ("sum", (2, 3, 4), ((),), ((0, 1, 2), False)),
        ("sum", (2, 3, 4), (-1, True), ((2,), True)),
        ("amax", (2, 3, 4), ([2, -3],), ((0, 2), False)),
        ("amin", (), (0,), ((), False)),
        ("permute", (2, 3, 4), ((-1, 0, -2),), ((2, 0, 1),)),
        ("reshape", (2, 3, 4), ((-1, 4),), ((6, 4),)),
        ("expand", (3, 1), ((2, -1, 5),), ((2, 3, 5),)),
        ("slice", (5, 7), (1, -3, None), (1, 4, 7, 1)),
        ("slice", (5, 7), (0, 1, 100, 2), (0, 1, 5, 2)),
        ("slice", (5, 7), (1, 5, 2), (1, 5, 5, 1)),  # empty: end never before start
    ],
)
def test_primitive_arguments_become_canonical(op: str, shape: tuple, args: tuple, expected: tuple) -> None:
    assert decompose_one(op, shape, *args) == expected


def test_cat_dim_becomes_non_negative() -> None:
    # a cat of many tensors stays one call (of few, it is a gather: decompose/gathers.py)
    graph = Graph()
    parts = [graph.placeholder(f"p{i}", TensorMeta((2, 3), torch.float32)) for i in range(MAX_CAT_INPUTS + 1)]
    graph.output(graph.call("cat", parts, -1))
    (node,) = decompose(graph).compute_nodes()
    assert node.op == "cat" and node.args[1] == 1
