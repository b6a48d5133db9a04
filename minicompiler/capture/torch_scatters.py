"""torch functions that write values at indices a user gives: scatter, scatter_add, scatter_reduce,
index_add, index_copy, index_put, put, _unsafe_masked_index_put_accumulate, and masked_scatter.
Each becomes one graph op, which decompose/scatters.py writes as a `store_at` kernel (masked_scatter:
a gather). Their in-place forms (`x.index_add_(...)`) come with the methods.

Forms these lowerings do not cover stay whole, an extern call run by torch: complex numbers,
scatter_reduce's "prod" (neither backend has an atomic multiply), accumulating dtypes without
atomics in both backends (ir/scatter.py), integer means, boolean masks in index_put (the number of
positions depends on the data), and an index_put with None (a slice) among its indices.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from minicompiler.capture.torch_ops import extern, lowers
from minicompiler.ir import Graph, Node
from minicompiler.ir.scatter import ATOMIC_DTYPES

REDUCES = frozenset({"sum", "amax", "amin", "mean"})  # scatter_reduce's, less "prod" (no atomic multiply)


def _kept_whole(x: Any, accumulates: bool, *tensors: Any) -> bool:
    """Whether torch runs the op: complex data, values of another dtype than x (torch raises), or
    an accumulation in a dtype without atomics."""
    if any(isinstance(t, Node) and (t.meta.dtype.is_complex or t.meta.dtype != x.meta.dtype) for t in (x, *tensors)):
        return True
    return accumulates and x.meta.dtype not in ATOMIC_DTYPES


def _other_ranks(x: Node, index: Node, src: Any) -> bool:
    """scatter's index and src (a tensor) must have x's rank (torch raises otherwise)."""
    ranks = {index.meta.ndim} | ({src.meta.ndim} if isinstance(src, Node) else set())
    return ranks != {x.meta.ndim} and x.meta.ndim != 0


@lowers(torch.scatter, methods=["scatter"])
def scatter(g: Graph, x: Node, dim: int, index: Node, src: Any = None, value: Any = None,
            reduce: str | None = None) -> Node:
    src = value if src is None else src
    if reduce not in (None, "add") or _kept_whole(x, reduce is not None, src) or _other_ranks(x, index, src):
        return extern(g, torch.scatter, x, dim, index, src, **({"reduce": reduce} if reduce else {}))
    if reduce is None:
        return g.call("scatter", x, dim, index, src)
    if not isinstance(src, Node):  # a number added (value=2, reduce='add'): values of the index's shape
        src = g.call("full", index.meta.shape, src, x.meta.dtype, x.meta.device)
    return g.call("scatter_reduce", x, dim, index, src, "sum", True)


@lowers(torch.scatter_add, methods=["scatter_add"])
def scatter_add(g: Graph, x: Node, dim: int, index: Node, src: Node) -> Node:
    if _kept_whole(x, True, src) or _other_ranks(x, index, src):
        return extern(g, torch.scatter_add, x, dim, index, src)
    return g.call("scatter_reduce", x, dim, index, src, "sum", True)


@lowers(torch.scatter_reduce, methods=["scatter_reduce"])
def scatter_reduce(g: Graph, x: Node, dim: int, index: Node, src: Node, reduce: str, *,
                   include_self: bool = True) -> Node:
    integer_mean = reduce == "mean" and not x.meta.dtype.is_floating_point  # torch divides rounding down
    if reduce not in REDUCES or integer_mean or _kept_whole(x, True, src) or _other_ranks(x, index, src):
        return extern(g, torch.scatter_reduce, x, dim, index, src, reduce, include_self=include_self)
    return g.call("scatter_reduce", x, dim, index, src, reduce, include_self)


@lowers(torch.index_add, methods=["index_add"])
def index_add(g: Graph, x: Node, dim: int, index: Node, source: Node, *, alpha: Any = 1) -> Node:
    if _kept_whole(x, True, source) or source.meta.ndim != x.meta.ndim:
        return extern(g, torch.index_add, x, dim, index, source, alpha=alpha)
    return g.call("index_add", x, dim, index, source, alpha)


@lowers(torch.index_copy, methods=["index_copy"])
def index_copy(g: Graph, x: Node, dim: int, index: Node, source: Node) -> Node:
    if _kept_whole(x, False, source) or source.meta.ndim != x.meta.ndim:
        return extern(g, torch.index_copy, x, dim, index, source)
    return g.call("index_copy", x, dim, index, source)


def _integer_indices(indices: Sequence[Any]) -> bool:
    return bool(indices) and all(isinstance(i, Node) and i.meta.dtype in (torch.int64, torch.int32)
                                 for i in indices)


@lowers(torch.index_put, methods=["index_put"])
def index_put(g: Graph, x: Node, indices: Sequence[Any], values: Any, accumulate: bool = False) -> Node:
    if not _integer_indices(indices) or len(indices) > x.meta.ndim or _kept_whole(x, accumulate, values):
        return extern(g, torch.index_put, x, tuple(indices), values, accumulate)
    return g.call("index_put", x, tuple(indices), values, accumulate)


@lowers(torch._unsafe_masked_index_put_accumulate)
def unsafe_masked_index_put_accumulate(g: Graph, x: Node, mask: Node, indices: Sequence[Any], values: Node) -> Node:
    # torch's meaning (aten/src/ATen/native/TensorAdvancedIndexing.cpp): values where mask holds
    # (0 elsewhere) added at the indices, each clamped into its dim first
    if not _integer_indices(indices) or len(indices) > x.meta.ndim or _kept_whole(x, True, values):
        return extern(g, torch._unsafe_masked_index_put_accumulate, x, mask, tuple(indices), values)
    clamped = tuple(g.call("clamp", i, -n, n - 1) for i, n in zip(indices, x.meta.shape, strict=False))
    return g.call("index_put", x, clamped, g.call("where", mask, values, 0), True)


@lowers(torch.put, methods=["put"])
def put(g: Graph, x: Node, index: Node, source: Node, accumulate: bool = False) -> Node:
    if _kept_whole(x, accumulate, source) or index.meta.numel != source.meta.numel:
        return extern(g, torch.put, x, index, source, accumulate)  # (torch explains a mismatch)
    return g.call("put", x, index, source, accumulate)


@lowers(torch.masked_scatter, methods=["masked_scatter"])
def masked_scatter(g: Graph, x: Node, mask: Node, source: Node) -> Node:
    if _kept_whole(x, False, source) or mask.meta.dtype != torch.bool or source.meta.numel == 0:
        return extern(g, torch.masked_scatter, x, mask, source)
    return g.call("masked_scatter", x, mask, source)
