"""Max pools on one device: values and gradients against eager, then forward + backward timed.

    python benchmarks/max_pool_check.py [cpu|cuda]

Checks, with inputs that need a gradient: a ResNet stem pool (3x3, stride 2, padding 1), one with
ceil_mode and dilation, an adaptive pool, one with return_indices, and windows of tied values
(ReLU zeros: the gradient goes to each window's first largest element, as torch's). Then times
ResNet-18's stem pool (16x64x112x112 on a GPU, 16x64x64x64 on a CPU): minicompiler.bench's
median_call_seconds (warm-up, synchronized, median of 20). Prints one line per check and per
timing; exits non-zero if a check fails.
"""

from __future__ import annotations

import sys
from collections.abc import Callable

import torch
import torch.nn.functional as F

import minicompiler
from minicompiler.bench.timing import median_call_seconds

CHECKS: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], tuple[int, ...]]] = {
    "stem 3x3 s2 p1": (lambda x: F.max_pool2d(x, 3, 2, 1), (2, 8, 17, 17)),
    "ceil_mode, dilation 2": (lambda x: F.max_pool2d(x, 3, 2, 1, 2, True), (2, 8, 17, 17)),
    "adaptive (3, 5)": (lambda x: F.adaptive_max_pool2d(x, (3, 5)), (2, 8, 11, 13)),
    "return_indices": (lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True)[0], (2, 8, 17, 17)),
    "ties (ReLU zeros)": (lambda x: F.max_pool2d(F.relu(x - 1), 3, 2, 1), (2, 8, 17, 17)),
}


def check(name: str, fn: Callable[[torch.Tensor], torch.Tensor], shape: tuple[int, ...], device: str) -> bool:
    x = torch.randn(shape, device=device)
    ours, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    compiled = minicompiler.compile(fn)
    out, expected = compiled(ours), fn(theirs)
    grad = torch.randn_like(expected)
    out.backward(grad)
    expected.backward(grad)
    # values are equal; a gradient that sums several windows' adds them in another order
    same = torch.equal(out, expected) and torch.allclose(ours.grad, theirs.grad, rtol=1e-6, atol=1e-6)
    print(f"{name:24} values and gradients {'match eager' if same else 'DIFFER from eager'}")
    return same


def main(device: str) -> int:
    torch.manual_seed(0)
    passed = all([check(name, fn, shape, device) for name, (fn, shape) in CHECKS.items()])
    side = 112 if device == "cuda" else 64
    x = torch.randn(16, 64, side, side, device=device, requires_grad=True)

    def pool(t: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(t, 3, 2, 1)

    grad = torch.randn_like(pool(x))
    for name, fn in (("eager", pool), ("minicompiler", minicompiler.compile(pool))):
        forward = median_call_seconds(fn, (x,)) * 1e3
        both = median_call_seconds(lambda t, fn=fn: fn(t).backward(grad), (x,)) * 1e3
        print(f"{name:12} 16x64x{side}x{side} pool: forward {forward:.3f} ms, forward + backward {both:.3f} ms")
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "cuda" if torch.cuda.is_available() else "cpu"))
