"""Advanced indexing, `x[idx]`, `x[:, rows, cols]`, as one gather: integer tensors that index
neighbouring dims of x become one flat position into those dims (merged into one), which
`index_select` reads (a `load_at` kernel, fused with what follows; its gradient adds back).

    x[..., i, j, :]  ==  index_select(x merged over i's and j's dims, that dim, i * n_j + j)
                         reshaped to x's dims before, broadcast(i, j)'s dims, x's dims after

Covered: integer index tensors on neighbouring dims, with slices and `...` elsewhere. Not covered
(the caller keeps them one torch call): bool masks (their result's size depends on the values),
index tensors apart from each other or beside ints and None (torch moves their dims to the front),
and symbolic sizes.
"""

from __future__ import annotations

import contextlib
import contextvars
import math
from collections.abc import Iterator
from typing import Any

import torch

from minicompiler.ir import Graph, Node
from minicompiler.ir.symbolic import is_symbolic

INDEX_DTYPES = (torch.int64, torch.int32)
_kept_whole = contextvars.ContextVar("advanced_indexing_kept_whole", default=False)


@contextlib.contextmanager
def kept_whole() -> Iterator[None]:
    """Inside: x[tensors] stays one torch call. (vmap's capture reads a vmapped function's lookups
    into a table as such calls, to broadcast them; capture/vmap.py.)"""
    token = _kept_whole.set(True)
    try:
        yield
    finally:
        _kept_whole.reset(token)


def as_gather(g: Graph, x: Node, items: tuple[Any, ...]) -> Node | None:
    """x[items] as a gather, or None where this form is not covered (see the module's doc)."""
    from minicompiler.capture.torch_views import slice_dim  # (torch_views calls this module)

    if _kept_whole.get():
        return None
    items = _without_ellipsis(items, x.meta.ndim)
    if items is None or any(is_symbolic(n) for n in x.meta.shape):
        return None
    tensors = [d for d, item in enumerate(items) if isinstance(item, Node)]
    if any(items[d].meta.dtype not in INDEX_DTYPES for d in tensors) or tensors != list(range(tensors[0],
                                                                                               tensors[-1] + 1)):
        return None
    if not all(isinstance(item, (Node, slice)) for item in items):
        return None
    for d, item in enumerate(items):
        if isinstance(item, slice):
            x = slice_dim(g, x, d, item)  # dims kept: the positions below stay right
    first, sizes = tensors[0], x.meta.shape[tensors[0]:tensors[-1] + 1]
    position = _flat_position(g, [items[d] for d in tensors], sizes)
    before, after = x.meta.shape[:first], x.meta.shape[tensors[-1] + 1:]
    merged = g.call("reshape", x, (*before, math.prod(sizes), *after))
    picked = g.call("index_select", merged, first, g.call("reshape", position, (position.meta.numel,)))
    return g.call("reshape", picked, (*before, *position.meta.shape, *after))


def _without_ellipsis(items: tuple[Any, ...], ndim: int) -> tuple[Any, ...] | None:
    """The items with `...` (or the missing trailing items) as full slices; None if too many."""
    if items.count(Ellipsis) > 1:
        return None
    if Ellipsis in items:
        at = items.index(Ellipsis)
        items = items[:at] + (slice(None),) * (ndim - len(items) + 1) + items[at + 1:]
    return items + (slice(None),) * (ndim - len(items)) if len(items) <= ndim else None


def _flat_position(g: Graph, indices: list[Node], sizes: tuple[int, ...]) -> Node:
    """sum of index_k * stride_k over the merged dims, each index checked against its own size
    first (IndexError as eager's) and negative ones counted from the end."""
    position = None
    for k, (index, size) in enumerate(zip(indices, sizes, strict=True)):
        index = g.call("convert", index, torch.int64)
        if len(sizes) > 1:  # (one index alone: index_select's own check of the position suffices)
            index = g.call("check_indices", index, -size, size)
        index = g.call("where", g.call("lt", index, 0), g.call("add", index, size), index)
        term = g.call("mul", index, math.prod(sizes[k + 1:])) if k < len(sizes) - 1 else index
        position = term if position is None else g.call("add", position, term)
    assert position is not None
    return position
