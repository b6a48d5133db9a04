"""Pools, resizing and sliding windows (decompose/pooling.py, decompose/resizing.py,
capture/torch_pooling.py, capture/torch_resizing.py): each a `load_at` kernel, vs eager on fresh
random inputs, on C++ over dtypes and channels-last inputs, on Triton (TRITON_INTERPRET=1);
gradients in float64; nearest indices exactly torch's over many sizes and scale factors."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import minicompiler

from .conftest import assert_generated

pytestmark = pytest.mark.filterwarnings("ignore:`nn.functional.upsample")  # deprecated, still lowered

BACKENDS = ["cpp"] + (["triton"] if os.environ.get("TRITON_INTERPRET") == "1" else [])
DTYPES = [torch.float32, torch.float64, torch.float16]

# name -> (function of x, x's shape)
CASES: dict[str, tuple[Callable[..., Any], tuple[int, ...]]] = {
    "avg_pool1d": (lambda x: F.avg_pool1d(x, 3, 2, 1), (2, 3, 10)),
    "avg_pool1d_ceil": (lambda x: F.avg_pool1d(x, 2, 3, 1, ceil_mode=True, count_include_pad=False), (3, 10)),
    "avg_pool2d": (lambda x: F.avg_pool2d(x, 3, 2, 1), (2, 3, 9, 8)),
    "avg_pool2d_ceil": (lambda x: F.avg_pool2d(x, (3, 2), 2, (1, 0), ceil_mode=True), (2, 3, 8, 7)),
    "avg_pool2d_exclude_pad": (lambda x: F.avg_pool2d(x, 3, 2, 1, ceil_mode=True, count_include_pad=False),
                               (1, 2, 8, 9)),
    "avg_pool2d_divisor": (lambda x: F.avg_pool2d(x, 2, divisor_override=3), (2, 3, 6, 5)),
    "avg_pool3d": (lambda x: F.avg_pool3d(x, 2, (1, 2, 2), 1), (1, 2, 4, 5, 6)),
    "max_pool1d": (lambda x: F.max_pool1d(x, 3, 2, 1), (2, 3, 11)),
    "max_pool2d": (lambda x: F.max_pool2d(x, 3, 2, 1), (2, 3, 9, 8)),
    "max_pool2d_dilation_ceil": (lambda x: F.max_pool2d(x, 2, 2, 1, dilation=2, ceil_mode=True), (2, 2, 9, 8)),
    "max_pool2d_indices": (lambda x: F.max_pool2d(x, 3, 2, 1, return_indices=True), (2, 3, 9, 8)),
    "max_pool3d": (lambda x: F.max_pool3d(x, 2, 2, 1), (1, 2, 5, 4, 5)),
    "max_pool3d_indices": (lambda x: F.max_pool3d(x, 3, 2, 1, return_indices=True), (2, 5, 4, 5)),
    "adaptive_avg_pool1d": (lambda x: F.adaptive_avg_pool1d(x, 4), (2, 3, 10)),
    "adaptive_avg_pool2d": (lambda x: F.adaptive_avg_pool2d(x, (3, 4)), (2, 3, 7, 9)),
    "adaptive_avg_pool2d_global": (lambda x: F.adaptive_avg_pool2d(x, 1), (2, 3, 7, 6)),
    "adaptive_avg_pool3d": (lambda x: F.adaptive_avg_pool3d(x, (2, None, 3)), (1, 2, 5, 4, 7)),
    "adaptive_max_pool1d": (lambda x: F.adaptive_max_pool1d(x, 3), (2, 3, 10)),
    "adaptive_max_pool2d_indices": (lambda x: F.adaptive_max_pool2d(x, (3, 5), return_indices=True), (2, 3, 7, 9)),
    "adaptive_max_pool3d": (lambda x: F.adaptive_max_pool3d(x, 2), (1, 2, 5, 4, 3)),
    "local_response_norm": (lambda x: F.local_response_norm(x, 3), (2, 5, 4, 3)),
    "local_response_norm_even": (lambda x: F.local_response_norm(x, 4, 1e-2, 0.5, 2.0), (2, 6, 7)),
    "pixel_shuffle": (lambda x: F.pixel_shuffle(x, 2), (2, 8, 3, 4)),
    "pixel_unshuffle": (lambda x: F.pixel_unshuffle(x, 2), (2, 3, 4, 6)),
    "channel_shuffle": (lambda x: F.channel_shuffle(x, 3), (2, 6, 3, 4)),
    "unfold_copy": (lambda x: torch.unfold_copy(x, 1, 3, 2), (3, 8, 2)),
    "unfold": (lambda x: F.unfold(x, (2, 3), dilation=(1, 2), padding=1, stride=2), (2, 3, 7, 8)),
    "nearest": (lambda x: F.interpolate(x, size=(5, 7)), (2, 3, 4, 3)),
    "nearest_scale": (lambda x: F.interpolate(x, scale_factor=1.7), (2, 3, 5, 4)),
    "nearest_exact": (lambda x: F.interpolate(x, scale_factor=(0.6, 2.3), mode="nearest-exact"), (2, 3, 7, 4)),
    "linear": (lambda x: F.interpolate(x, size=9, mode="linear"), (2, 3, 5)),
    "bilinear": (lambda x: F.interpolate(x, scale_factor=1.6, mode="bilinear"), (2, 3, 5, 4)),
    "bilinear_align_corners": (lambda x: F.interpolate(x, size=(3, 7), mode="bilinear", align_corners=True),
                               (2, 3, 5, 4)),
    "bilinear_recompute": (lambda x: F.interpolate(x, scale_factor=1.3, mode="bilinear",
                                                   recompute_scale_factor=True), (2, 3, 5, 4)),
    "trilinear": (lambda x: F.interpolate(x, size=(3, 5, 4), mode="trilinear"), (1, 2, 4, 3, 5)),
    "bicubic": (lambda x: F.interpolate(x, size=(7, 3), mode="bicubic"), (2, 3, 4, 5)),
    "bicubic_align_corners": (lambda x: F.interpolate(x, scale_factor=2.5, mode="bicubic", align_corners=True),
                              (1, 2, 3, 4)),
    "area": (lambda x: F.interpolate(x, size=(3, 2), mode="area"), (2, 3, 7, 5)),
    "upsample_nearest": (lambda x: F.upsample_nearest(x, scale_factor=2), (2, 3, 3, 4)),
    "upsample_bilinear": (lambda x: F.upsample_bilinear(x, size=(6, 5)), (2, 3, 3, 4)),
}
# a few of each kind run on Triton too (the interpreter is slow)
TRITON_CASES = ["avg_pool2d_exclude_pad", "max_pool2d_indices", "adaptive_avg_pool2d", "adaptive_max_pool1d",
                "local_response_norm", "pixel_shuffle", "unfold", "nearest_exact", "bilinear", "bicubic"]
NO_GRADIENT = {"max_pool2d_indices", "max_pool3d_indices", "adaptive_max_pool2d_indices"}  # checked by value


def _compile_and_compare(fn: Callable[..., Any], x: torch.Tensor, backend: str = "cpp") -> Any:
    compiled = minicompiler.compile(lambda x: fn(x), backend=backend)
    expected = fn(x)
    torch.testing.assert_close(compiled(x), expected, **_tolerance(x.dtype))
    assert_generated(compiled)
    return compiled


def _tolerance(dtype: torch.dtype) -> dict[str, float]:
    # float16: eager and compiled round a float32 sum or weighted sum once each, maybe differently
    return {"rtol": 2e-3, "atol": 2e-3} if dtype == torch.float16 else {}


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_eager_cpp(name: str, dtype: torch.dtype) -> None:
    fn, shape = CASES[name]
    x = torch.randn(shape).to(dtype)
    try:
        fn(x)
    except (RuntimeError, NotImplementedError):
        pytest.skip("eager has no kernel for this dtype")
    _compile_and_compare(fn, x)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", [n for n in sorted(CASES) if len(CASES[n][1]) == 4])
def test_channels_last_input(name: str, backend: str) -> None:
    if backend == "triton" and name not in TRITON_CASES:
        pytest.skip("a sample of the cases runs on Triton")
    fn, shape = CASES[name]
    x = torch.randn(shape).to(memory_format=torch.channels_last)
    try:
        fn(x)
    except RuntimeError:
        pytest.skip("eager takes no channels-last input here")
    _compile_and_compare(fn, x, backend)


@pytest.mark.skipif("triton" not in BACKENDS, reason="Triton runs on the CPU only with TRITON_INTERPRET=1")
@pytest.mark.parametrize("name", TRITON_CASES)
def test_matches_eager_triton(name: str) -> None:
    fn, shape = CASES[name]
    _compile_and_compare(fn, torch.randn(shape), "triton")


@pytest.mark.parametrize("name", [n for n in sorted(CASES) if n not in NO_GRADIENT])
def test_gradient(name: str) -> None:
    fn, shape = CASES[name]
    x = torch.randn(shape, dtype=torch.float64, requires_grad=True)
    weights = torch.randn(fn(x).shape, dtype=torch.float64)
    compiled = minicompiler.compile(lambda x: fn(x), backend="cpp")
    (expected,) = torch.autograd.grad((fn(x) * weights).sum(), x)
    (actual,) = torch.autograd.grad((compiled(x) * weights).sum(), x)
    torch.testing.assert_close(actual, expected)


def test_global_average_pool_is_a_mean() -> None:
    """Every CNN's head, adaptive_avg_pool2d(x, 1), is a mean: its gradient an expand, all in
    generated kernels (as a window gather it had a scatter-add in the backward)."""
    x = torch.randn(2, 3, 5, 7, requires_grad=True)
    pool = lambda x: F.adaptive_avg_pool2d(x, 1)  # noqa: E731
    compiled = minicompiler.compile(pool, backend="cpp")
    torch.testing.assert_close(compiled(x), pool(x))
    torch.testing.assert_close(torch.autograd.grad(compiled(x).sum(), x), torch.autograd.grad(pool(x).sum(), x))
    assert "extern" not in {k.kind for g in compiled.report.graphs for k in g.kernels}


@pytest.mark.parametrize("pool", [lambda x: F.max_pool2d(x, 3, 2, 1), lambda x: F.adaptive_max_pool2d(x, 2)])
def test_max_pool_gradient_goes_to_one_of_tied_maxima(pool: Callable[..., Any]) -> None:
    """A window of ReLU zeros: torch gives its gradient to the first zero only (amax would share it)."""
    x = torch.randn(2, 3, 6, 6, dtype=torch.float64).relu().requires_grad_()
    compiled = minicompiler.compile(pool, backend="cpp")
    (expected,) = torch.autograd.grad(pool(x).sum(), x)
    (actual,) = torch.autograd.grad(compiled(x).sum(), x)
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("mode", ["nearest", "nearest-exact"])
def test_nearest_indices_are_torchs(mode: str, backend: str) -> None:
    """Where a source position lands on (or one rounding away from) a whole number, the index
    depends on the exact float computation: a ramp read at many sizes and factors shows every index."""
    settings = [{"size": n} for n in (1, 3, 7, 13, 29, 31, 64, 97)]
    settings += [{"scale_factor": s} for s in (0.3, 0.7, 1.1, 1.5, 2.0, 2.9, 3.3, 0.49, 1.0 / 3)]
    ramps = [torch.arange(n, dtype=torch.float32).reshape(1, 1, n) for n in (5, 11, 31)]

    def fn(*xs: torch.Tensor) -> list[torch.Tensor]:
        return [F.interpolate(x, mode=mode, **kw) for x in xs for kw in settings]

    compiled = minicompiler.compile(fn, backend=backend)
    for actual, expected in zip(compiled(*ramps), fn(*ramps), strict=True):
        torch.testing.assert_close(actual, expected, rtol=0, atol=0)


def test_antialias_stays_a_torch_call() -> None:
    def fn(x: torch.Tensor) -> torch.Tensor:
        return F.interpolate(x, size=(3, 3), mode="bilinear", antialias=True)

    compiled = minicompiler.compile(fn, backend="cpp")
    x = torch.randn(1, 2, 7, 6)
    torch.testing.assert_close(compiled(x), fn(x))
    assert "extern" in {k.kind for g in compiled.report.graphs for k in g.kernels}


def test_max_pool_is_one_kernel() -> None:
    """relu then a 3x3 max pool: the relu fused into the producer, the 9 taps read in one kernel."""
    def fn(x: torch.Tensor) -> torch.Tensor:
        return F.max_pool2d(torch.relu(x), 3, 2, 1)

    compiled = _compile_and_compare(fn, torch.randn(2, 4, 10, 10))
    kernels = [k for g in compiled.report.graphs for k in g.kernels]
    assert len(kernels) <= 2, [k.kind for k in kernels]
