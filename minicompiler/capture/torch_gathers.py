"""torch functions that read their input at other positions than the element they write: flip,
roll, rot90, repeat/tile, pad, the stacks, gather/index_select/take/take_along_dim, embedding,
masked_fill, the diagonals, and the `*_copy` twins of the views. Each becomes one graph op (or a
few views around one), which decompose/gathers.py writes as a `load_at` kernel.

Forms these lowerings do not cover (complex numbers, embedding's max_norm, which renormalizes the
weight in place) stay whole: an extern call, run by torch.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from minicompiler.capture.errors import Unsupported
from minicompiler.capture.torch_ops import TENSOR_METHODS, extern, lowers, norm_dim
from minicompiler.capture.torch_views import at_least, cat, index, select, slice_dim, spelled_out
from minicompiler.ir import Graph, Node
from minicompiler.ir.symbolic_shapes import slice_bounds


def _ints(values: Any) -> tuple[int, ...]:
    """A dims/sizes argument as a tuple: 0, (0, 1) and [0, 1] all allowed, as torch's."""
    return (values,) if isinstance(values, int) else tuple(values)


def _complex(x: Any) -> bool:
    return isinstance(x, Node) and x.meta.dtype.is_complex


def _varargs(values: tuple[Any, ...]) -> tuple[int, ...]:
    """x.repeat(2, 3) and x.repeat((2, 3)) alike."""
    return _ints(values[0]) if len(values) == 1 and not isinstance(values[0], int) else _ints(values)


# --- reordering --------------------------------------------------------------------------
@lowers(torch.flip, methods=["flip"])
def flip(g: Graph, x: Node, *dims: Any, **kwargs: Any) -> Node:
    dims = _ints(kwargs["dims"]) if "dims" in kwargs else _varargs(dims)
    return extern(g, torch.flip, x, dims) if _complex(x) else g.call("flip", x, dims)


lowers(torch.fliplr, methods=["fliplr"])(lambda g, x: flip(g, x, (1,)))
lowers(torch.flipud, methods=["flipud"])(lambda g, x: flip(g, x, (0,)))


@lowers(torch.roll, methods=["roll"])
def roll(g: Graph, x: Node, shifts: Any, dims: Any = None) -> Node:
    shifts, dims = _ints(shifts), () if dims is None else _ints(dims)
    if _complex(x) or (dims and len(shifts) != len(dims)) or (not dims and len(shifts) != 1):
        return extern(g, torch.roll, x, shifts, dims)  # (torch explains a mismatch)
    return g.call("roll", x, shifts, dims)


@lowers(torch.rot90, methods=["rot90"])
def rot90(g: Graph, x: Node, k: int = 1, dims: Sequence[int] = (0, 1)) -> Node:
    # as torch writes it: a flip, then a transpose (a view of the flipped copy)
    if _complex(x) or len(dims) != 2 or x.meta.ndim < 2:
        return extern(g, torch.rot90, x, k, dims)
    first, second = (norm_dim(d, x.meta.ndim) for d in dims)
    k %= 4
    if k == 0:
        return g.call("clone", x)
    if k == 2:
        return flip(g, x, (first, second))
    flipped = flip(g, x, (second,) if k == 1 else (first,))
    return g.call("transpose", flipped, first, second)


@lowers(methods=["repeat"])
def repeat(g: Graph, x: Node, *repeats: Any) -> Node:
    repeats = _varargs(repeats)
    return extern(g, torch.Tensor.repeat, x, repeats) if _complex(x) else g.call("repeat", x, repeats)


@lowers(torch.tile, methods=["tile"])
def tile(g: Graph, x: Node, *dims: Any) -> Node:
    dims = _varargs(dims)
    return repeat(g, x, (1,) * (x.meta.ndim - len(dims)) + dims)  # fewer dims than x: 1s in front


# --- padding -----------------------------------------------------------------------------
@lowers(F.pad, torch._C._nn.pad)
def pad(g: Graph, x: Node, pad: Sequence[int], mode: str = "constant", value: float | None = None) -> Node:
    if _complex(x) or mode not in ("constant", "reflect", "replicate", "circular") or len(pad) % 2:
        return extern(g, F.pad, x, pad, mode, value)
    return g.call("pad", x, _ints(pad), mode, value)


lowers(torch.constant_pad_nd)(lambda g, x, pad_, value=0: pad(g, x, pad_, "constant", value))


# --- stacking ----------------------------------------------------------------------------
def _at_least(g: Graph, tensors: Sequence[Node], ndim: int) -> list[Node]:
    return list(at_least(ndim)(g, list(tensors)))  # torch.atleast_{ndim}d of each


lowers(torch.hstack)(lambda g, tensors: cat(g, _at_least(g, tensors, 1),
                                             0 if all(t.meta.ndim <= 1 for t in tensors) else 1))
lowers(torch.vstack, torch.row_stack)(lambda g, tensors: cat(g, _at_least(g, tensors, 2), 0))
lowers(torch.dstack)(lambda g, tensors: cat(g, _at_least(g, tensors, 3), 2))


@lowers(torch.column_stack)
def column_stack(g: Graph, tensors: Sequence[Node]) -> Node:
    # 0-d and 1-d tensors become columns, (n,) -> (n, 1)
    columns = [g.call("reshape", t, (t.meta.numel, 1)) if t.meta.ndim <= 1 else t for t in tensors]
    return cat(g, columns, 1)


def _flattened(g: Graph, x: Node) -> Node:
    # a copy first: x may be a view whose elements no one flat view can reach (x.t()); capture does
    # not know strides yet, and the copy fuses with what reads it only through memory (one pass)
    return g.call("reshape", g.call("clone", x), (x.meta.numel,))


# --- indices a user gives ----------------------------------------------------------------
@lowers(torch.gather, methods=["gather"])
def gather(g: Graph, x: Node, dim: int, index: Node, *, sparse_grad: bool = False) -> Node:
    if _complex(x) or sparse_grad or (x.meta.ndim and index.meta.ndim != x.meta.ndim):
        return extern(g, torch.gather, x, dim, index, sparse_grad=sparse_grad)
    return g.call("gather", x, dim, index)


@lowers(torch.index_select, methods=["index_select"])
def index_select(g: Graph, x: Node, dim: int, index: Node) -> Node:
    if _complex(x):
        return extern(g, torch.index_select, x, dim, index)
    return g.call("index_select", x, dim, index)


@lowers(torch.take, methods=["take"])
def take(g: Graph, x: Node, index: Node) -> Node:
    return extern(g, torch.take, x, index) if _complex(x) else g.call("take", x, index)


@lowers(torch.take_along_dim, methods=["take_along_dim"])
def take_along_dim(g: Graph, x: Node, indices: Node, dim: int | None = None) -> Node:
    if _complex(x):
        return extern(g, torch.take_along_dim, x, indices, dim)
    if dim is None:  # along x read as one flat row
        flat = _flattened(g, x)
        return gather(g, flat, 0, g.call("reshape", indices, (indices.meta.numel,)))
    # x and indices broadcast against each other, except along dim; negative indices count from the end
    d = norm_dim(dim, x.meta.ndim)
    indices = g.call("where", g.call("lt", indices, 0), g.call("add", indices, x.meta.shape[d]), indices)
    shape = torch.broadcast_shapes(*[tuple(1 if i == d else n for i, n in enumerate(t.meta.shape))
                                     for t in (x, indices)])
    widened = [g.call("expand", t, tuple(t.meta.shape[i] if i == d else n for i, n in enumerate(shape)))
               for t in (x, indices)]
    return gather(g, widened[0], d, widened[1])


@lowers(F.embedding)
def embedding(g: Graph, ids: Node, weight: Node, padding_idx: int | None = None, max_norm: float | None = None,
              norm_type: float = 2.0, scale_grad_by_freq: bool = False, sparse: bool = False) -> Node:
    if max_norm is not None or scale_grad_by_freq or sparse or _complex(weight) or weight.meta.ndim != 2:
        return extern(g, F.embedding, ids, weight, padding_idx, max_norm, norm_type, scale_grad_by_freq, sparse)
    return g.call("embedding", ids, weight, padding_idx)


@lowers(torch.masked_fill, methods=["masked_fill"])
def masked_fill(g: Graph, x: Node, mask: Node, value: Any) -> Node:
    # the value where mask holds, x elsewhere; x keeps its dtype and shape
    if _complex(x) or (isinstance(value, Node) and value.meta.ndim != 0):
        return extern(g, torch.masked_fill, x, mask, value)
    if isinstance(value, Node):
        value = g.call("convert", value, x.meta.dtype)
    filled = g.call("where", mask, value, x)
    return filled if filled.meta.dtype == x.meta.dtype else g.call("convert", filled, x.meta.dtype)


# --- diagonals ---------------------------------------------------------------------------
@lowers(torch.diag_embed, methods=["diag_embed"])
def diag_embed(g: Graph, x: Node, offset: int = 0, dim1: int = -2, dim2: int = -1) -> Node:
    if _complex(x) or x.meta.ndim == 0:
        return extern(g, torch.diag_embed, x, offset, dim1, dim2)
    return g.call("diag_embed", x, offset, dim1, dim2)


@lowers(torch.diagonal_copy)
def diagonal_copy(g: Graph, x: Node, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Node:
    if _complex(x) or x.meta.ndim < 2:
        return extern(g, torch.diagonal_copy, x, offset, dim1, dim2)
    return g.call("diagonal_copy", x, offset, dim1, dim2)


@lowers(torch.diag, methods=["diag"])
def diag(g: Graph, x: Node, diagonal: int = 0) -> Node:
    # a vector onto a matrix's diagonal, or a matrix's diagonal as a vector
    if x.meta.ndim == 1:
        return diag_embed(g, x, diagonal, 0, 1)
    if x.meta.ndim == 2:
        return diagonal_copy(g, x, diagonal, 0, 1)
    return extern(g, torch.diag, x, diagonal)  # (torch raises)


@lowers(torch.diagflat, methods=["diagflat"])
def diagflat(g: Graph, x: Node, offset: int = 0) -> Node:
    return diag_embed(g, _flattened(g, x), offset, 0, 1)


# --- copies of views: the view, then a copy of it -----------------------------------------
def _copy_of(method: str) -> Any:
    def lowering(g: Graph, x: Node, *args: Any, **kwargs: Any) -> Node:
        kwargs.pop("implicit", None)  # expand_copy's flag: no effect on the values
        view = TENSOR_METHODS[method](g, x, *args, **kwargs)
        return g.call("clone", view)

    return lowering


for _name in ["expand", "permute", "squeeze", "t", "transpose", "unsqueeze", "narrow", "detach"]:
    lowers(getattr(torch, f"{_name}_copy"))(_copy_of(_name))
lowers(torch.alias_copy)(lambda g, x: g.call("clone", x))


@lowers(torch.view_copy)
def view_copy(g: Graph, x: Node, size: Any) -> Node:
    if isinstance(size, torch.dtype):  # the bits read as another dtype: torch does it
        return extern(g, torch.view_copy, x, size)
    return _copy_of("view")(g, x, size)


# --- writing src into part of x ---------------------------------------------------------
@lowers(torch.slice_scatter, methods=["slice_scatter"])
def slice_scatter(g: Graph, x: Node, src: Node, dim: int = 0, start: int | None = None, end: int | None = None,
                  step: int = 1) -> Node:
    if _complex(x) or x.meta.ndim == 0:
        return extern(g, torch.slice_scatter, x, src, dim, start, end, step)
    return g.call("slice_scatter", x, src, dim, start, end, step)


@lowers(torch.select_scatter, methods=["select_scatter"])
def select_scatter(g: Graph, x: Node, src: Node, dim: int, index: int) -> Node:
    # src (x without dim) where x's coordinate along dim is index, x elsewhere: a where
    if _complex(x) or x.meta.ndim == 0:
        return extern(g, torch.select_scatter, x, src, dim, index)
    d = norm_dim(dim, x.meta.ndim)
    size = x.meta.shape[d]
    if not -size <= index < size:
        return extern(g, torch.select_scatter, x, src, dim, index)  # (torch raises)
    along = g.call("iota", tuple(size if i == d else 1 for i in range(x.meta.ndim)), d, torch.int64,
                   x.meta.device)
    value = g.call("convert", g.call("unsqueeze", src, d), x.meta.dtype)
    return g.call("where", g.call("eq", along, index % size), value, x)


def assigned(g: Graph, x: Node, key: Any, value: Any) -> Node:
    """x's value after `x[key] = value` with a basic key (ints, slices, None, ...): the value,
    broadcast and cast to x's dtype as copy_ would, written into the part x[key] is, by a
    select_scatter or slice_scatter per indexed dim (`shifted[:, 1:] = ids[:, :-1]`, BART's)."""
    items = key if isinstance(key, tuple) else (key,)
    if any(isinstance(item, (list, bool, Node)) for item in items):
        raise Unsupported("assigning into a tensor through a list, bool or tensor index (`x[idx] = value`)")
    part = index(g, x, key)  # (checks the key as reading would)
    src = value if isinstance(value, Node) else g.call("full", (), value, x.meta.dtype, device=x.meta.device)
    if src.meta.shape != part.meta.shape:
        src = g.call("expand", src, part.meta.shape)
    src = g.call("convert", src, x.meta.dtype)
    items = spelled_out(items, x.meta.ndim)
    kept = [item is not None for item in items if not isinstance(item, int)]  # one per dim of the part
    if not all(kept):  # a None adds a dim of 1 to the part alone
        src = g.call("reshape", src, tuple(n for n, keep in zip(part.meta.shape, kept, strict=True) if keep))
    return _written(g, x, 0, [item for item in items if item is not None], src)


def _written(g: Graph, x: Node, dim: int, items: list[Any], src: Node) -> Node:
    """x with src written where items[0] indexes dim, items[1:] the dims after it."""
    if not items:
        return src
    item, rest = items[0], items[1:]
    if isinstance(item, int):
        return select_scatter(g, x, _written(g, select(g, x, dim, item), dim, rest, src), dim, item)
    part = slice_dim(g, x, dim, item)
    new_part = _written(g, part, dim + 1, rest, src)
    if part is x:  # a full slice
        return new_part
    start, stop, step = slice_bounds(item, x.meta.shape[dim])
    return g.call("slice_scatter", x, new_part, dim, start, max(stop, start), step)


@lowers(torch.diagonal_scatter, methods=["diagonal_scatter"])
def diagonal_scatter(g: Graph, x: Node, src: Node, offset: int = 0, dim1: int = 0, dim2: int = 1) -> Node:
    if _complex(x) or x.meta.ndim < 2:
        return extern(g, torch.diagonal_scatter, x, src, offset, dim1, dim2)
    return g.call("diagonal_scatter", x, src, offset, dim1, dim2)


@lowers(torch.index_fill, methods=["index_fill"])
def index_fill(g: Graph, x: Node, dim: int, index: Node, value: Any) -> Node:
    if _complex(x) or x.meta.ndim == 0 or (isinstance(value, Node) and value.meta.ndim):
        return extern(g, torch.index_fill, x, dim, index, value)
    return g.call("index_fill", x, dim, index, value)


@lowers(torch.block_diag)
def block_diag(g: Graph, *tensors: Node) -> Node:
    if not tensors or any(_complex(t) or t.meta.ndim > 2 for t in tensors):
        return extern(g, torch.block_diag, *tensors)
    return g.call("block_diag", *tensors)


@lowers(torch.cartesian_prod)
def cartesian_prod(g: Graph, *tensors: Node) -> Node:
    if len(tensors) == 1:  # the tensor itself, as torch returns it
        return tensors[0]
    if any(_complex(t) or t.meta.ndim != 1 for t in tensors):
        return extern(g, torch.cartesian_prod, *tensors)
    return g.call("cartesian_prod", *tensors)
