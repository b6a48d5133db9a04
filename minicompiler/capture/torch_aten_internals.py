"""aten ops that torch's own autograd and decompositions call (and that reach a graph when a user,
or torch.compile's AOT autograd, calls them directly): softmax's backward, dropout's backward,
and the softmax that gives 0 for a row that is all -inf. Each is a short formula."""

from __future__ import annotations

from typing import Any

import torch

from minicompiler.capture.torch_ops import extern, lowers
from minicompiler.ir import Graph, Node

aten = torch.ops.aten
# capture reads an op's Python __call__ (aten.X, and its overload aten.X.default), which calls its
# `_op`: that builtin is what the tables hold (as for _batch_norm_with_update in torch_norms.py)


@lowers(aten._softmax_backward_data._op, aten._softmax_backward_data.default._op)
def softmax_backward(g: Graph, grad: Node, output: Node, dim: int, input_dtype: torch.dtype) -> Node:
    # y = softmax(x): dx = y * (dy - sum(dy * y, dim)), in the input's dtype
    total = g.call("sum", g.call("mul", grad, output), (dim % max(output.meta.ndim, 1),), True)
    return g.call("convert", g.call("mul", output, g.call("sub", grad, total)), input_dtype)


@lowers(aten.native_dropout_backward._op, aten.native_dropout_backward.default._op)
def dropout_backward(g: Graph, grad: Node, mask: Node, scale: float) -> Node:
    # the gradient where the element was kept, scaled as the forward scaled it
    return g.call("convert", g.call("mul", g.call("mul", grad, mask), scale), grad.meta.dtype)


@lowers(aten._safe_softmax._op, aten._safe_softmax.default._op)
def safe_softmax(g: Graph, x: Any, dim: int, dtype: torch.dtype | None = None) -> Node:
    # softmax, but 0 (not NaN) along a row whose elements are all -inf (a fully masked attention row)
    if not isinstance(x, Node) or not x.meta.dtype.is_floating_point:
        return extern(g, aten._safe_softmax.default, x, dim, dtype)
    probabilities = g.call("softmax", x, dim, dtype)
    masked = g.call("all", g.call("eq", x, float("-inf")), (dim % max(x.meta.ndim, 1),), True)
    return g.call("where", masked, 0.0, probabilities)
