"""Pools and sliding windows, each one `load_at` over a grid of (*batch, *out, *window) then a
reduction over the window dims.

A max pool of x (N, C, H, W) reads x at (n, c, oh * stride + kh * dilation - pad, ...) for every
(n, c, oh, ow, kh, kw), with -inf where that falls in the padding, and takes the `amax` over
(kh, kw): a 3x3 pool is 9 loads per output in one kernel, as TorchInductor writes it. An average
pool sums the same grid (zeros in the padding) and divides by torch's count. Adaptive pools have
windows of varying length (start = floor(o * n / out), end = ceil((o + 1) * n / out)): the grid is
as long as the longest, and the taps past a window's end are masked like the padding.

Where torch returns the positions of the maxima (return_indices), they are an `argmax` over the
window, turned into that tap's offset in x's spatial dims. Where x needs a gradient, the values are
read from x at that tap: torch sends a window's gradient to that one element, where amax's rule
would share it among ties (a window of ReLU zeros).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any

import torch

from minicompiler.decompose.gathers import clamp, coordinate, coordinates, exact_quotient, ravel, unravel
from minicompiler.decompose.table import LOW_PRECISION, GraphOps, register_decomposition
from minicompiler.ir import Node

# where(o, k) along one spatial dim: the source index of tap k of output o, and how many taps
# that window really has (None: all of them); both formulas of the grid's coordinates
Window = Callable[[Node, Node], tuple[Node, Any]]


def opmath(dtype: torch.dtype) -> torch.dtype:
    """The dtype torch's CPU kernels accumulate in: float32 for float16/bfloat16."""
    return torch.float32 if dtype in LOW_PRECISION else dtype


def lowest(dtype: torch.dtype) -> float | int:
    """What a max pool's padding holds: below every value (NaN still wins, as in torch)."""
    return -math.inf if dtype.is_floating_point else torch.iinfo(dtype).min


def read_window(ops: GraphOps, x: Node, batch: Sequence[Node], sources: Sequence[Node],
                bounds: Sequence[tuple[int, int]], fill: Any) -> Node:
    """x[*batch, *sources], `fill` where a source is outside x. `bounds` are the lowest and highest
    source index along each spatial dim (known in Python): only a dim that can leave x is checked."""
    spatial = x.meta.shape[len(batch):]
    inside, index = None, []
    for source, n, (low, high) in zip(sources, spatial, bounds, strict=True):
        if 0 <= low and high < n:
            index.append(source)
            continue
        within = ops.logical_and(ops.ge(source, 0), ops.lt(source, n))
        inside = within if inside is None else ops.logical_and(inside, within)
        index.append(clamp(ops, source, 0, n - 1))  # read, but not used
    values = ops.load_at(x, (*batch, *index))
    return values if inside is None else ops.where(inside, values, fill)


def windowed(ops: GraphOps, x: Node, out: Sequence[int], window: Sequence[int], where: Sequence[Window],
             bounds: Sequence[tuple[int, int]], fill: Any) -> tuple[Node, list[Node]]:
    """x read over the grid (*batch, *out, *window): the values (`fill` outside x and past a window's
    end) and each tap's source index along the spatial dims (for the max pools' indices)."""
    nb, ns = x.meta.ndim - len(out), len(out)
    index = coordinates(ops, (*x.meta.shape[:nb], *out, *window), x.meta.device)
    return _read_taps(ops, x, index[:nb], index[nb:nb + ns], index[nb + ns:], where, bounds, fill)


def _read_taps(ops: GraphOps, x: Node, batch: Sequence[Node], outs: Sequence[Node], taps: Sequence[Node],
              where: Sequence[Window], bounds: Sequence[tuple[int, int]], fill: Any) -> tuple[Node, list[Node]]:
    """x at tap taps[d] of window outs[d] along each spatial dim d (`fill` outside x and past the
    window's end), and those taps' source indices."""
    sources, lengths_ok, ranges = [], None, []
    for d, (o, k) in enumerate(zip(outs, taps, strict=True)):
        source, length = where[d](o, k)
        sources.append(source)
        ranges.append(bounds[d])
        if length is not None:  # taps past this window's end are padding too
            ok = ops.lt(k, length)
            lengths_ok = ok if lengths_ok is None else ops.logical_and(lengths_ok, ok)
            sources[-1] = clamp(ops, source, 0, x.meta.shape[len(batch) + d] - 1)
            ranges[-1] = (0, x.meta.shape[len(batch) + d] - 1)
    values = read_window(ops, x, batch, sources, ranges, fill)
    if lengths_ok is not None:
        values = ops.where(lengths_ok, values, fill)
    return values, sources


def window_dims(x: Node, spatial: int) -> tuple[int, ...]:
    return tuple(range(x.meta.ndim, x.meta.ndim + spatial))  # the grid's last `spatial` dims


# --- regular windows: o * stride - pad + k * dilation -------------------------------------
def pool_output_size(n: int, kernel: int, stride: int, pad: int, dilation: int, ceil_mode: bool) -> int:
    """torch's pooling_output_shape: with ceil_mode, a last partial window counts if it starts
    inside x or its left padding."""
    out = (n + 2 * pad - dilation * (kernel - 1) - 1 + (stride - 1 if ceil_mode else 0)) // stride + 1
    return out - 1 if ceil_mode and (out - 1) * stride >= n + pad else out


def _regular(ops: GraphOps, x: Node, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
             dilation: Sequence[int], ceil_mode: bool) -> tuple[list[int], list[Window], list[tuple[int, int]]]:
    spatial = x.meta.shape[x.meta.ndim - len(kernel):]
    out = [pool_output_size(*args, ceil_mode) for args in zip(spatial, kernel, stride, padding, dilation, strict=True)]

    def tap(s: int, p: int, d: int) -> Window:
        return lambda o, k: (regular_source(ops, o, k, s, p, d), None)

    where = [tap(s, p, d) for s, p, d in zip(stride, padding, dilation, strict=True)]
    bounds = [regular_bounds(*args) for args in zip(out, kernel, stride, padding, dilation, strict=True)]
    return out, where, bounds


def regular_source(ops: GraphOps, o: Node, k: Node, stride: int, pad: int, dilation: int) -> Node:
    return ops.add(ops.sub(ops.mul(o, stride), pad), ops.mul(k, dilation))  # o * stride - pad + k * dilation


def regular_bounds(out: int, kernel: int, stride: int, pad: int, dilation: int) -> tuple[int, int]:
    return -pad, (out - 1) * stride - pad + (kernel - 1) * dilation  # the first and last tap read


@register_decomposition("avg_pool")
def avg_pool(ops: GraphOps, x: Node, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
             ceil_mode: bool, count_include_pad: bool, divisor_override: int | None) -> Node:
    out, where, bounds = _regular(ops, x, kernel, stride, padding, (1,) * len(kernel), ceil_mode)
    values, _ = windowed(ops, x, out, kernel, where, bounds, 0)
    total = ops.sum(ops.convert(values, opmath(x.meta.dtype)), window_dims(x, len(kernel)), False)
    if divisor_override:
        return ops.convert(ops.div(total, divisor_override), x.meta.dtype)
    # torch's count: the window clipped to the padded x (count_include_pad) or to x itself
    shape, count = total.meta.shape, 1
    spatial = x.meta.shape[x.meta.ndim - len(kernel):]
    for d, (n, o, k, s, p) in enumerate(zip(spatial, out, kernel, stride, padding, strict=True)):
        if (o - 1) * s - p + k <= n + p and (count_include_pad or p == 0):
            length = k  # no window is clipped: each counts k
        else:
            start = ops.sub(ops.mul(coordinate(ops, shape, len(shape) - len(kernel) + d, x.meta.device), s), p)
            end = ops.minimum(ops.add(start, k), n + p)
            if not count_include_pad:
                start, end = ops.maximum(start, 0), ops.minimum(end, n)
            length = ops.sub(end, start)
        count = _times(ops, count, length)
    return ops.convert(ops.div(total, count), x.meta.dtype)


def _times(ops: GraphOps, a: Any, b: Any) -> Any:
    """a * b, in Python while both are numbers."""
    return a * b if not isinstance(a, Node) and not isinstance(b, Node) else ops.mul(a, b)


# node.tags[WINDOW_MAXIMUM]: this node is, element by element, the largest value of the window that
# the one argmax its positions are computed from reduces (replace/max_pool_values.py reads it)
WINDOW_MAXIMUM = "window_maximum"
# node.tags[POOL_WINDOWS] on a regular max pool's read of x at each window's argmax: the pool's
# (kernel, stride, padding, dilation), for its gradient as a gather (autograd/pool_gradient.py)
POOL_WINDOWS = "pool_windows"


def argmax_behind(positions: Sequence[Any]) -> Node | None:
    """The one argmax that a max pool's read positions are computed from (`_at_maximum`), or None
    if there is not exactly one: the positions' arithmetic is walked (a few dozen nodes), not the
    tensors that a load_at among it reads."""
    found, todo, seen = set(), [p for p in positions if isinstance(p, Node)], set()
    while todo and len(seen) < 200:
        step = todo.pop()
        if step in seen:
            continue
        seen.add(step)
        if step.op == "argmax":
            found.add(step)
            continue
        todo += step.inputs()[1:] if step.op == "load_at" else step.inputs()
    return found.pop() if not todo and len(found) == 1 else None


def _at_maximum(ops: GraphOps, x: Node, out: Sequence[int], window: Sequence[int], where: Sequence[Window],
                bounds: Sequence[tuple[int, int]], windows: tuple | None = None) -> tuple[Node, list[Node]]:
    """Each window's first largest value, read from x at that one tap, and the tap's source index
    along each spatial dim. The window is read once, for its argmax; the value's gradient then goes
    to that one element, as torch sends it (amax's rule would share it among ties, a window of
    ReLU zeros), and is one add per output, where a pick from the window sent zeros to every tap."""
    values, _ = windowed(ops, x, out, window, where, bounds, lowest(x.meta.dtype))
    best = ops.argmax(values, window_dims(x, len(out)), False)  # counted row-major over the window
    index = coordinates(ops, best.meta.shape, x.meta.device)
    nb = x.meta.ndim - len(out)
    taps = unravel(ops, best, window)
    picked, sources = _read_taps(ops, x, index[:nb], index[nb:], taps, where, bounds, lowest(x.meta.dtype))
    picked.tags[WINDOW_MAXIMUM] = True
    read = picked
    while read.op == "where":  # the padding's mask around the read
        read = read.args[1]
    if windows is not None:
        read.tags[POOL_WINDOWS] = windows
    return picked, sources


def _max_pool(ops: GraphOps, x: Node, out: Sequence[int], window: Sequence[int], where: Sequence[Window],
              bounds: Sequence[tuple[int, int]], exact_gradient: bool, windows: tuple | None = None) -> Node:
    if exact_gradient:
        return _at_maximum(ops, x, out, window, where, bounds, windows)[0]
    values, _ = windowed(ops, x, out, window, where, bounds, lowest(x.meta.dtype))
    return ops.amax(values, window_dims(x, len(out)), False)


def _max_pool_indices(ops: GraphOps, x: Node, out: Sequence[int], window: Sequence[int], where: Sequence[Window],
                      bounds: Sequence[tuple[int, int]]) -> Node:
    """The offset, in x's flattened spatial dims, of each window's first largest value (torch's indices)."""
    sources = _at_maximum(ops, x, out, window, where, bounds)[1]
    return ravel(ops, sources, x.meta.shape[-len(out):])


@register_decomposition("max_pool")
def max_pool(ops: GraphOps, x: Node, kernel: Sequence[int], stride: Sequence[int], padding: Sequence[int],
             dilation: Sequence[int], ceil_mode: bool, exact_gradient: bool = False) -> Node:
    out, where, bounds = _regular(ops, x, kernel, stride, padding, dilation, ceil_mode)
    windows = (tuple(kernel), tuple(stride), tuple(padding), tuple(dilation))
    return _max_pool(ops, x, out, kernel, where, bounds, exact_gradient, windows)


@register_decomposition("max_pool_indices")
def max_pool_indices(ops: GraphOps, x: Node, kernel: Sequence[int], stride: Sequence[int],
                     padding: Sequence[int], dilation: Sequence[int], ceil_mode: bool) -> Node:
    out, where, bounds = _regular(ops, x, kernel, stride, padding, dilation, ceil_mode)
    return _max_pool_indices(ops, x, out, kernel, where, bounds)


# --- adaptive windows: [floor(o * n / out), ceil((o + 1) * n / out)) ------------------------
def _adaptive(ops: GraphOps, x: Node, size: Sequence[int]) -> tuple[list[int], list[Window], list[tuple[int, int]]]:
    spatial = x.meta.shape[x.meta.ndim - len(size):]
    window, where = [], []
    for n, out in zip(spatial, size, strict=True):
        if n % out == 0:  # windows of n / out, side by side: no division in the kernel
            window.append(n // out)
            where.append(lambda o, k, step=n // out: (ops.add(ops.mul(o, step), k), None))
            continue
        window.append(max(-(-(o + 1) * n // out) - o * n // out for o in range(out)))

        def tap(o: Node, k: Node, n: int = n, out: int = out) -> tuple[Node, Node]:
            start = exact_quotient(ops, ops.mul(o, n), out)
            end = exact_quotient(ops, ops.add(ops.mul(o, n), n + out - 1), out)  # the ceiling
            return ops.add(start, k), ops.sub(end, start)

        where.append(tap)
    return window, where, [(0, n - 1) for n in spatial]


@register_decomposition("adaptive_avg_pool")
def adaptive_avg_pool(ops: GraphOps, x: Node, size: Sequence[int]) -> Node:
    if all(out == 1 for out in size):  # global average pooling (every CNN's head): a mean, whose
        # gradient is an expand, not a window gather and its scatter-add
        return ops.mean(x, tuple(range(x.meta.ndim - len(size), x.meta.ndim)), True)
    window, where, bounds = _adaptive(ops, x, size)
    values, _ = windowed(ops, x, size, window, where, bounds, 0)
    total = ops.sum(ops.convert(values, opmath(x.meta.dtype)), window_dims(x, len(size)), False)
    # divided by the window's own length along each dim (the same formulas, on the output's grid)
    count = 1
    for d, (n, out) in enumerate(zip(x.meta.shape[-len(size):], size, strict=True)):
        o = coordinate(ops, total.meta.shape, total.meta.ndim - len(size) + d, x.meta.device)
        length = where[d](o, ops.mul(o, 0))[1] if n % out else n // out
        count = _times(ops, count, length)
    return ops.convert(ops.div(total, count), x.meta.dtype)


@register_decomposition("adaptive_max_pool")
def adaptive_max_pool(ops: GraphOps, x: Node, size: Sequence[int], exact_gradient: bool = False) -> Node:
    window, where, bounds = _adaptive(ops, x, size)
    return _max_pool(ops, x, size, window, where, bounds, exact_gradient)


@register_decomposition("adaptive_max_pool_indices")
def adaptive_max_pool_indices(ops: GraphOps, x: Node, size: Sequence[int]) -> Node:
    window, where, bounds = _adaptive(ops, x, size)
    return _max_pool_indices(ops, x, size, window, where, bounds)


# --- sliding copies ----------------------------------------------------------------------------
@register_decomposition("unfold_copy")
def unfold_copy(ops: GraphOps, x: Node, dim: int, size: int, step: int) -> Node:
    # out[.., i, .., j] = x[.., i * step + j, ..]: windows along dim, each as a new last dim
    shape = list(x.meta.shape)
    shape[dim] = (shape[dim] - size) // step + 1
    index = coordinates(ops, (*shape, size), x.meta.device)
    along = ops.add(ops.mul(index[dim], step), index[-1])
    return ops.load_at(x, tuple(along if d == dim else i for d, i in enumerate(index[:-1])))


@register_decomposition("im2col")
def im2col(ops: GraphOps, x: Node, kernel: Sequence[int], dilation: Sequence[int], padding: Sequence[int],
           stride: Sequence[int]) -> Node:
    # (*, C, H, W) -> (*, C * kh * kw, oh * ow): column (oh, ow) holds the patch at (oh * s - p, ow * s - p),
    # row (c, i, j) its tap (i * d, j * d) from there; zeros in the padding
    *batch, channels, height, width = x.meta.shape
    out = [pool_output_size(n, k, s, p, d, False)
           for n, k, s, p, d in zip((height, width), kernel, stride, padding, dilation, strict=True)]
    grid = (*batch, channels, *kernel, *out)  # (*, C, kh, kw, oh, ow)
    index = coordinates(ops, grid, x.meta.device)
    nb = len(batch)
    sources = [regular_source(ops, index[nb + 3 + d], index[nb + 1 + d], stride[d], padding[d], dilation[d])
               for d in range(2)]
    bounds = [regular_bounds(out[d], kernel[d], stride[d], padding[d], dilation[d]) for d in range(2)]
    patches = read_window(ops, x, index[:nb + 1], sources, bounds, 0)
    return ops.reshape(patches, (*batch, channels * kernel[0] * kernel[1], out[0] * out[1]))
