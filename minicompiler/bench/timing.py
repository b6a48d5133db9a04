"""Timing helpers: warm up, synchronize, take the median of repeated batches."""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable
from typing import Any

import torch


def _sync(args: tuple[Any, ...]) -> None:
    if any(isinstance(a, torch.Tensor) and a.is_cuda for a in args):
        torch.cuda.synchronize()


def median_call_seconds(fn: Callable, args: tuple[Any, ...], repeats: int = 20, warmup: int = 3) -> float:
    """Median seconds per call. Calls are batched so one timed batch lasts at least ~5 ms,
    which keeps timer resolution and launch jitter out of microsecond-scale results."""
    for _ in range(warmup):
        fn(*args)
    _sync(args)
    start = time.perf_counter()
    fn(*args)
    _sync(args)
    once = max(time.perf_counter() - start, 1e-7)
    batch = min(max(1, int(0.005 / once)), 10_000)
    samples = []
    for _ in range(repeats):
        start = time.perf_counter()
        for _ in range(batch):
            fn(*args)
        _sync(args)
        samples.append((time.perf_counter() - start) / batch)
    return statistics.median(samples)


def first_call_seconds(fn: Callable, args: tuple[Any, ...]) -> float:
    """Seconds for the first call, which includes compiling."""
    _sync(args)
    start = time.perf_counter()
    fn(*args)
    _sync(args)
    return time.perf_counter() - start


def device_seconds(fn: Callable, args: tuple[Any, ...], repeats: int = 20, replays: int = 50) -> float:
    """Median GPU time per call of `fn(*args)`, without the CPU's launch overhead: the call is
    captured once in a CUDA graph and replayed, timed with CUDA events. This is the time the
    kernels themselves take, which is what a bandwidth figure should be computed from."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):  # warm up (and compile) outside the capture
        for _ in range(3):
            fn(*args)
    torch.cuda.current_stream().wait_stream(stream)
    graph = torch.cuda.CUDAGraph()
    # a capture stream of its own: see runtime/cuda_graphs.py on cuBLAS workspaces (this graph
    # is destroyed when timing ends, which must not free a workspace other graphs use)
    with torch.cuda.graph(graph, stream=torch.cuda.Stream()):
        fn(*args)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    samples = []
    for _ in range(repeats):
        start.record()
        for _ in range(replays):
            graph.replay()
        end.record()
        end.synchronize()
        samples.append(start.elapsed_time(end) / 1e3 / replays)
    return statistics.median(samples)


def interleaved_seconds(fns: dict[str, Callable[[], Any]], repeats: int = 10, warmup: int = 2,
                        min_batch_seconds: float = 0.005) -> dict[str, float]:
    """Median seconds per call of each function, timed in turn round by round (a, b, c, a, b, c,
    ...): on a shared machine a slow moment then falls on every function alike, not on one.
    Each function's calls are batched so one timed batch lasts about `min_batch_seconds`."""
    cuda = torch.cuda.is_available()
    batches = {}
    for name, fn in fns.items():
        for _ in range(warmup):
            fn()
        if cuda:
            torch.cuda.synchronize()
        start = time.perf_counter()
        fn()
        if cuda:
            torch.cuda.synchronize()
        batches[name] = min(max(1, int(min_batch_seconds / max(time.perf_counter() - start, 1e-7))), 1000)
    samples: dict[str, list[float]] = {name: [] for name in fns}
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            for _ in range(batches[name]):
                fn()
            if cuda:
                torch.cuda.synchronize()
            samples[name].append((time.perf_counter() - start) / batches[name])
    return {name: statistics.median(times) for name, times in samples.items()}
