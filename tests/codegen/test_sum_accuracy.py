"""Float32 sums in the C++ backend add up in float64, as eager's CPU kernels do: a row's elements
are added one after another, and in float32 the rounding grows with the row (KernelOps
`sums_in_float64`). Measured against float64 results, compiled must be as close as eager."""

import copy

import torch
from torch import nn

import minicompiler


def relative_error(got: torch.Tensor, exact: torch.Tensor) -> float:
    return ((got.double() - exact).norm() / exact.norm()).item()


def test_a_long_float32_sum_is_as_accurate_as_eagers():
    x = 1 + 1e-3 * torch.randn(1 << 20)  # a million values near 1: float32 adding up alone drifts
    exact = x.double().sum()
    compiled = minicompiler.compile(lambda t: t.sum())(x)
    assert relative_error(compiled, exact) <= 2 * relative_error(x.sum(), exact) + 1e-9


def input_gradient(run, x: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
    x = x.detach().clone().requires_grad_()
    (run(x) * weights).sum().backward()
    return x.grad


def test_batch_norm_gradient_of_nearly_constant_channels_is_as_accurate_as_eagers():
    """A channel whose values are mostly its mean (MobileNetV3 has such): the statistics need every
    digit, and with float32 sums the compiled gradient was 6x further from float64's than eager's."""
    torch.manual_seed(0)
    net = nn.BatchNorm2d(4).train()
    x = 1000 + 0.05 * torch.randn(32, 4, 64, 64)
    weights = torch.randn(32, 4, 64, 64)
    exact = input_gradient(copy.deepcopy(net).double(), x.double(), weights.double())
    eager = input_gradient(copy.deepcopy(net), x, weights)
    compiled = input_gradient(minicompiler.compile(copy.deepcopy(net)), x, weights)
    assert relative_error(compiled, exact) <= 2 * relative_error(eager, exact)
