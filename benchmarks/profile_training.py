"""Where does a model's training step spend its host time? (torch.profiler + cProfile, CUDA)

    python benchmarks/profile_training.py MODEL [eager] [minicompiler] [reduce-overhead]

MODEL is a name from minicompiler/bench/zoo.py ("MLP 1024 (seed 000)", "seed 003 CNN", ...); the
step is the bench's (minicompiler/bench/compare.py: zero_grad, forward, weighted mean, backward,
SGD with momentum). For each compiler: the median step time (synchronized), torch.profiler's
table sorted by self CPU time, and cProfile's view of the Python that runs a step (where launch
overhead is). A small step on a GPU is bound by the host: the step's time is what the CPU spends.
"""

from __future__ import annotations

import cProfile
import pstats
import statistics
import sys
import time

import torch

import minicompiler
from minicompiler.bench.compare import _Step
from minicompiler.bench.zoo import CASES, quiet_randomness

COMPILERS = {
    "eager": lambda m: m,
    "minicompiler": minicompiler.compile,
    "reduce-overhead": lambda m: minicompiler.compile(m, mode="reduce-overhead"),
}


def profile(model: str, which: str) -> None:
    torch.manual_seed(0)
    built = next(c for c in CASES if c.name == model).make("cuda", False)
    step = _Step(quiet_randomness(built.module), COMPILERS[which], built.inputs)
    for _ in range(5):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(30):
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    print(f"== {model}, {which}: {statistics.median(times) * 1e3:.3f} ms per step (median of 30, synchronized)")
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(5):
            step()
        torch.cuda.synchronize()
    print(f"-- {which}: torch.profiler, 5 steps")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25, max_name_column_width=70))
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    profiler.disable()
    print(f"-- {which}: cProfile, 20 steps")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(30)


def main() -> None:
    model, *chosen = sys.argv[1:]
    for which in chosen or list(COMPILERS):
        profile(model, which)


if __name__ == "__main__":
    main()
