"""A max pool (ResNet's stem pool, after a ReLU), forward and backward, compiled against eager on the CPU.

    OMP_NUM_THREADS=2 python pool_bench.py /path/to/a/minicompiler/checkout

The checkout is put first on the path, so two commits can be timed in turn. Median of 30 calls.
"""

from __future__ import annotations

import statistics
import sys
import time

sys.path.insert(0, sys.argv[1])

import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402

import minicompiler  # noqa: E402


def pool(t: torch.Tensor) -> torch.Tensor:
    return F.max_pool2d(F.relu(t), 3, 2, 1)


def main() -> None:
    torch.manual_seed(0)
    x = torch.randn(16, 64, 56, 56, requires_grad=True)
    grad = torch.randn(16, 64, 28, 28)
    compiled = minicompiler.compile(pool)

    def step(fn: object) -> torch.Tensor:
        return torch.autograd.grad(fn(x), x, grad)[0]

    torch.testing.assert_close(step(compiled), step(pool))
    medians = {}
    for name, fn in (("eager", pool), ("compiled", compiled)):
        for _ in range(3):
            step(fn)
        times = []
        for _ in range(30):
            start = time.perf_counter()
            step(fn)
            times.append(time.perf_counter() - start)
        medians[name] = round(statistics.median(times) * 1e3, 2)
    print(sys.argv[1], "ms per call:", medians)


if __name__ == "__main__":
    main()
