"""Scatters: ops that write values at positions a user gives, each one `store_at(base, position,
values, combine)` into a copy of x (ir/scatter.py). The positions are flat offsets into x, a
formula of the values' coordinates (`coordinate`) with the user's index in one dim (scatter,
index_add, index_copy) or in the first few (index_put, put): pointwise, so they and the values
are computed in the kernel that scatters, as a gather's indices are in the kernel that loads.

The user's indices pass through `check_indices` first, as a gather's do: eager raises on one out of
range, and a compiled kernel must never write outside x. index_put and put count negative indices
from the end, as eager does; scatter, index_add and index_copy do not accept them.

masked_scatter is a gather instead: element p of x takes source's k-th element, where k counts the
Trues of the mask before p (a cumsum), so it needs no atomics.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from minicompiler.decompose.dims import wrap_dim
from minicompiler.decompose.gathers import coordinates, ravel, unravel
from minicompiler.decompose.table import GraphOps, register_decomposition
from minicompiler.ir import Node
from minicompiler.ir.symbolic_shapes import broadcast

COMBINE = {"sum": "add", "amax": "amax", "amin": "amin", "mean": "add"}


def _store(ops: GraphOps, x: Node, position: Node, values: Any, combine: str, fresh: bool = False) -> Node:
    """store_at into a copy of x (whose memory the scatter then writes: fuse/buffers.py); a `fresh`
    x, made for this scatter and read by nothing else, is written itself."""
    if math.prod(broadcast([a.meta.shape for a in (position, values) if isinstance(a, Node)])) == 0:
        return x if fresh else ops.clone(x)  # nothing to write
    return ops.store_at(x if fresh else ops.clone(x), position, values, combine)


def _along(ops: GraphOps, x: Node, shape: Sequence[Any], dim: int, index: Node) -> Node:
    """Flat positions in x of the elements of `shape` (the values'): their own coordinates, but
    `index` (broadcast to `shape`) along `dim`."""
    coords = coordinates(ops, shape, x.meta.device)
    coords[dim] = index
    return ravel(ops, coords, x.meta.shape)


def _identity(reduce: str, dtype: torch.dtype) -> bool | int | float:
    """What a position holds before the first value combines into it (include_self=False)."""
    if reduce in ("sum", "mean"):
        return 0
    info = torch.finfo(dtype) if dtype.is_floating_point else torch.iinfo(dtype)
    low, high = (-math.inf, math.inf) if dtype.is_floating_point else (info.min, info.max)
    return low if reduce == "amax" else high


def _as_rows(ops: GraphOps, *tensors: Any) -> list[Any]:
    """0-d tensors as 1-element rows (scatter's dim 0 of a 0-d x is its one element)."""
    return [ops.reshape(t, (1,)) if isinstance(t, Node) and t.meta.ndim == 0 else t for t in tensors]


@register_decomposition("scatter")
def scatter(ops: GraphOps, x: Node, dim: int, index: Node, src: Any) -> Node:
    # out = x, then out[.., index[p], ..] = src[p] along dim, for each element p of index
    if x.meta.ndim == 0:
        return ops.reshape(scatter(ops, *_as_rows(ops, x), 0, *_as_rows(ops, index, src)), ())
    dim = wrap_dim(dim, x.meta.ndim)
    position = _along(ops, x, index.meta.shape, dim, ops.check_indices(index, 0, x.meta.shape[dim]))
    return _store(ops, x, position, _values(ops, src, index), "replace")


def _values(ops: GraphOps, src: Any, index: Node) -> Any:
    """src's elements at index's coordinates (src may be larger than index along any dim)."""
    if not isinstance(src, Node) or src.meta.shape == index.meta.shape or index.meta.numel == 0:
        return src
    return ops.load_at(src, tuple(coordinates(ops, index.meta.shape, src.meta.device)))


@register_decomposition("scatter_reduce")
def scatter_reduce(ops: GraphOps, x: Node, dim: int, index: Node, src: Node, reduce: str,
                   include_self: bool = True) -> Node:
    # out = x, with each src[p] combined into out[.., index[p], ..] by reduce (sum, amax, amin, mean);
    # include_self=False: the positions written start from the values alone, as if x held reduce's identity
    if x.meta.ndim == 0:
        return ops.reshape(scatter_reduce(ops, *_as_rows(ops, x), 0, *_as_rows(ops, index, src), reduce,
                                          include_self), ())
    dim = wrap_dim(dim, x.meta.ndim)
    position = _along(ops, x, index.meta.shape, dim, ops.check_indices(index, 0, x.meta.shape[dim]))
    base = x if include_self else _store(ops, x, position, _identity(reduce, x.meta.dtype), "replace")
    total = _store(ops, base, position, _values(ops, src, index), COMBINE[reduce], fresh=not include_self)
    if reduce != "mean":
        return total
    # the sum over how many were summed there (x counting as one, if included); 0 means none written
    ones = ops.full(x.meta.shape, int(include_self), x.meta.dtype, x.meta.device)
    count = _store(ops, ones, position, 1, "add", fresh=True)
    return ops.div(total, ops.maximum(count, 1))


def _index_position(ops: GraphOps, x: Node, dim: int, index: Node, source: Node) -> Node:
    """Where source's elements go in x: their own coordinates, but index[i] for coordinate i along dim."""
    dim = wrap_dim(dim, x.meta.ndim)
    checked = ops.check_indices(index, 0, x.meta.shape[dim])
    along = ops.reshape(checked, tuple(n if d == dim else 1 for d, n in enumerate(source.meta.shape)))
    return _along(ops, x, source.meta.shape, dim, along)


@register_decomposition("index_add")
def index_add(ops: GraphOps, x: Node, dim: int, index: Node, source: Node, alpha: Any = 1) -> Node:
    # out = x, then out[.., index[i], ..] += alpha * source[.., i, ..] along dim
    if x.meta.ndim == 0:
        return ops.reshape(index_add(ops, *_as_rows(ops, x), 0, *_as_rows(ops, index, source), alpha), ())
    values = source if alpha == 1 else ops.mul(source, alpha)
    return _store(ops, x, _index_position(ops, x, dim, index, source), values, "add")


@register_decomposition("index_copy")
def index_copy(ops: GraphOps, x: Node, dim: int, index: Node, source: Node) -> Node:
    # out = x, then out[.., index[i], ..] = source[.., i, ..] along dim
    if x.meta.ndim == 0:
        return ops.reshape(index_copy(ops, *_as_rows(ops, x), 0, *_as_rows(ops, index, source)), ())
    return _store(ops, x, _index_position(ops, x, dim, index, source), source, "replace")


def _wrapped_checked(ops: GraphOps, index: Node, size: Any) -> Node:
    """A user's index into a dim of `size`, checked to be in [-size, size), negatives counted from the end."""
    checked = ops.check_indices(index, -size, size)
    return ops.where(ops.lt(checked, 0), ops.add(checked, size), checked)


@register_decomposition("index_put")
def index_put(ops: GraphOps, x: Node, indices: Sequence[Node], values: Any, accumulate: bool = False) -> Node:
    # out = x, then out[i0[p], i1[p], .., :, ..] = values (+= with accumulate): the index tensors,
    # broadcast together, pick x's first len(indices) dims; x's other dims are taken whole
    lead = broadcast([i.meta.shape for i in indices])
    shape = (*lead, *x.meta.shape[len(indices):])
    coords = coordinates(ops, shape, x.meta.device)
    spread = (1,) * (len(shape) - len(lead))  # an index reaches its element across the whole dims
    picked = [ops.reshape(_wrapped_checked(ops, i, n), (*(1,) * (len(lead) - i.meta.ndim), *i.meta.shape, *spread))
              for i, n in zip(indices, x.meta.shape, strict=False)]
    position = ravel(ops, picked + coords[len(lead):], x.meta.shape)
    if isinstance(values, Node) and values.meta.ndim > len(shape):  # leading 1s beyond the result's rank
        values = ops.reshape(values, values.meta.shape[values.meta.ndim - len(shape):])
    return _store(ops, x, position, values, "add" if accumulate else "replace")


@register_decomposition("put")
def put(ops: GraphOps, x: Node, index: Node, source: Node, accumulate: bool = False) -> Node:
    # x as one flat row: out.flat[index[p]] = source.flat[p] (+= with accumulate)
    numel = x.meta.numel
    position = _wrapped_checked(ops, index, numel)
    values = source if source.meta.shape == index.meta.shape else ops.reshape(source, index.meta.shape)
    if x.meta.ndim == 0:
        return ops.reshape(_store(ops, ops.reshape(x, (1,)), position, values, "add" if accumulate else "replace"), ())
    return _store(ops, x, position, values, "add" if accumulate else "replace")


@register_decomposition("masked_scatter")
def masked_scatter(ops: GraphOps, x: Node, mask: Node, source: Node) -> Node:
    # out[p] = source.flat[k] where mask[p] is the k-th True (counted row-major), x[p] elsewhere
    shape = broadcast([x.meta.shape, mask.meta.shape])
    counts = ops.convert(ops.expand(mask, shape) if mask.meta.shape != shape else mask, torch.int64)
    flat = ops.reshape(counts, (math.prod(shape),))
    taken = ops.reshape(ops.cumsum(flat, 0), shape)  # how many Trues up to and including p
    at = ops.check_indices(ops.where(mask, ops.sub(taken, 1), 0), 0, source.meta.numel)
    picked = ops.load_at(source, tuple(unravel(ops, at, source.meta.shape))) if source.meta.ndim else source
    return ops.where(mask, ops.convert(picked, x.meta.dtype), x)
