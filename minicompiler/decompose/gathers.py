"""Gathers: ops whose output element p reads its input at another position than p.

Each is written as one `load_at(x, indices)`: for every dim of x, an integer tensor (a formula of
the output's coordinates, `coordinate` below) saying where to read. flip reads at n-1-i, roll at
(i - shift) mod n, repeat at i mod n, a reflect pad at a reflection of i - pad, cat at i - start
from the input that i falls in. The formulas are pointwise, so they fuse with the load and with
whatever reads the result: flip(x) * 2 is one kernel, as TorchInductor writes it.

Indices a user gives (gather, index_select, take, embedding) pass through `check_indices` first:
eager raises IndexError on one out of range, and a compiled kernel must never read outside x.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import torch

from minicompiler.decompose.dims import wrap_dim
from minicompiler.decompose.table import GraphOps, register_decomposition
from minicompiler.ir import Node, infer_meta

MAX_CAT_INPUTS = 8  # a cat of more tensors stays one library call: each element would test them all


def coordinate(ops: GraphOps, shape: Sequence[Any], dim: int, device: torch.device) -> Node:
    """Each element's index along `dim`, as an int64 tensor of the whole `shape` (so the formulas
    built on it have the output's shape, and fuse into the output's kernel)."""
    one_hot = tuple(size if d == dim else 1 for d, size in enumerate(shape))
    index = ops.iota(one_hot, dim, torch.int64, device)
    return index if one_hot == tuple(shape) else ops.add(index, ops.full(tuple(shape), 0, torch.int64, device))


def coordinates(ops: GraphOps, shape: Sequence[Any], device: torch.device) -> list[Node]:
    return [coordinate(ops, shape, d, device) for d in range(len(shape))]


def clamp(ops: GraphOps, index: Node, low: Any, high: Any) -> Node:
    """index limited to [low, high]: a position that is read but not used stays inside x."""
    return ops.maximum(ops.minimum(index, high), low)


def exact_quotient(ops: GraphOps, a: Node, b: Any) -> Node:
    """a // b for a >= 0, b > 0 (an index): a - a mod b is a multiple of b, divided exactly in
    float64 (integers below 2**53 are exact there; the op table has no integer division)."""
    whole = ops.convert(ops.sub(a, ops.remainder(a, b)), torch.float64)
    return ops.convert(ops.div(whole, b), torch.int64)


def unravel(ops: GraphOps, flat: Node, shape: Sequence[Any]) -> list[Node]:
    """The coordinates, in a contiguous tensor of `shape`, of element number `flat`."""
    indices, stride = [], 1
    for size in reversed(shape):
        along = flat if stride == 1 else exact_quotient(ops, flat, stride)
        indices.append(ops.remainder(along, size) if size != 1 else ops.mul(flat, 0))
        stride = stride * size
    return indices[::-1]


def ravel(ops: GraphOps, indices: Sequence[Node], shape: Sequence[Any]) -> Node:
    """Element number of `indices` in a contiguous tensor of `shape` (unravel's inverse)."""
    flat, stride = None, 1
    for index, size in zip(reversed(indices), reversed(shape), strict=True):
        term = index if stride == 1 else ops.mul(index, stride)
        flat = term if flat is None else ops.add(flat, term)
        stride = stride * size
    return flat


# --- reordering: flip, roll, repeat ------------------------------------------------------
@register_decomposition("flip")
def flip(ops: GraphOps, x: Node, dims: Sequence[int]) -> Node:
    flipped = {wrap_dim(d, x.meta.ndim) for d in dims}
    index = coordinates(ops, x.meta.shape, x.meta.device)
    return ops.load_at(x, tuple(ops.sub(n - 1, i) if d in flipped else i  # x[n-1-i]
                                for d, (n, i) in enumerate(zip(x.meta.shape, index, strict=True))))


@register_decomposition("roll")
def roll(ops: GraphOps, x: Node, shifts: Sequence[int], dims: Sequence[int]) -> Node:
    shape, device = x.meta.shape, x.meta.device
    if math.prod(shape) == 0 or not shape:  # nothing to move
        return ops.clone(x)
    if not dims:  # rolled as one flat row, then laid back into x's shape
        numel = math.prod(shape)
        flat = ravel(ops, coordinates(ops, shape, device), shape)
        source = ops.remainder(ops.add(flat, numel - shifts[0] % numel), numel)
        return ops.load_at(x, tuple(unravel(ops, source, shape)))
    index = coordinates(ops, shape, device)
    for shift, dim in zip(shifts, dims, strict=True):
        d = wrap_dim(dim, x.meta.ndim)
        if shape[d] != 1:  # x[(i - shift) mod n], kept non-negative
            index[d] = ops.remainder(ops.add(index[d], shape[d] - shift % shape[d]), shape[d])
    return ops.load_at(x, tuple(index))


@register_decomposition("repeat")
def repeat(ops: GraphOps, x: Node, repeats: Sequence[int]) -> Node:
    # x (padded with leading 1s to len(repeats) dims) tiled: out[i] = x[i mod n]
    shape = (1,) * (len(repeats) - x.meta.ndim) + tuple(x.meta.shape)
    out_shape = tuple(n * r for n, r in zip(shape, repeats, strict=True))
    if math.prod(out_shape) == 0:
        return ops.full(out_shape, 0, x.meta.dtype, x.meta.device)  # empty: nothing to read
    index = coordinates(ops, out_shape, x.meta.device)
    source = ops.reshape(x, shape) if shape != tuple(x.meta.shape) else x
    return ops.load_at(source, tuple(i if r == 1 else ops.remainder(i, n)
                                     for i, n, r in zip(index, shape, repeats, strict=True)))


# --- padding -----------------------------------------------------------------------------
def _pad_source(ops: GraphOps, out: Node, n: Any, before: int, after: int, mode: str) -> Node:
    """Where output element `out` of a dim padded by (before, after) reads x, n long along it."""
    if mode == "circular":  # ... n-1 | 0 1 ... n-1 | 0 ...; a negative pad crops x first
        first, kept = max(-before, 0), n - max(-before, 0) - max(-after, 0)
        return ops.add(ops.remainder(ops.sub(out, max(before, 0)), kept), first)
    i = ops.sub(out, before)  # counted from x's first element
    if mode == "reflect":  # ... 2 1 | 0 1 2 ... n-1 | n-2 ...
        return ops.sub(n - 1, ops.abs(ops.sub(n - 1, ops.abs(i))))
    return clamp(ops, i, 0, n - 1)  # replicate (and constant, where the value is not used)


@register_decomposition("pad")
def pad(ops: GraphOps, x: Node, pad: Sequence[int], mode: str = "constant", value: Any = None) -> Node:
    # pad = (before, after) for the last dim, then for the one before it, ...
    shape, device = list(x.meta.shape), x.meta.device
    out_shape = list(shape)
    for k in range(len(pad) // 2):
        out_shape[-1 - k] += pad[2 * k] + pad[2 * k + 1]
    index = coordinates(ops, out_shape, device)
    inside = None
    for k in range(len(pad) // 2):
        d = len(shape) - 1 - k
        if shape[d] == 0:  # nothing to read: every element is the value
            return ops.full(tuple(out_shape), 0 if value is None else value, x.meta.dtype, device)
        start = ops.sub(index[d], pad[2 * k])
        index[d] = _pad_source(ops, index[d], shape[d], pad[2 * k], pad[2 * k + 1], mode)
        if mode == "constant":
            within = ops.logical_and(ops.ge(start, 0), ops.lt(start, shape[d]))
            inside = within if inside is None else ops.logical_and(inside, within)
    loaded = ops.load_at(x, tuple(index))
    if inside is None:
        return loaded
    return ops.convert(ops.where(inside, loaded, 0 if value is None else value), x.meta.dtype)


# --- joining -----------------------------------------------------------------------------
@register_decomposition("cat")
def cat(ops: GraphOps, tensors: Sequence[Node], dim: int = 0) -> Node:
    dim = wrap_dim(dim, tensors[0].meta.ndim)
    parts = [t for t in tensors if t.meta.shape[dim] != 0]
    if len(tensors) > MAX_CAT_INPUTS or not parts or tensors[0].meta.ndim == 0:
        return ops.primitive("cat", tuple(tensors), dim)
    # out[.., i, ..] = tensor k's element i - start_k, for the k whose [start_k, end_k) holds i
    dtype = infer_meta("cat", (tuple(tensors), dim), {}).dtype
    out_shape = list(parts[0].meta.shape)
    out_shape[dim] = sum(t.meta.shape[dim] for t in parts)
    index = coordinates(ops, out_shape, parts[0].meta.device)
    result, end = None, out_shape[dim]
    for t in reversed(parts):
        start = end - t.meta.shape[dim]
        along = clamp(ops, ops.sub(index[dim], start), 0, t.meta.shape[dim] - 1)
        value = ops.convert(ops.load_at(t, tuple(along if d == dim else i for d, i in enumerate(index))), dtype)
        result = value if result is None else ops.where(ops.lt(index[dim], end), value, result)
        end = start
    return result


# --- indices a user gives ----------------------------------------------------------------
@register_decomposition("gather")
def gather(ops: GraphOps, x: Node, dim: int, index: Node) -> Node:
    # out[.., i, ..] = x[.., index[.., i, ..], ..] along dim, out of index's shape
    if x.meta.ndim == 0:  # x as a 1-element row, every index 0
        return _from_one_element(ops, x, ops.check_indices(index, 0, 1))
    dim = wrap_dim(dim, x.meta.ndim)
    checked = ops.check_indices(index, 0, x.meta.shape[dim])
    coords = coordinates(ops, index.meta.shape, x.meta.device)
    return ops.load_at(x, tuple(checked if d == dim else i for d, i in enumerate(coords)))


def _from_one_element(ops: GraphOps, x: Node, checked: Node) -> Node:
    """A 0-d x read at every (checked, so 0 or -1) index: a tensor of the index's shape."""
    return ops.load_at(ops.reshape(x, (1,)), (ops.mul(checked, 0),))


def _wrapped(ops: GraphOps, index: Node, size: Any) -> Node:
    """Negative indices count from the end, as in Python: i + size where i < 0."""
    return ops.where(ops.lt(index, 0), ops.add(index, size), index)


@register_decomposition("index_select")
def index_select(ops: GraphOps, x: Node, dim: int, index: Node) -> Node:
    if x.meta.ndim == 0:  # a 0-d result, as torch's
        return ops.reshape(_from_one_element(ops, x, ops.check_indices(index, 0, 1)), ())
    dim = wrap_dim(dim, x.meta.ndim)
    checked = ops.check_indices(index, 0, x.meta.shape[dim])
    picked = index.meta.numel if index.meta.ndim else 1  # a 0-d index picks one
    out_shape = (*x.meta.shape[:dim], picked, *x.meta.shape[dim + 1:])
    along = ops.reshape(checked, tuple(n if d == dim else 1 for d, n in enumerate(out_shape)))
    coords = coordinates(ops, out_shape, x.meta.device)
    return ops.load_at(x, tuple(along if d == dim else i for d, i in enumerate(coords)))


@register_decomposition("take")
def take(ops: GraphOps, x: Node, index: Node) -> Node:
    # x read as one flat row (negative indices count from its end), out of index's shape
    numel = math.prod(x.meta.shape)
    checked = ops.check_indices(index, -numel, numel)
    if numel == 0:  # only an empty index passes the check: an empty result
        return ops.convert(ops.mul(checked, 0), x.meta.dtype)
    if x.meta.ndim == 0:
        return _from_one_element(ops, x, checked)
    return ops.load_at(x, tuple(unravel(ops, _wrapped(ops, checked, numel), x.meta.shape)))


@register_decomposition("embedding")
def embedding(ops: GraphOps, ids: Node, weight: Node, padding_idx: int | None = None) -> Node:
    # out[.., j] = weight[ids[..], j]; the row at padding_idx is read but gets no gradient, as in torch
    rows, width = weight.meta.shape
    checked = ops.reshape(ops.check_indices(ids, 0, rows), (*ids.meta.shape, 1))
    column = coordinate(ops, (*ids.meta.shape, width), ids.meta.ndim, weight.meta.device)
    vector = ops.load_at(weight, (checked, column))
    if padding_idx is None:
        return vector
    padding = ops.eq(checked, padding_idx % rows)
    return ops.where(padding, ops.detach(ops.load_at(ops.detach(weight), (checked, column))), vector)


# --- diagonals ---------------------------------------------------------------------------
@register_decomposition("diag_embed")
def diag_embed(ops: GraphOps, x: Node, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Node:
    # the last dim of x (n long) laid on a diagonal of two new dims (dim1, dim2) of n + |offset|
    *batch, n = x.meta.shape
    ndim = x.meta.ndim + 1
    dim1, dim2 = wrap_dim(dim1, ndim), wrap_dim(dim2, ndim)
    size = n + abs(offset)
    others = iter(batch)
    out_shape = tuple(size if d in (dim1, dim2) else next(others) for d in range(ndim))
    index = coordinates(ops, out_shape, x.meta.device)
    row, column = index[dim1], index[dim2]
    along = clamp(ops, row if offset >= 0 else column, 0, max(n - 1, 0))
    source = [i for d, i in enumerate(index) if d not in (dim1, dim2)] + [along]
    on_diagonal = ops.eq(ops.sub(column, row), offset)
    value = ops.load_at(x, tuple(source)) if n else ops.full(out_shape, 0, x.meta.dtype, x.meta.device)
    return ops.where(on_diagonal, value, False if x.meta.dtype == torch.bool else 0)


@register_decomposition("diagonal_copy")
def diagonal_copy(ops: GraphOps, x: Node, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Node:
    # the elements (i, i + offset) of dims dim1, dim2, as a new last dim
    dim1, dim2 = wrap_dim(dim1, x.meta.ndim), wrap_dim(dim2, x.meta.ndim)
    rows, columns = x.meta.shape[dim1], x.meta.shape[dim2]
    first_row, first_column = max(-offset, 0), max(offset, 0)
    length = max(0, min(rows - first_row, columns - first_column))
    batch = [n for d, n in enumerate(x.meta.shape) if d not in (dim1, dim2)]
    index = coordinates(ops, (*batch, length), x.meta.device)
    along, others = index[-1], iter(index[:-1])
    source = []
    for d in range(x.meta.ndim):
        if d == dim1:
            source.append(ops.add(along, first_row))
        elif d == dim2:
            source.append(ops.add(along, first_column))
        else:
            source.append(next(others))
    return ops.load_at(x, tuple(source))


# --- writing src into part of x: the scatters whose positions are a formula ----------------
@register_decomposition("slice_scatter")
def slice_scatter(ops: GraphOps, x: Node, src: Node, dim: int = 0, start: int | None = None,
                  end: int | None = None, step: int = 1) -> Node:
    # out = x, with out[.., start:end:step, ..] = src
    dim = wrap_dim(dim, x.meta.ndim)
    start, end, step = slice(start, end, step).indices(x.meta.shape[dim])
    index = coordinates(ops, x.meta.shape, x.meta.device)
    offset = ops.sub(index[dim], start)
    inside = ops.logical_and(ops.logical_and(ops.ge(offset, 0), ops.lt(index[dim], max(end, start))),
                             ops.eq(ops.remainder(offset, step), 0))
    along = clamp(ops, exact_quotient(ops, ops.maximum(offset, 0), step) if step != 1 else offset, 0,
                  max(src.meta.shape[dim] - 1, 0))
    if src.meta.numel == 0:
        return ops.clone(x)
    value = ops.load_at(src, tuple(along if d == dim else i for d, i in enumerate(index)))
    return ops.where(inside, ops.convert(value, x.meta.dtype), x)


@register_decomposition("diagonal_scatter")
def diagonal_scatter(ops: GraphOps, x: Node, src: Node, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Node:
    # out = x, with its diagonal (i, i + offset) of dims dim1, dim2 = src (whose last dim runs along it)
    dim1, dim2 = wrap_dim(dim1, x.meta.ndim), wrap_dim(dim2, x.meta.ndim)
    if src.meta.numel == 0:
        return ops.clone(x)
    index = coordinates(ops, x.meta.shape, x.meta.device)
    row, column = index[dim1], index[dim2]
    along = clamp(ops, ops.sub(row, max(-offset, 0)), 0, src.meta.shape[-1] - 1)
    source = [i for d, i in enumerate(index) if d not in (dim1, dim2)] + [along]
    on_diagonal = ops.eq(ops.sub(column, row), offset)
    return ops.where(on_diagonal, ops.convert(ops.load_at(src, tuple(source)), x.meta.dtype), x)


@register_decomposition("block_diag")
def block_diag(ops: GraphOps, *tensors: Node) -> Node:
    # each tensor (as a matrix) placed down the diagonal, zeros elsewhere: a cat along both dims
    dtype = infer_meta("block_diag", tensors, {}).dtype
    blocks = [t if t.meta.ndim == 2 else ops.reshape(t, (1, t.meta.numel)) for t in tensors]
    shape = (sum(b.meta.shape[0] for b in blocks), sum(b.meta.shape[1] for b in blocks))
    row, column = coordinates(ops, shape, tensors[0].meta.device)
    result: Any = ops.full(shape, 0, dtype, tensors[0].meta.device)
    top = left = 0
    for b in blocks:
        rows, columns = b.meta.shape
        if rows and columns:
            r, c = ops.sub(row, top), ops.sub(column, left)
            inside = ops.logical_and(ops.logical_and(ops.ge(r, 0), ops.lt(r, rows)),
                                     ops.logical_and(ops.ge(c, 0), ops.lt(c, columns)))
            value = ops.load_at(b, (clamp(ops, r, 0, rows - 1), clamp(ops, c, 0, columns - 1)))
            result = ops.where(inside, ops.convert(value, dtype), result)
        top, left = top + rows, left + columns
    return result


@register_decomposition("cartesian_prod")
def cartesian_prod(ops: GraphOps, *tensors: Node) -> Node:
    # row p: (t0[i0], t1[i1], ...) for the p-th combination (i0, i1, ...), the last index fastest
    dtype = infer_meta("cartesian_prod", tensors, {}).dtype
    sizes = [t.meta.numel for t in tensors]
    shape = (math.prod(sizes), len(tensors))
    row, column = coordinates(ops, shape, tensors[0].meta.device)
    if shape[0] == 0:
        return ops.full(shape, 0, dtype, tensors[0].meta.device)
    combination = unravel(ops, row, sizes)
    result: Any = None
    for k, (t, i) in enumerate(zip(tensors, combination, strict=True)):
        value = ops.convert(ops.load_at(t, (i,)), dtype)
        result = value if result is None else ops.where(ops.eq(column, k), value, result)
    return result


@register_decomposition("index_fill")
def index_fill(ops: GraphOps, x: Node, dim: int, index: Node, value: Any) -> Node:
    # value where x's coordinate along dim is one of the indices (a test against each: any)
    dim = wrap_dim(dim, x.meta.ndim)
    n = x.meta.shape[dim]
    wanted = _wrapped(ops, ops.check_indices(index, -n, n), n)
    picks = index.meta.numel
    along = ops.reshape(coordinate(ops, x.meta.shape, dim, x.meta.device), (*x.meta.shape, 1))
    hit = ops.any(ops.eq(along, ops.reshape(wanted, (1,) * x.meta.ndim + (picks,))), (x.meta.ndim,))
    return ops.where(hit, _filler(ops, value, x), x)


def _filler(ops: GraphOps, value: Any, x: Node) -> Any:
    return ops.convert(value, x.meta.dtype) if isinstance(value, Node) else value
