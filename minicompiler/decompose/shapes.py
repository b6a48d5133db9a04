"""Shape ops: every torch-level way of moving dims around becomes permute, reshape or slice,
and the view primitives get explicit arguments (no negative dims, no -1 sizes, no None)."""

from __future__ import annotations

from collections.abc import Sequence

from minicompiler.decompose.dims import wrap_dim
from minicompiler.decompose.table import GraphOps, register_decomposition
from minicompiler.ir import Node
from minicompiler.ir.symbolic import is_symbolic
from minicompiler.ir.symbolic_shapes import expand_target, reshape_target, slice_bounds


# -- the view primitives and cat: canonical arguments -----------------------------------------
@register_decomposition("permute")
def permute(ops: GraphOps, x: Node, dims: Sequence[int]) -> Node:
    # permute(x, (-1, 0)) -> permute(x, (1, 0))
    return ops.primitive("permute", x, tuple(wrap_dim(d, x.meta.ndim) for d in dims))


@register_decomposition("reshape")
def reshape(ops: GraphOps, x: Node, shape: Sequence[int]) -> Node:
    # reshape(x, (-1, 4)) -> reshape(x, (6, 4)); torch works out the -1
    if is_symbolic(x.meta.shape) or is_symbolic(shape):
        return ops.primitive("reshape", x, reshape_target(x.meta.shape, tuple(shape)))
    return ops.primitive("reshape", x, tuple(x.meta.fake().reshape(shape).shape))


@register_decomposition("expand")
def expand(ops: GraphOps, x: Node, shape: Sequence[int]) -> Node:
    # expand(x, (-1, 5)) -> expand(x, (3, 5)); -1 keeps a size
    if is_symbolic(x.meta.shape) or is_symbolic(shape):
        return ops.primitive("expand", x, expand_target(x.meta.shape, tuple(shape)))
    return ops.primitive("expand", x, tuple(x.meta.fake().expand(shape).shape))


@register_decomposition("slice")
def slice_(ops: GraphOps, x: Node, dim: int, start: int | None, end: int | None, step: int = 1) -> Node:
    # x[-3:] -> slice(x, dim, size-3, size, 1): Python's rules for None, negative and too-large bounds
    dim = wrap_dim(dim, x.meta.ndim)
    start, end, step = slice_bounds(slice(start, end, step), x.meta.shape[dim])
    return ops.primitive("slice", x, dim, start, max(start, end), step)


# -- composites ------------------------------------------------------------------------------
@register_decomposition("transpose")
def transpose(ops: GraphOps, x: Node, dim0: int, dim1: int) -> Node:
    # transpose(x, 0, 2) -> permute(x, (2, 1, 0))
    a, b = wrap_dim(dim0, x.meta.ndim), wrap_dim(dim1, x.meta.ndim)
    return ops.permute(x, tuple(b if d == a else a if d == b else d for d in range(x.meta.ndim)))


@register_decomposition("unsqueeze")
def unsqueeze(ops: GraphOps, x: Node, dim: int) -> Node:
    # unsqueeze(x[3, 4], 1) -> reshape(x, (3, 1, 4))
    shape = list(x.meta.shape)
    shape.insert(wrap_dim(dim, len(shape) + 1), 1)
    return ops.reshape(x, tuple(shape))


@register_decomposition("squeeze")
def squeeze(ops: GraphOps, x: Node, dims: int | Sequence[int] | None = None) -> Node:
    # squeeze(x[3, 1, 4]) -> reshape(x, (3, 4)); only size-1 dims go
    ndim = x.meta.ndim
    if dims is None:
        dims = range(ndim)
    elif isinstance(dims, int):
        dims = (dims,)
    dropped = {wrap_dim(d, ndim) for d in dims}
    return ops.reshape(x, tuple(s for d, s in enumerate(x.meta.shape) if not (d in dropped and s == 1)))


@register_decomposition("select")
def select(ops: GraphOps, x: Node, dim: int, index: int) -> Node:
    # x[:, i] -> slice(x, 1, i, i+1) then reshape the size-1 dim away
    dim = wrap_dim(dim, x.meta.ndim)
    if index < 0:  # the meta check already rejected out-of-range indices
        index = index + x.meta.shape[dim]
    row = ops.slice(x, dim, index, index + 1, 1)
    return ops.reshape(row, x.meta.shape[:dim] + x.meta.shape[dim + 1 :])


@register_decomposition("contiguous")
def contiguous(ops: GraphOps, x: Node) -> Node:
    # x itself where it is dense already (as eager's), else a fresh dense copy
    return x if x.meta.is_contiguous() else ops.clone(x)
