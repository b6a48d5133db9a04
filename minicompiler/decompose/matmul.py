"""linear -> addmm / matmul: the matrix multiply itself stays one extern library call."""

from __future__ import annotations

import math

from minicompiler.decompose.table import GraphOps, register_decomposition
from minicompiler.ir import Node


@register_decomposition("linear")
def linear(ops: GraphOps, x: Node, weight: Node, bias: Node | None = None) -> Node:
    # y = x @ weight.T + bias        x: (..., in)  weight: (out, in)  bias: (out,)
    weight_t = ops.permute(weight, (1, 0)) if weight.meta.ndim == 2 else weight  # (in, out)
    if x.meta.ndim < 2 or weight.meta.ndim < 2:  # a vector on either side: plain matmul
        y = ops.matmul(x, weight_t)
        return y if bias is None else ops.add(y, bias)
    *batch, in_features = x.meta.shape
    rows = ops.reshape(x, (math.prod(batch), in_features))  # (B*..., in): addmm wants 2-D
    y = ops.matmul(rows, weight_t) if bias is None else ops.addmm(bias, rows, weight_t)  # (B*..., out)
    return ops.reshape(y, (*batch, y.meta.shape[1]))  # (..., out)
