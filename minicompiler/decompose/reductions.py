"""Reductions and normalisations: mean, var, std, softmax, log_softmax, layer_norm.

Every reduction made here has explicit sorted non-negative `dims`. softmax and layer_norm
reduce with `keepdim=True`, so the statistics broadcast straight back over the input;
that is what lets the fusion stage put a whole softmax or layer_norm in one kernel.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import torch

from minicompiler.decompose.dims import reduction_dims
from minicompiler.decompose.table import GraphOps, register_decomposition
from minicompiler.ir import Node

Dims = int | Sequence[int] | None


def _count(x: Node, dims: tuple[int, ...]) -> int:
    """How many elements each reduction over `dims` folds."""
    return math.prod(x.meta.shape[d] for d in dims)


# -- the reduction primitives themselves: only their arguments change ------------------------
def _canonical_reduction(op: str) -> None:
    @register_decomposition(op)
    def reduction(ops: GraphOps, x: Node, dims: Dims = None, keepdim: bool = False) -> Node:
        # op(x, dims=-1) -> op(x, (ndim-1,), False)
        return ops.primitive(op, x, reduction_dims(dims, x.meta.ndim), keepdim)


for _op in ("sum", "amax", "amin"):
    _canonical_reduction(_op)


# -- statistics ------------------------------------------------------------------------------
@register_decomposition("mean", upcast=True)
def mean(
    ops: GraphOps, x: Node, dims: Dims = None, keepdim: bool = False, dtype: torch.dtype | None = None
) -> Node:
    if dtype is not None:  # torch converts first, then averages in that dtype
        return ops.mean(ops.convert(x, dtype), dims, keepdim)
    dims = reduction_dims(dims, x.meta.ndim)
    # sum(x) / n
    return ops.div(ops.sum(x, dims, keepdim), _count(x, dims))


@register_decomposition("var", upcast=True)
def var(ops: GraphOps, x: Node, dims: Dims = None, correction: float = 1, keepdim: bool = False) -> Node:
    dims = reduction_dims(dims, x.meta.ndim)
    n = _count(x, dims)
    # sum((x - mean(x))^2) / (n - correction); two passes, as torch, for accuracy
    centered = ops.sub(x, ops.div(ops.sum(x, dims, True), n))
    squares = ops.sum(ops.mul(centered, centered), dims, keepdim)
    return ops.div(squares, max(0, n - correction))  # torch: n <= correction gives inf/nan


@register_decomposition("std", upcast=True)
def std(ops: GraphOps, x: Node, dims: Dims = None, correction: float = 1, keepdim: bool = False) -> Node:
    # sqrt(var(x))
    return ops.sqrt(ops.var(x, dims, correction, keepdim))


# -- normalisations --------------------------------------------------------------------------
@register_decomposition("softmax", upcast=True)
def softmax(ops: GraphOps, x: Node, dim: int, dtype: torch.dtype | None = None) -> Node:
    if dtype is not None:
        return ops.softmax(ops.convert(x, dtype), dim)
    dims = reduction_dims(dim, x.meta.ndim)
    # exp(x - max) / sum(exp(x - max)): subtracting the max keeps exp from overflowing
    exps = ops.exp(ops.sub(x, ops.amax(x, dims, True)))
    return ops.div(exps, ops.sum(exps, dims, True))


@register_decomposition("log_softmax", upcast=True)
def log_softmax(ops: GraphOps, x: Node, dim: int, dtype: torch.dtype | None = None) -> Node:
    if dtype is not None:
        return ops.log_softmax(ops.convert(x, dtype), dim)
    dims = reduction_dims(dim, x.meta.ndim)
    # (x - max) - log(sum(exp(x - max)))
    shifted = ops.sub(x, ops.amax(x, dims, True))
    return ops.sub(shifted, ops.log(ops.sum(ops.exp(shifted), dims, True)))


@register_decomposition("layer_norm", upcast=True)
def layer_norm(
    ops: GraphOps,
    x: Node,
    normalized_shape: int | Sequence[int],
    weight: Node | None = None,
    bias: Node | None = None,
    eps: float = 1e-5,
) -> Node:
    if isinstance(normalized_shape, int):
        normalized_shape = (normalized_shape,)
    ndim = x.meta.ndim
    dims = tuple(range(ndim - len(normalized_shape), ndim))  # the last len(normalized_shape) dims
    n = _count(x, dims)
    # (x - mean) / sqrt(var + eps) * weight + bias, with the biased variance (divide by n)
    centered = ops.sub(x, ops.div(ops.sum(x, dims, True), n))
    variance = ops.div(ops.sum(ops.mul(centered, centered), dims, True), n)
    y = ops.mul(centered, ops.rsqrt(ops.add(variance, eps)))
    if weight is not None:
        y = ops.mul(y, weight)
    if bias is not None:
        y = ops.add(y, bias)
    return y
