"""Seed 003's loop over sequence lengths with dynamic=True: compilations, first-call time and
time per call, for minicompiler (one symbolic graph), minicompiler with static sizes (one
compilation per length) and torch.compile(dynamic=True).

    python benchmarks/dynamic_shapes.py [cpu|cuda]

Per call: median of repeats after warm-up, synchronized (minicompiler.bench.timing)."""

from __future__ import annotations

import sys
import time

import torch

import minicompiler
from minicompiler.bench.timing import median_call_seconds

LENGTHS = (32, 64, 128, 256)


class DynamicShapeModel(torch.nn.Module):
    """Seed 003's model (d_model 256, batch 16)."""

    def __init__(self) -> None:
        super().__init__()
        self.linear = torch.nn.Linear(256, 256)
        self.norm = torch.nn.LayerNorm(256)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(self.linear(x))


def run(name: str, fn, device: str, compilations) -> None:
    inputs = [torch.randn(16, length, 256, device=device) for length in LENGTHS]
    first = []
    for x in inputs:  # the loop as the seed runs it: each length's first call
        start = time.perf_counter()
        fn(x)
        if device == "cuda":
            torch.cuda.synchronize()
        first.append(time.perf_counter() - start)
    per_call = [median_call_seconds(fn, (x,)) * 1e3 for x in inputs]
    print(f"{name:34s} {compilations():>12} {sum(first):>13.3f} " + " ".join(f"{t:>8.4f}" for t in per_call))


def main() -> None:
    device = sys.argv[1] if len(sys.argv) > 1 else "cpu"
    torch.manual_seed(0)
    model = DynamicShapeModel().to(device).eval()
    print(f"device={device} torch={torch.__version__} "
          f"{torch.cuda.get_device_name() if device == 'cuda' else ''}; batch 16, d_model 256")
    print(f"{'':34s} {'compilations':>12} {'first calls s':>13} " + " ".join(f"{f'T={n} ms':>8}" for n in LENGTHS))
    with torch.no_grad():
        # one-time costs of a process (Triton's launcher build, CUDA context) go to a warm-up
        warm = torch.randn(8, device=device)
        minicompiler.compile(torch.sin)(warm), torch.compile(torch.sin)(warm)
        run("eager", model, device, lambda: "-")
        symbolic = minicompiler.compile(model, dynamic=True)
        run("minicompiler dynamic=True", symbolic, device, lambda: len(symbolic.reports))
        static = minicompiler.compile(model, dynamic=False)
        run("minicompiler dynamic=False", static, device, lambda: len(static.reports))
        torch._dynamo.reset()
        counter = torch._dynamo.utils.counters
        counter.clear()
        compiled = torch.compile(model, dynamic=True)
        run("torch.compile dynamic=True", compiled, device, lambda: counter["stats"]["unique_graphs"])


if __name__ == "__main__":
    main()
