"""Where a Triton launch's host time goes on a GPU: each layer of minicompiler's launch path, timed alone.

    python benchmarks/triton_launch_path.py

One small compiled function (one kernel, three pointers) is called, its FastLauncher is taken from the
first launch, and then each layer is called on its own, 3,000 times in 5 rounds (the best round's mean;
the GPU keeps up with kernels this small). Next to them: a few torch calls and torch.compile's call.
Results: benchmarks/results/h100_2026-11-27g/triton_launch_path.txt.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import torch

import minicompiler
from minicompiler.runtime import triton_launch

ROUNDS, CALLS = 5, 3000


def bench(name: str, fn: Callable[[], object]) -> None:
    for _ in range(50):
        fn()
    torch.cuda.synchronize()
    means = []
    for _ in range(ROUNDS):
        start = time.perf_counter()
        for _ in range(CALLS):
            fn()
        means.append((time.perf_counter() - start) / CALLS * 1e6)
        torch.cuda.synchronize()
    print(f"{min(means):8.2f} us  {name}", flush=True)


def fused(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return (x * y + 1.0).relu()


def main() -> None:
    seen: list[tuple] = []
    launch = triton_launch.FastLauncher.launch

    def first_launch(self: triton_launch.FastLauncher, grid: tuple, *args: object, **options: object) -> None:
        seen.append((self, grid, args, options))
        launch(self, grid, *args, **options)

    x, y = torch.randn(4096, device="cuda"), torch.randn(4096, device="cuda")
    compiled_fn = minicompiler.compile(fused)
    triton_launch.FastLauncher.launch = first_launch
    for _ in range(5):
        compiled_fn(x, y)
    triton_launch.FastLauncher.launch = launch
    launcher, grid, args, options = seen[0]
    compiled, (run, before, constexprs) = next(iter(launcher.compiled.values()))
    pointers = [a.data_ptr() for a in args[: launcher.tensors]]
    rest = args[launcher.tensors:]
    x3, y3, z3 = (*grid, 1, 1)[:3]
    stream = torch._C._cuda_getCurrentRawStream(0)
    print(f"grid {grid}, options {options}, {launcher.tensors} pointers; launched by {run}")
    bench("compiled function call (guards + wrapper + 1 launch + alloc)", lambda: compiled_fn(x, y))
    bench("launcher[grid](*args, **options)", lambda: launcher[grid](*args, **options))
    kernel_args = (*pointers, *rest, *constexprs)
    bench("the launch as FastLauncher makes it", lambda: run(x3, y3, z3, stream, *before, *kernel_args))
    metadata = (compiled.function, compiled.packed_metadata, None, None, None)
    bench("Triton's launcher object, __call__", lambda: compiled.run(x3, y3, z3, stream, *metadata, *kernel_args))
    bench("torch._C._cuda_getCurrentRawStream(0)", lambda: torch._C._cuda_getCurrentRawStream(0))
    bench("x.data_ptr()", x.data_ptr)
    bench("torch.empty_strided((4096,), (1,), cuda)",
          lambda: torch.empty_strided((4096,), (1,), dtype=torch.float32, device="cuda"))
    out = torch.empty_like(x)
    bench("torch.add(x, y, out=out) (eager op)", lambda: torch.add(x, y, out=out))
    bench("torch.relu(x) (eager op + alloc)", lambda: torch.relu(x))
    compiled_by_torch = torch.compile(fused)
    for _ in range(5):
        compiled_by_torch(x, y)
    bench("torch.compile function call", lambda: compiled_by_torch(x, y))


if __name__ == "__main__":
    main()
