"""mode="max-autotune": each Triton kernel's block sizes chosen by timing, on the first call.

The default launch config (`launch_config` in codegen/triton.py) is a rule of thumb. Autotuning
measures instead, as torch.compile's max-autotune does: on the first call, with that call's
real inputs, each kernel's candidate configs (`candidate_configs`) are tried in turn, the other
kernels held at their best so far; the whole program is timed (on a GPU: its kernels, replayed
from a CUDA graph, median of a few rounds) and the fastest config is kept. Block sizes are
constexpr launch arguments, so only the wrapper's launch lines change; each new block size costs
one more Triton JIT compile, which is why max-autotune compiles longer. The trial runs happen
inside `torch.random.fork_rng`, so they do not shift what a later dropout draws. C++ kernels
have no launch parameters to tune. A progress bar counts the trials (runtime/progress.py).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import torch

from minicompiler.bench.timing import device_seconds
from minicompiler.codegen import CompiledModule, generate
from minicompiler.codegen.triton import candidate_configs
from minicompiler.fuse.schedule import Schedule
from minicompiler.runtime import progress

Configs = dict[str, dict[str, int]]
OnTuned = Callable[[CompiledModule, list[str], float], None]  # (module, notes, seconds spent)


class AutotunedModule:
    """Runs `schedule`'s Triton program; the first call picks the launch configs, then
    `on_tuned` hears what was chosen and every call runs the tuned module."""

    def __init__(self, schedule: Schedule, dynamic: bool, on_tuned: OnTuned) -> None:
        self.schedule, self.dynamic, self.on_tuned = schedule, dynamic, on_tuned
        self.module: CompiledModule | None = None

    def __call__(self, inputs: list[torch.Tensor]) -> Any:
        if self.module is None:
            start = time.perf_counter()
            devices = sorted({t.device.index or 0 for t in inputs if t.is_cuda})
            with torch.random.fork_rng(devices=devices):
                self.module, notes = tune(self.schedule, self.dynamic, inputs)
            self.on_tuned(self.module, notes, time.perf_counter() - start)
        return self.module(inputs)


def tune(schedule: Schedule, dynamic: bool, inputs: list[torch.Tensor]) -> tuple[CompiledModule, list[str]]:
    """The module with the fastest launch config found per kernel, and a note per kernel."""
    configs: Configs = {}
    best = generate(schedule, "triton", dynamic, configs)
    best_seconds = program_seconds(best, inputs)
    notes = []
    trials = sum(len(candidate_configs(kernel, dynamic)) - 1 for kernel in schedule.kernels)
    with progress.bar("minicompiler max-autotune: timing launch configs", total=trials) as shown:
        for kernel in schedule.kernels:
            candidates = candidate_configs(kernel, dynamic)
            default_seconds = best_seconds
            for candidate in candidates[1:]:
                trial = {**configs, kernel.name: candidate}
                module = generate(schedule, "triton", dynamic, trial)
                seconds = program_seconds(module, inputs)
                if seconds < best_seconds:
                    configs, best, best_seconds = trial, module, seconds
                if shown is not None:
                    shown.step(f"{kernel.name} {_format(candidate)}")
            chosen = configs.get(kernel.name, candidates[0])
            notes.append(f"{kernel.name}: {_format(chosen)} of {len(candidates)} tried "
                         f"(default {_format(candidates[0])}); program {best_seconds * 1e3:.4f} ms, "
                         f"was {default_seconds * 1e3:.4f} ms")
    return best, notes


def program_seconds(module: CompiledModule, inputs: list[torch.Tensor]) -> float:
    """On a GPU, the kernels' time per call, replayed from a CUDA graph: launch overhead is the
    same for every config and, timed with it, would swamp the microseconds between them. On the
    CPU the Triton interpreter runs the kernels (correctness, not speed): one call, after one to
    warm up."""
    if any(t.is_cuda for t in inputs):
        return device_seconds(lambda *tensors: module(list(tensors)), tuple(inputs), repeats=5, replays=20)
    module(inputs)
    start = time.perf_counter()
    module(inputs)
    return time.perf_counter() - start


def _format(config: dict[str, int]) -> str:
    return " ".join(f"{k}={v}" for k, v in config.items())
