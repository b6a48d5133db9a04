"""A max pool's input gradient as a gather (autograd/pool_gradient.py), against eager.

On a GPU the gather is the default; on the CPU the scatter stays (it is faster there), so these
tests ask for the gather on the CPU too: the C++ kernel, and the Triton kernel that a GPU would
compile, run by Triton's interpreter, each compared with eager on fresh random inputs.
"""

from __future__ import annotations

import os
from collections.abc import Callable

import pytest
import torch
import torch.nn.functional as F

import minicompiler
from minicompiler.autograd import pool_gradient

BACKENDS = ["cpp", pytest.param("triton", marks=pytest.mark.skipif(
    os.environ.get("TRITON_INTERPRET") != "1", reason="Triton on CPU tensors needs TRITON_INTERPRET=1"))]

POOLS: dict[str, tuple[Callable[[torch.Tensor], torch.Tensor], tuple[int, ...]]] = {
    "resnet_stem": (lambda x: F.max_pool2d(F.relu(x), 3, 2, 1), (2, 3, 11, 9)),
    "no_overlap": (lambda x: F.max_pool2d(x, 2), (2, 3, 8, 6)),
    "stride_1": (lambda x: F.max_pool2d(x, 3, 1, 1), (1, 2, 7, 7)),
    "dilation_ceil": (lambda x: F.max_pool2d(x, 3, 2, 0, dilation=2, ceil_mode=True), (2, 2, 11, 9)),
    "uneven": (lambda x: F.max_pool2d(x, (3, 2), (2, 1), (1, 0), ceil_mode=True), (2, 2, 9, 8)),
    "1d": (lambda x: F.max_pool1d(x, 3, 2, 1), (2, 3, 13)),
    "3d": (lambda x: F.max_pool3d(x, 3, 2, 1), (1, 2, 5, 6, 7)),
    "ties": (lambda x: F.max_pool2d(x, 3, 2, 1), (2, 2, 8, 8)),  # on small integers: equal maxima
}


@pytest.fixture
def gathered_on_cpu(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(pool_gradient, "GATHERED_ON", frozenset({"cpu", "cuda"}))


@pytest.mark.usefixtures("gathered_on_cpu")
@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", sorted(POOLS))
def test_the_gathered_gradient_equals_eagers(name: str, backend: str) -> None:
    pool, shape = POOLS[name]
    x = (torch.randint(-2, 3, shape).float() if name == "ties" else torch.randn(shape)).requires_grad_()
    compiled = minicompiler.compile(pool, backend=backend)
    grad = torch.randn_like(pool(x))
    (expected,) = torch.autograd.grad(pool(x), x, grad)
    (actual,) = torch.autograd.grad(compiled(x), x, grad)
    torch.testing.assert_close(actual, expected)
    steps = next(s.text for s in compiled.report.graphs[0].stages if s.name == "fuse (backward)")
    kernels = [line for line in steps.splitlines() if " over [" in line]
    assert not any("store_at" in line for line in kernels), steps  # no scatter: each element gathers
    assert any(f"over [{', '.join(map(str, shape))}]" in line and "load_at" in line for line in kernels), steps


@pytest.mark.usefixtures("gathered_on_cpu")
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16])
def test_a_half_precision_gradient_is_summed_as_eager_sums_it_on_the_cpu(dtype: torch.dtype) -> None:
    """Two windows may share a maximum: their gradients are added in the gradient's dtype, first
    window first, as eager's CPU kernel adds them, so the result is eager's to the last bit."""
    x = torch.randn(2, 3, 9, 8).to(dtype).requires_grad_()
    pool = lambda t: F.max_pool2d(t, 3, 1, 1)  # noqa: E731 - every element in up to 9 windows
    grad = torch.randn(2, 3, 9, 8).to(dtype)
    compiled = minicompiler.compile(pool, backend="cpp")
    (expected,) = torch.autograd.grad(pool(x), x, grad)
    (actual,) = torch.autograd.grad(compiled(x), x, grad)
    assert torch.equal(actual, expected)


def test_the_cpu_keeps_the_scatter_by_default() -> None:
    x = torch.randn(2, 3, 8, 8, requires_grad=True)
    compiled = minicompiler.compile(lambda t: F.max_pool2d(t, 3, 2, 1), backend="cpp")
    compiled(x).sum().backward()
    steps = next(s.text for s in compiled.report.graphs[0].stages if s.name == "fuse (backward)")
    assert "store_at" in steps


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_a_gpu_max_pool_gathers_its_gradient_by_default() -> None:
    x = torch.randn(4, 8, 32, 32, device="cuda", requires_grad=True)
    pool = lambda t: F.max_pool2d(F.relu(t), 3, 2, 1)  # noqa: E731
    compiled = minicompiler.compile(pool)
    grad = torch.randn_like(pool(x))
    (expected,) = torch.autograd.grad(pool(x), x, grad)
    (actual,) = torch.autograd.grad(compiled(x), x, grad)
    torch.testing.assert_close(actual, expected)
    steps = next(s.text for s in compiled.report.graphs[0].stages if s.name == "fuse (backward)")
    assert "store_at" not in steps
