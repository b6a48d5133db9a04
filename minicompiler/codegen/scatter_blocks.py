"""Scatter-adds whose writes stay apart, block by block: a C++ loop without atomic adds.

A max pool's backward adds each output's gradient at its window's maximum, one add per output
(decompose/pooling.py). Over the values' grid (n, c, oh, ow) the position in the input is

    n * C*H*W  +  c * H*W  +  clamp(h) * W + clamp(w)        (h, w computed from oh, ow, argmax)

The first two terms are the grid's own coordinates times strides, and the rest stays in
[0, H*W): two outputs of different (n, c) never add into one element. So the loop over the values
can run in blocks, one (n, c) plane each, one thread per block, with plain adds. Where outputs of
any two places might meet, threads need `omp atomic` adds: a compare-and-swap loop, about 2x the
time of the whole scatter on this 2-core CPU (a 16x64x64x64 pool's backward: ~5 ms of ~8).

`independent_blocks` proves the split from the position's formula: a sum whose terms are the
leading coordinates times constants, plus a rest whose range (interval arithmetic over the
formula's ops) fits between them.
"""

from __future__ import annotations

import math
from typing import Any

from minicompiler.ir.graph import Node

Range = tuple[float, float]  # lowest and highest value, both included


def independent_blocks(position: Node, domain: tuple[Any, ...]) -> int:
    """How many leading dims k of `domain` (the values' grid, walked row-major) keep the writes
    apart: two places whose coordinates along dims < k differ never share a position. 0: none."""
    if not all(isinstance(n, int) for n in domain):
        return 0
    leading: dict[int, tuple[int, Node]] = {}  # dim -> (the constant its coordinate is multiplied by, the term)
    rest: list[Any] = []
    for term in _terms(position):
        dim, factor = _coordinate_term(term, domain)
        if dim is None or dim in leading:
            rest.append(term)
        else:
            leading[dim] = (factor, term)
    for k in range(len(domain), 0, -1):  # the most dims that work
        factors = [leading[d][0] if d in leading else None for d in range(k)]
        if _apart(factors, domain, rest + [term for d, (_, term) in leading.items() if d >= k]):
            return k
    return 0


def _apart(factors: list[int | None], domain: tuple[int, ...], rest: list[Any]) -> bool:
    """Do the leading coordinates times `factors`, plus the rest, tell those coordinates apart?
    Each factor must step over everything the dims after it, and the rest, can add."""
    spans = [_range(term) for term in rest]
    if None in spans:
        return False
    width = sum(high - low for low, high in spans) + 1  # how many values the rest can take, at most
    for d in range(len(factors) - 1, -1, -1):
        if domain[d] == 1:
            continue  # one coordinate: nothing to tell apart
        if factors[d] is None or factors[d] < width:
            return False
        width += factors[d] * (domain[d] - 1)
    return True


def _terms(node: Any) -> list[Any]:
    """The summands of an add tree."""
    if isinstance(node, Node) and node.op == "add" and not node.kwargs:
        return _terms(node.args[0]) + _terms(node.args[1])
    return [node]


def _coordinate_term(term: Any, domain: tuple[int, ...]) -> tuple[int | None, int]:
    """(dim, c) for term = the grid's coordinate along dim, times the constant c >= 1."""
    factor = 1
    if isinstance(term, Node) and term.op == "mul" and isinstance(term.args[1], int) and term.args[1] >= 1:
        term, factor = term.args[0], term.args[1]
    dim = _coordinate_dim(term, domain)
    return dim, factor


def _coordinate_dim(node: Any, domain: tuple[int, ...]) -> int | None:
    """d for iota along d over (a broadcast to) the grid, as decompose/gathers.py `coordinate` writes it."""
    if isinstance(node, Node) and node.op == "add" and _range(node.args[1]) == (0, 0):
        node = node.args[0]
    if not (isinstance(node, Node) and node.op == "iota"):
        return None
    shape, dim = node.args[0], node.args[1]
    return dim if len(shape) == len(domain) and shape[dim] == domain[dim] else None


def _range(node: Any) -> Range | None:
    """Every value `node` can hold, from its formula; None where unknown (a tensor read)."""
    if isinstance(node, (int, float)) and not isinstance(node, bool):
        return (node, node)
    if not isinstance(node, Node) or node.kwargs:
        return None
    op, args = node.op, node.args
    if op == "iota":
        return (0, args[0][args[1]] - 1)
    if op == "full":
        return _range(args[1])
    if op == "convert":
        span = _range(args[0])
        return None if span is None else (math.floor(span[0]), math.ceil(span[1]))
    if op == "remainder" and isinstance(args[1], int) and args[1] > 0:  # Python's: the divisor's sign
        return (0, args[1] - 1) if not node.meta.dtype.is_floating_point else (0, args[1])
    spans = [_range(a) for a in args[:2]]
    if op not in _COMBINE or None in spans:
        return None
    return _COMBINE[op](*spans)


def _corners(a: Range, b: Range, f: Any) -> Range:
    values = [f(x, y) for x in a for y in b]
    return (min(values), max(values))


_COMBINE = {
    "add": lambda a, b: (a[0] + b[0], a[1] + b[1]),
    "sub": lambda a, b: (a[0] - b[1], a[1] - b[0]),
    "mul": lambda a, b: _corners(a, b, lambda x, y: x * y),
    "minimum": lambda a, b: (min(a[0], b[0]), min(a[1], b[1])),
    "maximum": lambda a, b: (max(a[0], b[0]), max(a[1], b[1])),
    "div": lambda a, b: None if b[0] <= 0 <= b[1] else _corners(a, b, lambda x, y: x / y),
}
