"""A GPU wrapper's buffers, made with less host time.

`torch.empty_strided(size, stride, dtype=..., device='cuda:0')` parses its keyword arguments and
the device string on every call: 5.0 us of host time on the H100 machine, and a ResNet-18
training step makes ~180 buffers. torch's private `_empty_strided_cuda(size, stride, dtype)` (the
one TorchInductor's wrappers call) takes them positionally and makes the tensor on the current
CUDA device: 2.4 us (`benchmarks/results/h100_2026-11-27i/alloc_bench.txt`). The current device is
the graph's while its wrapper runs: `CompiledModule` calls the wrapper inside a device guard
(Triton launches on the current device too). Where this torch has no such function, the wrapper's
`empty_strided_cuda` is torch's public call.
"""

from __future__ import annotations

from collections.abc import Callable

import torch


def _public_empty_strided_cuda(size: tuple[int, ...], stride: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    return torch.empty_strided(size, stride, dtype=dtype, device="cuda")


def _fastest() -> Callable[[tuple[int, ...], tuple[int, ...], torch.dtype], torch.Tensor]:
    guards = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
    return getattr(guards, "_empty_strided_cuda", None) or _public_empty_strided_cuda


empty_strided_cuda = _fastest()  # (size, stride, dtype) -> an uninitialized tensor on the current GPU
