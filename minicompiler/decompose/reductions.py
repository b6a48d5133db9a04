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


for _op in ("sum", "amax", "amin", "prod", "argmax", "argmin"):
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
    # sum((x - mean(x))^2) / (n - correction); two passes, as torch, for accuracy. The mean is
    # detached: its gradient would be multiplied by sum(x - mean(x)), which is 0, so the gradient
    # is 2 * (x - mean) / (n - correction) either way (torch's var_backward); autograd would spend
    # a reduction pass in the backward on that 0 (one more per batch norm, layer norm, std).
    centered = ops.sub(x, ops.detach(ops.div(ops.sum(x, dims, True), n)))
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


# -- reductions written with sum / amax / amin -----------------------------------------------
@register_decomposition("logsumexp", upcast=True)
def logsumexp(ops: GraphOps, x: Node, dims: Dims = None, keepdim: bool = False) -> Node:
    if not x.meta.dtype.is_floating_point:
        x = ops.convert(x, torch.get_default_dtype())
    dims = reduction_dims(dims, x.meta.ndim)
    if _count(x, dims) == 0:  # log(0) = -inf, as torch (amax of nothing would raise)
        return ops.add(ops.sum(x, dims, keepdim), -math.inf)
    # max + log(sum(exp(x - max))); an infinite max is not subtracted (inf - inf is NaN)
    def finite_max(keep: bool) -> Node:
        largest = ops.amax(x, dims, keep)
        return ops.where(ops.eq(ops.abs(largest), math.inf), 0.0, largest)

    summed = ops.sum(ops.exp(ops.sub(x, finite_max(True))), dims, keepdim)
    return ops.add(ops.log(summed), finite_max(keepdim))


@register_decomposition("vector_norm", upcast=True)
def vector_norm(ops: GraphOps, x: Node, ord: float = 2, dims: Dims = None, keepdim: bool = False) -> Node:
    dims = reduction_dims(dims, x.meta.ndim)
    size = ops.abs(x)
    if ord == math.inf:
        return ops.amax(size, dims, keepdim)
    if ord == -math.inf:
        return ops.amin(size, dims, keepdim)
    if ord == 0:  # how many are not zero
        return ops.sum(ops.convert(ops.ne(x, 0), x.meta.dtype), dims, keepdim)
    if ord == 1:
        return ops.sum(size, dims, keepdim)
    if ord == 2:  # sqrt(sum(x^2))
        return ops.sqrt(ops.sum(ops.mul(x, x), dims, keepdim))
    # (sum |x|^p)^(1/p)
    return ops.pow(ops.sum(ops.pow(size, ord), dims, keepdim), 1.0 / ord)


def _count_where(ops: GraphOps, condition: Node, dims: Dims, keepdim: bool) -> Node:
    """How many elements along `dims` satisfy `condition` (an int64 count)."""
    return ops.sum(ops.convert(condition, torch.int64), reduction_dims(dims, condition.meta.ndim), keepdim)


@register_decomposition("count_nonzero")
def count_nonzero(ops: GraphOps, x: Node, dims: Dims = None) -> Node:
    return _count_where(ops, ops.ne(x, 0), dims, False)


@register_decomposition("any")
def any_(ops: GraphOps, x: Node, dims: Dims = None, keepdim: bool = False) -> Node:
    # some element is not 0 (uint8 in, uint8 out: torch's old rule)
    found = ops.gt(_count_where(ops, ops.ne(x, 0), dims, keepdim), 0)
    return ops.convert(found, torch.uint8) if x.meta.dtype == torch.uint8 else found


@register_decomposition("all")
def all_(ops: GraphOps, x: Node, dims: Dims = None, keepdim: bool = False) -> Node:
    # no element is 0
    found = ops.eq(_count_where(ops, ops.eq(x, 0), dims, keepdim), 0)
    return ops.convert(found, torch.uint8) if x.meta.dtype == torch.uint8 else found


@register_decomposition("nansum", upcast=True)
def nansum(ops: GraphOps, x: Node, dims: Dims = None, keepdim: bool = False) -> Node:
    # sum with NaNs counted as 0
    values = ops.where(ops.ne(x, x), 0.0, x) if x.meta.dtype.is_floating_point else x
    return ops.sum(values, reduction_dims(dims, x.meta.ndim), keepdim)
