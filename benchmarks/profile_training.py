"""Where does a compiled training step of seed 003's CNN spend its time? (torch.profiler, CUDA)

    python benchmarks/profile_training.py [minicompiler|eager|reduce-overhead]
"""

from __future__ import annotations

import sys

import torch
import torch.nn.functional as F

import minicompiler
from minicompiler.bench.models import SimpleModel


def main() -> None:
    which = sys.argv[1] if len(sys.argv) > 1 else "minicompiler"
    torch.manual_seed(0)
    module = SimpleModel().cuda().train()
    model = {"eager": module, "minicompiler": minicompiler.compile(module),
             "reduce-overhead": minicompiler.compile(module, mode="reduce-overhead")}[which]
    optimizer = torch.optim.Adam(module.parameters(), lr=1e-3)
    x, target = torch.randn(32, 3, 32, 32, device="cuda"), torch.randint(0, 10, (32,), device="cuda")

    def step() -> None:
        optimizer.zero_grad()
        F.cross_entropy(model(x), target).backward()
        optimizer.step()

    for _ in range(5):
        step()
    torch.cuda.synchronize()
    activities = [torch.profiler.ProfilerActivity.CPU, torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(5):
            step()
        torch.cuda.synchronize()
    print(f"== {which}: 5 steps")
    print(prof.key_averages().table(sort_by="cuda_time_total", row_limit=18, max_name_column_width=60))
    print(prof.key_averages().table(sort_by="cpu_time_total", row_limit=12, max_name_column_width=60))


if __name__ == "__main__":
    main()
