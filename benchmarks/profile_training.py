"""Where does a training step of seed 003's CNN spend its time? (torch.profiler + cProfile, CUDA)

    python benchmarks/profile_training.py [eager] [minicompiler] [reduce-overhead]

For each compiler: the median step time (synchronized), torch.profiler's tables sorted by GPU
and by CPU time, and cProfile's view of the Python that runs a step (where launch overhead is).
"""

from __future__ import annotations

import cProfile
import pstats
import statistics
import sys
import time

import torch
import torch.nn.functional as F

import minicompiler
from minicompiler.bench.models import SimpleModel

COMPILERS = {
    "eager": lambda m: m,
    "minicompiler": minicompiler.compile,
    "reduce-overhead": lambda m: minicompiler.compile(m, mode="reduce-overhead"),
}


def profile(which: str) -> None:
    torch.manual_seed(0)
    module = SimpleModel().cuda().train()
    model = COMPILERS[which](module)
    optimizer = torch.optim.Adam(module.parameters(), lr=1e-3)
    x, target = torch.randn(32, 3, 32, 32, device="cuda"), torch.randint(0, 10, (32,), device="cuda")

    def step() -> None:
        optimizer.zero_grad()
        F.cross_entropy(model(x), target).backward()
        optimizer.step()

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    times = []
    for _ in range(30):
        start = time.perf_counter()
        step()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    print(f"== {which}: {statistics.median(times) * 1e3:.3f} ms per step (median of 30, synchronized)")
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(5):
            step()
        torch.cuda.synchronize()
    print(f"-- {which}: torch.profiler, 5 steps")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=25, max_name_column_width=70))
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=15, max_name_column_width=70))
    profiler = cProfile.Profile()
    profiler.enable()
    for _ in range(20):
        step()
    torch.cuda.synchronize()
    profiler.disable()
    print(f"-- {which}: cProfile, 20 steps")
    pstats.Stats(profiler, stream=sys.stdout).sort_stats("tottime").print_stats(30)


def main() -> None:
    for which in sys.argv[1:] or list(COMPILERS):
        profile(which)


if __name__ == "__main__":
    main()
