"""Resizing (F.interpolate): every output element reads x at source indices computed from its own
coordinates, as torch's CPU kernels compute them (aten/src/ATen/native/UpSample.h).

nearest reads one element; linear, bilinear, trilinear read 2 per dim and bicubic 4, weighted and
summed dim by dim, outermost first, as torch's `Interpolate` recursion does. The source index is
computed in the same precision and order as torch's, since a nearest index is a `floor` of it and
one rounding more or less picks the next element:

  nearest        floor(float(o) * scale), float32 whatever x's dtype (scale = float32(1 / factor)
                 or float32(in) / out; torch's shortcuts for out == in and out == 2 in give the same)
  nearest-exact  floor(float32((o + 0.5) * scale)), the product in double
  linear, cubic  scale * (o + 0.5) - 0.5 in double, rounded to x's compute dtype (align_corners:
                 scale * o, scale = (in - 1) / (out - 1))
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from minicompiler.decompose.gathers import clamp, coordinates
from minicompiler.decompose.pooling import opmath
from minicompiler.decompose.table import GraphOps, register_decomposition
from minicompiler.ir import Node

CUBIC_A = -0.75  # the bicubic kernel's sharpness, as torch's (and OpenCV's)
Tap = tuple[Any, Any]  # (index along a dim, weight): a formula of the output's coordinates each


def rounded(value: float, dtype: torch.dtype) -> float:
    """value as the nearest number of `dtype` (what static_cast<float> does in torch's C++)."""
    return float(torch.tensor(value, dtype=torch.float64).to(dtype))


def divided(a: int, b: int, dtype: torch.dtype) -> float:
    """a / b computed in `dtype` (one rounding, as C++'s static_cast<float>(a) / b)."""
    return float(torch.tensor(a, dtype=dtype) / torch.tensor(b, dtype=dtype))


def _ratio(n: int, out: int, scale: float | None, dtype: torch.dtype) -> float:
    """compute_scales_value: in / out in `dtype`, or 1 / scale where the user's factor is used."""
    if scale is not None and scale > 0:
        return rounded(1.0 / scale, dtype)
    return divided(n, out, dtype)


def _nearest(ops: GraphOps, o: Node, n: int, out: int, scale: float | None, exact: bool) -> Node:
    ratio = _ratio(n, out, scale, torch.float32)
    if exact:  # (o + 0.5) * scale in double, then floorf's float argument
        position = ops.convert(ops.mul(ops.add(ops.convert(o, torch.float64), 0.5), ratio), torch.float32)
    else:
        position = ops.mul(ops.convert(o, torch.float32), ratio)
    return ops.minimum(ops.convert(ops.floor(position), torch.int64), n - 1)


def _source_position(ops: GraphOps, o: Node, n: int, out: int, scale: float | None, align_corners: bool,
                     dtype: torch.dtype) -> Node:
    """area_pixel_compute_source_index: where output o sits in x, in `dtype` (before any clamping)."""
    if align_corners:
        ratio = divided(n - 1, out - 1, dtype) if out > 1 else 0.0
        return ops.mul(ops.convert(o, dtype), ratio)
    ratio = _ratio(n, out, scale, dtype) if out > 1 else 0.0
    centre = ops.sub(ops.mul(ops.add(ops.convert(o, torch.float64), 0.5), ratio), 0.5)  # in double
    return ops.convert(centre, dtype)


def _linear_taps(ops: GraphOps, o: Node, n: int, out: int, scale: float | None, align_corners: bool,
                 dtype: torch.dtype) -> list[Tap]:
    if out == n:  # torch copies: weight 1 on the element itself
        return [(o, 1.0)]
    position = ops.maximum(_source_position(ops, o, n, out, scale, align_corners, dtype), 0.0)
    first = ops.minimum(ops.convert(ops.floor(position), torch.int64), n - 1)
    second = ops.minimum(ops.add(first, 1), n - 1)
    weight = clamp(ops, ops.sub(position, ops.convert(first, dtype)), 0.0, 1.0)  # toward the second
    return [(first, ops.sub(1.0, weight)), (second, weight)]


def _cubic_taps(ops: GraphOps, o: Node, n: int, out: int, scale: float | None, align_corners: bool,
                dtype: torch.dtype) -> list[Tap]:
    # 4 taps at floor(position) - 1 ... + 2 (clamped into x), weighted by the cubic convolution kernel
    position = _source_position(ops, o, n, out, scale, align_corners, dtype)
    floor = ops.floor(position)
    t = ops.sub(position, floor)
    first = ops.convert(floor, torch.int64)
    distances = [ops.add(t, 1.0), t, ops.sub(1.0, t), ops.sub(2.0, t)]
    weights = [_cubic_far(ops, distances[0]), _cubic_near(ops, distances[1]), _cubic_near(ops, distances[2]),
               _cubic_far(ops, distances[3])]
    return [(clamp(ops, ops.add(first, j - 1), 0, n - 1), w) for j, w in enumerate(weights)]


def _cubic_near(ops: GraphOps, x: Node) -> Node:
    # ((A + 2) x - (A + 3)) x^2 + 1, for |x| <= 1
    return ops.add(ops.mul(ops.mul(ops.sub(ops.mul(x, CUBIC_A + 2), CUBIC_A + 3), x), x), 1.0)


def _cubic_far(ops: GraphOps, x: Node) -> Node:
    # ((A x - 5 A) x + 8 A) x - 4 A, for 1 < |x| < 2
    return ops.sub(ops.mul(ops.add(ops.mul(ops.sub(ops.mul(x, CUBIC_A), 5 * CUBIC_A), x), 8 * CUBIC_A), x),
                   4 * CUBIC_A)


def _weighted(ops: GraphOps, x: Node, batch: Sequence[Node], taps: Sequence[Sequence[Tap]], dtype: torch.dtype,
              chosen: tuple[Node, ...] = ()) -> Node:
    """sum_j w_j * (the same over the inner dims, at tap j of this dim): torch's recursion."""
    if len(chosen) == len(taps):
        return ops.convert(ops.load_at(x, (*batch, *chosen)), dtype)
    total = None
    for index, weight in taps[len(chosen)]:
        inner = _weighted(ops, x, batch, taps, dtype, (*chosen, index))
        term = inner if isinstance(weight, float) and weight == 1.0 else ops.mul(inner, weight)
        total = term if total is None else ops.add(total, term)
    return total


@register_decomposition("upsample")
def upsample(ops: GraphOps, x: Node, size: Sequence[int], scales: Sequence[float | None], mode: str,
             align_corners: bool | None) -> Node:
    nb = x.meta.ndim - len(size)
    spatial = x.meta.shape[nb:]
    index = coordinates(ops, (*x.meta.shape[:nb], *size), x.meta.device)
    batch, outputs = index[:nb], index[nb:]
    if mode in ("nearest", "nearest-exact"):
        sources = [_nearest(ops, o, n, out, s, mode == "nearest-exact")
                   for o, n, out, s in zip(outputs, spatial, size, scales, strict=True)]
        return ops.load_at(x, (*batch, *sources))
    dtype = opmath(x.meta.dtype)
    taps_of = _cubic_taps if mode == "bicubic" else _linear_taps
    taps = [taps_of(ops, o, n, out, s, bool(align_corners), dtype)
            for o, n, out, s in zip(outputs, spatial, size, scales, strict=True)]
    return ops.convert(_weighted(ops, x, batch, taps, dtype), x.meta.dtype)
