"""Searches written as counts: bucketize and searchsorted (how many boundaries lie below each
value: a sum of comparisons, one reduction kernel), isin (is the value equal to any test element:
an `any` of comparisons). Each compares every value with every boundary: linear in the number of
boundaries where torch's binary search is logarithmic, so long boundary lists (past
MAX_BOUNDARIES) stay torch calls.
"""

from __future__ import annotations

from typing import Any

import torch

from minicompiler.capture.torch_ops import extern, lowers
from minicompiler.ir import Graph, Node

MAX_BOUNDARIES = 1024


def _real(*values: Any) -> bool:
    return all(isinstance(v, Node) and not v.meta.dtype.is_complex for v in values)


def _count_below(g: Graph, boundaries: Node, values: Node, right: bool, out_int32: bool) -> Node:
    """For each value, the number of boundaries (along the last dim) below it (right=False) or
    at or below it (right=True): its insertion point in the sorted boundaries."""
    below = g.call("le" if right else "lt", boundaries, g.call("unsqueeze", values, -1))
    count = g.call("sum", g.call("convert", below, torch.int64), (below.meta.ndim - 1,), False)
    return g.call("convert", count, torch.int32) if out_int32 else count


@lowers(torch.bucketize)
def bucketize(g: Graph, values: Any, boundaries: Any, *, out_int32: bool = False, right: bool = False) -> Node:
    if not _real(values, boundaries) or boundaries.meta.ndim != 1 or boundaries.meta.numel > MAX_BOUNDARIES:
        return extern(g, torch.bucketize, values, boundaries, out_int32=out_int32, right=right)
    # 1-d boundaries (B,) against values of any shape, each as (.., 1): (.., B) comparisons
    return _count_below(g, boundaries, values, right, out_int32)


@lowers(torch.searchsorted)
def searchsorted(g: Graph, boundaries: Any, values: Any, *, out_int32: bool = False, right: bool = False,
                 side: str | None = None, sorter: Any = None) -> Node:
    right = right or side == "right"
    if (not _real(boundaries, values) or sorter is not None or boundaries.meta.numel > MAX_BOUNDARIES
            or (boundaries.meta.ndim > 1 and boundaries.meta.shape[:-1] != values.meta.shape[:-1])):
        return extern(g, torch.searchsorted, boundaries, values, out_int32=out_int32, right=right, side=side,
                      sorter=sorter)
    if boundaries.meta.ndim == 1:  # one row of boundaries for every value
        return bucketize(g, values, boundaries, out_int32=out_int32, right=right)
    # a row of boundaries per row of values: (.., 1, B) against (.., V, 1)
    return _count_below(g, g.call("unsqueeze", boundaries, -2), values, right, out_int32)


@lowers(torch.isin)
def isin(g: Graph, elements: Any, test_elements: Any, *, assume_unique: bool = False, invert: bool = False) -> Node:
    if (not _real(elements, test_elements) or test_elements.meta.numel > MAX_BOUNDARIES
            or elements.meta.dtype != test_elements.meta.dtype):
        return extern(g, torch.isin, elements, test_elements, assume_unique=assume_unique, invert=invert)
    tests = g.call("reshape", test_elements, (1,) * elements.meta.ndim + (test_elements.meta.numel,))
    found = g.call("any", g.call("eq", g.call("unsqueeze", elements, -1), tests), (elements.meta.ndim,))
    return g.call("logical_not", found) if invert else found
