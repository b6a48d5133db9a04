"""F.interpolate (and the deprecated F.upsample, upsample_nearest, upsample_bilinear): the output
size and the scales the kernel uses are worked out here exactly as torch.nn.functional.interpolate
does in Python, then one `upsample` graph op (decompose/resizing.py) or, for mode="area", an
adaptive average pool. Antialiasing, and anything torch rejects, stay a torch call.
"""

from __future__ import annotations

import math
from typing import Any

import torch.nn.functional as F

from minicompiler.capture.torch_ops import extern, lowers
from minicompiler.ir import Graph, Node

# mode -> the number of spatial dims it takes (None: any of 1, 2, 3)
MODES = {"nearest": None, "nearest-exact": None, "area": None, "linear": 1, "bilinear": 2, "trilinear": 3,
         "bicubic": 2}


def _sizes_and_scales(x: Node, size: Any, scale_factor: Any,
                      recompute_scale_factor: bool | None, mode: str) -> tuple[tuple[int, ...], tuple[Any, ...]] | None:
    """(output size, the scale factors the kernel sees, None where it computes in / out itself), as
    F.interpolate works them out; None where F.interpolate would raise."""
    spatial = x.meta.ndim - 2
    if (size is None) == (scale_factor is None):
        return None
    if size is not None:
        sizes = tuple(size) if isinstance(size, (list, tuple)) else (size,) * spatial
        if len(sizes) != spatial or recompute_scale_factor:
            return None
        return tuple(int(s) for s in sizes), (None,) * spatial
    scales = tuple(scale_factor) if isinstance(scale_factor, (list, tuple)) else (scale_factor,) * spatial
    if len(scales) != spatial:
        return None
    # floor(float(in) * scale), in double as in torch (the kernel's own formula, given the scales)
    sizes = tuple(math.floor(float(n) * s) for n, s in zip(x.meta.shape[2:], scales, strict=True))
    if recompute_scale_factor or mode == "area":  # the kernel computes in / out from the sizes
        return sizes, (None,) * spatial
    return sizes, tuple(float(s) for s in scales)


@lowers(F.interpolate)
def interpolate(g: Graph, x: Node, size: Any = None, scale_factor: Any = None, mode: str = "nearest",
                align_corners: bool | None = None, recompute_scale_factor: bool | None = None,
                antialias: bool = False) -> Node:
    def kept() -> Node:
        return extern(g, F.interpolate, x, size, scale_factor, mode, align_corners, recompute_scale_factor, antialias)

    spatial = x.meta.ndim - 2
    if mode not in MODES or antialias or spatial not in (1, 2, 3) or MODES[mode] not in (None, spatial):
        return kept()
    if MODES[mode] is None and align_corners is not None:
        return kept()  # (torch raises: align_corners is for the interpolating modes only)
    resolved = _sizes_and_scales(x, size, scale_factor, recompute_scale_factor, mode)
    if resolved is None or x.meta.dtype.is_complex or 0 in x.meta.shape[2:] or 0 in resolved[0]:
        return kept()
    sizes, scales = resolved
    if mode == "area":
        return g.call("adaptive_avg_pool", x, sizes)
    return g.call("upsample", x, sizes, scales, mode, bool(align_corners) if MODES[mode] else None)


lowers(F.upsample)(interpolate)
lowers(F.upsample_nearest)(lambda g, x, size=None, scale_factor=None: interpolate(g, x, size, scale_factor))
lowers(F.upsample_bilinear)(lambda g, x, size=None, scale_factor=None:
                            interpolate(g, x, size, scale_factor, "bilinear", True))
