"""Pools and sliding windows: avg/max pools (1d, 2d, 3d, adaptive), local_response_norm, the
sliding copies (unfold_copy, F.unfold), and the shuffles of channels into space (pixel_shuffle,
pixel_unshuffle, channel_shuffle). Same conventions as `torch_ops.py`.

Each pool becomes one graph op with its arguments normalised to one int per spatial dim
(decompose/pooling.py writes it as a `load_at` over the windows and a reduction); the shuffles are
views and one copy. Forms torch rejects, or that these lowerings do not cover, stay a torch call,
which raises (or runs) as eager does.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

from minicompiler.capture.torch_ops import TENSOR_METHODS, extern, lowers, norm_dim
from minicompiler.capture.torch_views import needs_grad
from minicompiler.ir import Graph, Node


def _per_dim(value: Any, spatial: int, default: Any = None) -> tuple[int, ...]:
    """kernel_size=3, (3,) and (3, 3) alike, for a 2-d pool: (3, 3). None or () is `default`."""
    if value is None or (isinstance(value, (tuple, list)) and len(value) == 0):
        value = default
    values = (value,) if isinstance(value, int) else tuple(value)
    return values * spatial if len(values) == 1 else values


def _poolable(x: Any, spatial: int) -> bool:
    """(C, *spatial) or (N, C, *spatial) of real numbers, as torch's pools take."""
    return isinstance(x, Node) and x.meta.ndim in (spatial + 1, spatial + 2) and not x.meta.dtype.is_complex


def _exact_gradient(x: Node) -> bool:
    """Must the maxima be picked so that each window's gradient goes to one element? (pooling.py)"""
    return x.meta.dtype.is_floating_point and needs_grad(x)


# --- average pools -----------------------------------------------------------------------------
def _avg_pool(spatial: int, fn: Any) -> Any:
    def lowering(g: Graph, x: Node, kernel_size: Any, stride: Any = None, padding: Any = 0,
                 ceil_mode: bool = False, count_include_pad: bool = True, divisor_override: int | None = None) -> Node:
        if not _poolable(x, spatial):
            return extern(g, fn, x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                          *([divisor_override] if spatial > 1 else []))
        kernel = _per_dim(kernel_size, spatial)
        return g.call("avg_pool", x, kernel, _per_dim(stride, spatial, kernel), _per_dim(padding, spatial),
                      bool(ceil_mode), bool(count_include_pad), divisor_override)

    return lowering


lowers(F.avg_pool1d)(_avg_pool(1, F.avg_pool1d))
lowers(F.avg_pool2d)(_avg_pool(2, F.avg_pool2d))
lowers(F.avg_pool3d)(_avg_pool(3, F.avg_pool3d))


def _adaptive_size(x: Node, output_size: Any, spatial: int) -> tuple[int, ...]:
    """output_size with None for "as x is" resolved, as torch's _list_with_default does."""
    sizes = _per_dim(output_size, spatial)
    return tuple(x.meta.shape[x.meta.ndim - spatial + d] if s is None else s for d, s in enumerate(sizes))


def _adaptive_avg_pool(spatial: int, fn: Any) -> Any:
    def lowering(g: Graph, x: Node, output_size: Any) -> Node:
        if not _poolable(x, spatial) or 0 in x.meta.shape[-spatial:]:
            return extern(g, fn, x, output_size)
        return g.call("adaptive_avg_pool", x, _adaptive_size(x, output_size, spatial))

    return lowering


lowers(F.adaptive_avg_pool1d)(_adaptive_avg_pool(1, F.adaptive_avg_pool1d))
lowers(F.adaptive_avg_pool2d, torch._C._nn.adaptive_avg_pool2d)(_adaptive_avg_pool(2, F.adaptive_avg_pool2d))
lowers(F.adaptive_avg_pool3d, torch._C._nn.adaptive_avg_pool3d)(_adaptive_avg_pool(3, F.adaptive_avg_pool3d))


# --- max pools: the values, and (return_indices) where they are -------------------------------
def _max_pool(spatial: int, fn: Any, always_indices: bool = False) -> Any:
    def lowering(g: Graph, x: Node, kernel_size: Any, stride: Any = None, padding: Any = 0, dilation: Any = 1,
                 ceil_mode: bool = False, return_indices: bool = False) -> Any:
        with_indices = return_indices or always_indices
        if not _poolable(x, spatial):
            if with_indices:  # a pair from one torch call: two calls, one tensor each
                return tuple(extern(g, _nth(fn, i), x, kernel_size, stride, padding, dilation, ceil_mode,
                                    return_indices=True) for i in range(2))
            return extern(g, fn, x, kernel_size, stride, padding, dilation, ceil_mode)
        kernel = _per_dim(kernel_size, spatial)
        args = (kernel, _per_dim(stride, spatial, kernel), _per_dim(padding, spatial), _per_dim(dilation, spatial),
                bool(ceil_mode))
        values = g.call("max_pool", x, *args, with_indices or _exact_gradient(x))
        return (values, g.call("max_pool_indices", x, *args)) if with_indices else values

    return lowering


def _nth(fn: Any, i: int) -> Any:
    """fn's i-th output, as a function of its own (a torch call gives a graph node one tensor)."""
    def nth(*args: Any, **kwargs: Any) -> torch.Tensor:
        return fn(*args, **kwargs)[i]

    nth.__name__ = f"{getattr(fn, '__name__', 'fn')}_{i}"
    return nth


for _n in (1, 2, 3):
    _plain = getattr(F, f"max_pool{_n}d")
    lowers(_plain, getattr(torch, f"max_pool{_n}d"))(_max_pool(_n, _plain))
    lowers(getattr(F, f"max_pool{_n}d_with_indices"))(_max_pool(_n, _plain, always_indices=True))


def _adaptive_max_pool(spatial: int, fn: Any, always_indices: bool = False) -> Any:
    def lowering(g: Graph, x: Node, output_size: Any, return_indices: bool = False) -> Any:
        with_indices = return_indices or always_indices
        if not _poolable(x, spatial) or 0 in x.meta.shape[-spatial:]:
            if with_indices:
                return tuple(extern(g, _nth(fn, i), x, output_size, True) for i in range(2))
            return extern(g, fn, x, output_size)
        size = _adaptive_size(x, output_size, spatial)
        values = g.call("adaptive_max_pool", x, size, with_indices or _exact_gradient(x))
        return (values, g.call("adaptive_max_pool_indices", x, size)) if with_indices else values

    return lowering


for _n in (1, 2, 3):
    _plain = getattr(F, f"adaptive_max_pool{_n}d")
    lowers(_plain)(_adaptive_max_pool(_n, _plain))
    lowers(getattr(F, f"adaptive_max_pool{_n}d_with_indices"))(_adaptive_max_pool(_n, _plain, always_indices=True))


@lowers(F.local_response_norm)
def local_response_norm(g: Graph, x: Node, size: int, alpha: float = 1e-4, beta: float = 0.75,
                        k: float = 1.0) -> Node:
    # x / (k + alpha * mean of x^2 over `size` neighbouring channels)^beta, the channels zero-padded
    # by size // 2 before and (size - 1) // 2 after, as torch's pad + avg_pool: here one average
    # pool along the channels moved last, padded size // 2 on both sides (one extra mean at the
    # end for an even size, dropped), every window divided by `size`
    if x.meta.ndim < 3 or not x.meta.dtype.is_floating_point:
        return extern(g, F.local_response_norm, x, size, alpha, beta, k)
    channels = x.meta.shape[1]
    last = (0, *range(2, x.meta.ndim), 1)
    squares = g.call("permute", g.call("mul", x, x), last)
    mean = g.call("avg_pool", squares, (size,), (1,), (size // 2,), False, True, size)
    if mean.meta.shape[-1] != channels:
        mean = g.call("slice", mean, mean.meta.ndim - 1, 0, channels)
    mean = g.call("permute", mean, tuple(last.index(d) for d in range(x.meta.ndim)))
    return g.call("div", x, g.call("pow", g.call("add", g.call("mul", mean, alpha), k), beta))


# --- sliding copies ----------------------------------------------------------------------------
@lowers(torch.unfold_copy)
def unfold_copy(g: Graph, x: Node, dimension: int, size: int, step: int) -> Node:
    # x.unfold(dim, size, step) as a copy: out[.., i, .., j] = x[.., i * step + j, ..]
    if x.meta.dtype.is_complex or (x.meta.ndim == 0 and size != 1):
        return extern(g, torch.unfold_copy, x, dimension, size, step)
    if x.meta.ndim == 0:  # torch's one window of one element: shape (1,)
        return g.call("reshape", g.call("unfold_copy", g.call("reshape", x, (1,)), 0, 1, step), (1,))
    return g.call("unfold_copy", x, norm_dim(dimension, x.meta.ndim), size, step)


@lowers(F.unfold)
def unfold(g: Graph, x: Node, kernel_size: Any, dilation: Any = 1, padding: Any = 0, stride: Any = 1) -> Node:
    # im2col: each (kernel_size) patch of a (C, H, W) image as a column of C * kh * kw numbers
    if not _poolable(x, 2):
        return extern(g, F.unfold, x, kernel_size, dilation, padding, stride)
    return g.call("im2col", x, *(_per_dim(v, 2) for v in (kernel_size, dilation, padding, stride)))


# --- channels into space and back: views and one copy --------------------------------------------
def _shuffled(g: Graph, x: Node, split: Sequence[int], order: Sequence[int], shape: Sequence[int]) -> Node:
    """x's dims split into `split` (always a view), permuted by `order`, copied, then viewed as `shape`."""
    parts = TENSOR_METHODS["reshape"](g, x, tuple(split))
    return TENSOR_METHODS["reshape"](g, g.call("clone", g.call("permute", parts, tuple(order))), tuple(shape))


@lowers(F.pixel_shuffle)
def pixel_shuffle(g: Graph, x: Node, upscale_factor: int) -> Node:
    # (*, C r^2, H, W) -> (*, C, H r, W r): out[c, h r + i, w r + j] = x[c r^2 + i r + j, h, w]
    r = upscale_factor
    if x.meta.ndim < 3 or x.meta.shape[-3] % (r * r) or x.meta.dtype.is_complex:
        return extern(g, F.pixel_shuffle, x, r)
    *batch, c, h, w = x.meta.shape
    b = len(batch)
    return _shuffled(g, x, (*batch, c // (r * r), r, r, h, w), (*range(b), b, b + 3, b + 1, b + 4, b + 2),
                     (*batch, c // (r * r), h * r, w * r))


@lowers(F.pixel_unshuffle)
def pixel_unshuffle(g: Graph, x: Node, downscale_factor: int) -> Node:
    # pixel_shuffle's inverse: (*, C, H r, W r) -> (*, C r^2, H, W)
    r = downscale_factor
    if x.meta.ndim < 3 or x.meta.shape[-2] % r or x.meta.shape[-1] % r or x.meta.dtype.is_complex:
        return extern(g, F.pixel_unshuffle, x, r)
    *batch, c, h, w = x.meta.shape
    b = len(batch)
    return _shuffled(g, x, (*batch, c, h // r, r, w // r, r), (*range(b), b, b + 2, b + 4, b + 1, b + 3),
                     (*batch, c * r * r, h // r, w // r))


@lowers(F.channel_shuffle, torch.native_channel_shuffle)
def channel_shuffle(g: Graph, x: Node, groups: int) -> Node:
    # (N, g * k, *) -> channel i * g + j reads channel j * k + i: the (g, k) grid transposed
    if x.meta.ndim < 3 or x.meta.shape[1] % groups or x.meta.dtype.is_complex:
        return extern(g, F.channel_shuffle, x, groups)
    n, c, *rest = x.meta.shape
    return _shuffled(g, x, (n, groups, c // groups, *rest), (0, 2, 1, *range(3, x.meta.ndim + 1)), x.meta.shape)
