"""EfficientNet-B0's convolutions (batch 16, 224x224) in NCHW and channels-last on a GPU: host and wall time
per call of the forward and of `convolution_backward` (both gradients), and the gradients' layout.

    python benchmarks/depthwise_conv_layouts.py

40 calls after 5 warm-up calls; "host" is the time to issue them, "wall" adds the wait for the GPU.
Results: benchmarks/results/h100_2026-11-27g/depthwise_conv_layouts.txt.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

# batch, channels, height, width, kernel, stride, depthwise (groups = channels) or a 1x1 reduction
SHAPES = [(16, 32, 112, 112, 3, 1, True), (16, 96, 112, 112, 3, 2, True), (16, 144, 56, 56, 3, 1, True),
          (16, 144, 56, 56, 5, 2, True), (16, 240, 28, 28, 5, 1, True), (16, 480, 14, 14, 3, 1, True),
          (16, 672, 14, 14, 5, 1, True), (16, 1152, 7, 7, 5, 1, True),
          (16, 144, 56, 56, 1, 1, False), (16, 480, 14, 14, 1, 1, False), (16, 1152, 1, 1, 1, 1, False)]
CALLS = 40


def timed(fn: Callable[[], object]) -> tuple[float, float]:
    for _ in range(5):
        fn()
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(CALLS):
        fn()
    host = (time.perf_counter() - start) / CALLS * 1e6
    torch.cuda.synchronize()
    return host, (time.perf_counter() - start) / CALLS * 1e6


def main() -> None:
    print(f"{'shape':38} {'layout':6} fwd host/wall us   bwd host/wall us   gradients channels-last")
    for batch, channels, height, width, size, stride, depthwise in SHAPES:
        for channels_last in (False, True):
            groups, out_channels = (channels, channels) if depthwise else (1, channels // 4 + 8)
            x = torch.randn(batch, channels, height, width, device="cuda")
            w = torch.randn(out_channels, channels // groups, size, size, device="cuda")
            if channels_last:
                x, w = (t.contiguous(memory_format=torch.channels_last) for t in (x, w))
            settings = ([stride, stride], [size // 2, size // 2], [1, 1], False, [0, 0], groups)
            y = torch.ops.aten.convolution(x, w, None, *settings)
            g = torch.randn_like(y)
            forward = timed(lambda x=x, w=w, settings=settings: torch.ops.aten.convolution(x, w, None, *settings))
            backward_call = lambda g=g, x=x, w=w, settings=settings: torch.ops.aten.convolution_backward(  # noqa: E731
                g, x, w, None, *settings, [True, True, False])
            backward = timed(backward_call)
            layouts = [t.is_contiguous(memory_format=torch.channels_last) for t in backward_call()[:2]]
            shape = (batch, channels, height, width, size, stride, depthwise)
            print(f"{str(shape):38} {'CL' if channels_last else 'NCHW':6} {forward[0]:7.1f} {forward[1]:8.1f}   "
                  f"{backward[0]:7.1f} {backward[1]:8.1f}   {layouts}")


if __name__ == "__main__":
    main()
