"""The Python a CUDA graph replay spends on its inputs and outputs (runtime/cuda_graphs.py), per call.

    python benchmarks/replay_bookkeeping.py

A replay itself is one launch; around it the runner checks its inputs (layouts of the copied ones,
addresses of the borrowed ones), reclaims what it lent last time, and hands out its outputs (the
caller's inputs passed through, lent aliases, copies). A ResNet-18 training step passes ~300
tensors through its two graphs. This times that bookkeeping alone, with CPU tensors and no
graph, for a forward-like runner (180 inputs: a batch copied in, the rest parameters read in place;
130 saved tensors lent, one output copied) and a backward-like one (131 inputs, 62 gradients
copied). Results: benchmarks/results/h100_2026-11-28c/README.md quotes this machine's numbers.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

from minicompiler.runtime.cuda_graphs import CUDAGraphRunner


def recorded_runner(inputs: int, lent: int, copied: int) -> tuple[CUDAGraphRunner, list[torch.Tensor]]:
    """A runner as a recording would leave it: the batch copied in, parameters borrowed."""
    params = [torch.nn.Parameter(torch.randn(64, 64)) for _ in range(inputs - 1)]
    batch = torch.randn(16, 64)
    runner = CUDAGraphRunner(lambda _: None, lend_last=lent)
    runner.graph = object()  # recorded (never replayed here)
    runner.static_inputs = [batch.clone(), *params]
    runner.borrowed = [False] + [True] * len(params)
    runner.copied_positions = [0]
    runner.borrowed_positions = list(range(1, inputs))
    runner.copied_layout = [(batch.shape, batch.stride(), batch.dtype, batch.device)]
    runner.borrowed_addresses = [p.data_ptr() for p in params]
    runner.borrowed_shapes = [p.shape for p in params]
    outputs = [torch.randn(16, 64) for _ in range(copied)] + [torch.randn(8, 8) for _ in range(lent)]
    runner.static_outputs = tuple(outputs)
    runner._plan_outputs()
    return runner, [batch, *params]


def microseconds(fn: Callable[[], object], calls: int = 300) -> float:
    """Best of 5 batches, after warm-up, per call."""
    for _ in range(20):
        fn()
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        for _ in range(calls):
            fn()
        best = min(best, (time.perf_counter() - start) / calls * 1e6)
    return best


def main() -> None:
    print(f"{'runner':45s} {'check inputs':>14s} {'hand out outputs':>18s}")
    for label, sizes in (("forward-like (180 in, 130 lent, 1 copied)", (180, 130, 1)),
                         ("backward-like (131 in, 62 copied)", (131, 0, 62))):
        runner, inputs = recorded_runner(*sizes)
        assert runner._can_replay(inputs)
        check = microseconds(lambda r=runner, i=inputs: r._can_replay(i))
        hand_out = microseconds(lambda r=runner, i=inputs: (r._reclaim_lent(), r._outputs(i)))
        print(f"{label:45s} {check:11.1f} us {hand_out:15.1f} us")


if __name__ == "__main__":
    main()
