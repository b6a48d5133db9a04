"""Gradients where a formula has a kink or a part that overflows. Autograd runs after decompose,
so it differentiates the formulas: relu written as maximum(x, 0) passed the gradient at x = 0
(maximum with a bound passes it, as clamp does) where torch's relu gives 0, which made timm's
ResNets train wrong (zero-initialised batch norms feed relu exact zeros); sigmoid written as
1 / (1 + e^-x) had a NaN gradient where e^-x overflows. Each case is checked against eager at
exactly those points, forward and gradient, on both backends."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

import minicompiler

NAN, BIG = math.nan, 1000.0
TARGETS = [1.0, 0.0, 1.0, 0.0, 0.5]
CASES = {
    "relu": (torch.relu, [0.0, -0.0, 1.0, -1.0, NAN]),
    "relu_inplace": (lambda x: F.relu(x * 1, inplace=True), [0.0, -2.0, 3.0]),
    "hardtanh": (F.hardtanh, [-1.0, 1.0, 0.5, -2.0, NAN]),
    "relu6": (F.relu6, [0.0, 6.0, 3.0]),
    "hardsigmoid": (F.hardsigmoid, [-3.0, 3.0, 0.0]),
    "hardswish": (F.hardswish, [-3.0, 3.0, 1.0, -4.0]),
    "clamp": (lambda x: x.clamp(-1, 1), [-1.0, 1.0, 0.0]),  # clamp passes it at its bounds
    "clamp_min": (lambda x: torch.clamp_min(x, 0), [0.0, -1.0]),
    "threshold": (lambda x: F.threshold(x, 0.5, -2.0), [0.5, 1.0]),
    "leaky_relu": (F.leaky_relu, [0.0, -1.0]),
    "sigmoid": (torch.sigmoid, [-BIG, BIG, 0.0]),
    "silu": (F.silu, [-BIG, BIG, 0.0]),
    "logsigmoid": (F.logsigmoid, [0.0, 100.0, -100.0, BIG, -BIG]),
    "softplus": (F.softplus, [0.0, 20.0, 100.0, BIG, -BIG]),
    "softplus_beta": (lambda x: F.softplus(x, 2.0, 5.0), [0.0, 2.5, 100.0, -BIG]),
    "mish": (F.mish, [-BIG, BIG, 0.0]),
    "bce_with_logits": (lambda x: F.binary_cross_entropy_with_logits(x, x.new_tensor(TARGETS), reduction="none"),
                        [0.0, 0.0, BIG, -BIG, 3.0]),
}


# (backend, device): Triton on CPU tensors runs in the interpreter (TRITON_INTERPRET=1, as make test sets)
TARGETS_ON = [("cpp", "cpu"), ("triton", "cpu"),
              pytest.param("triton", "cuda", marks=pytest.mark.skipif(not torch.cuda.is_available(), reason="no GPU"))]


@pytest.mark.parametrize(("backend", "device"), TARGETS_ON)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64])
@pytest.mark.parametrize("name", sorted(CASES))
def test_gradient_at_kinks_and_overflow(name: str, dtype: torch.dtype, backend: str, device: str) -> None:
    fn, points = CASES[name]
    x = torch.tensor(points, dtype=dtype, device=device, requires_grad=True)
    expected = fn(x)
    (expected_grad,) = torch.autograd.grad(expected.sum(), x)
    x = x.detach().requires_grad_()
    actual = minicompiler.compile(fn, backend=backend)(x)
    (actual_grad,) = torch.autograd.grad(actual.sum(), x)
    torch.testing.assert_close(actual, expected, equal_nan=True)
    torch.testing.assert_close(actual_grad, expected_grad, equal_nan=True)

