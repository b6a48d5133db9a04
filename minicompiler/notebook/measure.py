"""Measurements a notebook adds to a report: run times with their spread, and what eager
autograd saves for backward."""

from __future__ import annotations

import statistics
from collections.abc import Callable
from typing import Any

import torch

from minicompiler.bench.timing import median_call_seconds
from minicompiler.report import CompileReport


def time_calls(report: CompileReport, functions: dict[str, Callable[..., Any]], args: tuple[Any, ...],
               samples: int = 10) -> CompileReport:
    """Time each function on `args`: `samples` timings each (every one the mean of a batch of
    calls lasting a few ms), recorded as report.run_samples[name] and the median as run_times[name].
    Warms every function up first, so a compile on the first call is not timed."""
    if samples < 1:
        raise ValueError(f"need at least one sample, got {samples}")
    for fn in functions.values():
        fn(*args)
    for name, fn in functions.items():
        # one batch per sample: `median_call_seconds` of a single batch is that batch's mean
        report.run_samples[name] = [median_call_seconds(fn, args, repeats=1, warmup=0)
                                    for _ in range(samples)]
        report.run_times[name] = statistics.median(report.run_samples[name])
    return report


def eager_saved_bytes(fn: Callable[..., Any], args: tuple[Any, ...]) -> int:
    """Bytes eager autograd keeps for backward while running `fn(*args)` (0 if nothing needs grad).
    Tensors saved twice (or views of one storage) count once."""
    storages: dict[int, int] = {}

    def pack(tensor: torch.Tensor) -> torch.Tensor:
        storage = tensor.untyped_storage()
        storages[storage.data_ptr()] = storage.nbytes()
        return tensor

    with torch.autograd.graph.saved_tensors_hooks(pack, lambda tensor: tensor):
        fn(*args)
    return sum(storages.values())
