"""Random ops, written so that the random draw is an ordinary forward value.

Dropout zeroes each element with probability p and scales the others by 1 / (1 - p):

    dropout(x, p) = x * (rand_like(x) >= p) / (1 - p)

With the draw (`rand_like`) a node of its own, AOT autograd's backward reuses the forward's mask
instead of drawing a new one, and fusion puts the compare and the multiplies in one kernel.
The result matches eager dropout in distribution, not bit for bit: eager draws its mask with
`bernoulli_`, a different use of the same random generator.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from minicompiler.decompose.table import GraphOps, register_decomposition
from minicompiler.ir import Node


@register_decomposition("torch_call")
def torch_call(ops: GraphOps, fn: Any, *args: Any, **kwargs: Any) -> Node:
    if fn is F.dropout:
        return dropout(ops, *args, **kwargs)
    return ops.graph.call("torch_call", fn, *args, **kwargs)  # any other function: kept whole


def dropout(ops: GraphOps, x: Node, p: float = 0.5, training: bool = True, inplace: bool = False) -> Node:
    if not training or p == 0:
        return x
    if p == 1:
        return ops.mul(x, 0.0)
    keep = ops.ge(ops.graph.call("torch_call", torch.rand_like, x), p)
    return ops.mul(ops.mul(x, keep), 1 / (1 - p))
