"""What the window ops mean, run by torch: pooling, resizing and sliding windows, each with its
arguments already normalised by capture (capture/torch_pooling.py, capture/torch_resizing.py).
The reference interpreter and shape inference call these; decompose/pooling.py and
decompose/resizing.py write them as `load_at` kernels.

The pools take `x` as (*batch, *spatial) with one spatial dim per kernel entry, as torch's
functions do with or without the batch dim.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch
import torch.nn.functional as F

Ints = Sequence[int]


def _pool_fn(kind: str, spatial: int) -> Any:
    return getattr(F, f"{kind}{spatial}d")


def avg_pool(x: torch.Tensor, kernel: Ints, stride: Ints, padding: Ints, ceil_mode: bool,
             count_include_pad: bool, divisor_override: int | None) -> torch.Tensor:
    spatial = len(kernel)
    if x.ndim > spatial + 2:  # more batch dims than torch's functions take (local_response_norm's pool)
        pooled = avg_pool(x.reshape(-1, *x.shape[-spatial:]), kernel, stride, padding, ceil_mode,
                          count_include_pad, divisor_override)
        return pooled.reshape(*x.shape[:-spatial], *pooled.shape[1:])
    if spatial == 1 and divisor_override is not None:  # avg_pool1d has none: a 2-d pool of height 1
        pooled = F.avg_pool2d(x.unsqueeze(-2), (1, *kernel), (1, *stride), (0, *padding), ceil_mode,
                              count_include_pad, divisor_override)
        return pooled.squeeze(-2)
    if spatial == 1:
        return F.avg_pool1d(x, kernel, stride, padding, ceil_mode, count_include_pad)
    return _pool_fn("avg_pool", spatial)(x, kernel, stride, padding, ceil_mode, count_include_pad, divisor_override)


def max_pool(x: torch.Tensor, kernel: Ints, stride: Ints, padding: Ints, dilation: Ints, ceil_mode: bool,
             exact_gradient: bool = False) -> torch.Tensor:
    """The values; `exact_gradient` only changes how decompose writes them (see decompose/pooling.py)."""
    return _pool_fn("max_pool", len(kernel))(x, kernel, stride, padding, dilation, ceil_mode)


def max_pool_indices(x: torch.Tensor, kernel: Ints, stride: Ints, padding: Ints, dilation: Ints,
                     ceil_mode: bool) -> torch.Tensor:
    """Where each maximum is: its offset in x's (flattened) spatial dims, as torch returns it."""
    fn = _pool_fn("max_pool", len(kernel))
    return fn(x, kernel, stride, padding, dilation, ceil_mode, return_indices=True)[1]


def adaptive_avg_pool(x: torch.Tensor, size: Ints) -> torch.Tensor:
    return _pool_fn("adaptive_avg_pool", len(size))(x, size)


def adaptive_max_pool(x: torch.Tensor, size: Ints, exact_gradient: bool = False) -> torch.Tensor:
    return _pool_fn("adaptive_max_pool", len(size))(x, size)


def adaptive_max_pool_indices(x: torch.Tensor, size: Ints) -> torch.Tensor:
    return _pool_fn("adaptive_max_pool", len(size))(x, size, return_indices=True)[1]


def upsample(x: torch.Tensor, size: Ints, scales: Sequence[float | None], mode: str,
             align_corners: bool | None) -> torch.Tensor:
    """F.interpolate once its output size and scales are known: the aten op it calls. `scales` are
    the user's scale factors where the kernel uses them (recompute_scale_factor false), else None."""
    nn = torch._C._nn
    spatial = len(size)
    given = None if all(s is None for s in scales) else list(scales)
    size = None if given else list(size)  # torch takes one of the two (and finds the same size)
    if mode in ("nearest", "nearest-exact"):
        prefix = "upsample_nearest" if mode == "nearest" else "_upsample_nearest_exact"
        return getattr(nn, f"{prefix}{spatial}d")(x, size, given)
    name = {"linear": "upsample_linear1d", "bilinear": "upsample_bilinear2d",
            "trilinear": "upsample_trilinear3d", "bicubic": "upsample_bicubic2d"}[mode]
    return getattr(nn, name)(x, size, align_corners, given)


def im2col(x: torch.Tensor, kernel: Ints, dilation: Ints, padding: Ints, stride: Ints) -> torch.Tensor:
    return F.unfold(x, kernel, dilation, padding, stride)
