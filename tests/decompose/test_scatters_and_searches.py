"""Scatters whose positions are a formula (slice/select/diagonal_scatter, index_fill), block_diag,
cartesian_prod, searches written as counts (bucketize, searchsorted, isin), trapezoid, sum_to_size,
the conjugates of real tensors and aten's softmax/dropout backward: each compiled to generated kernels
only, vs eager on fresh random inputs, on C++ (float32/float64) and Triton (TRITON_INTERPRET=1);
gradients in float64."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
import torch

import minicompiler

from .conftest import assert_generated, compiled_gradients_match

BACKENDS = ["cpp"] + (["triton"] if os.environ.get("TRITON_INTERPRET") == "1" else [])
aten = torch.ops.aten


def _sorted(*shape: int) -> torch.Tensor:
    return torch.randn(shape).sort(-1).values


# name -> (function, makers of its arguments)
CASES: dict[str, tuple[Callable[..., Any], list[Callable[[], torch.Tensor]]]] = {
    "slice_scatter": (lambda x, s: torch.slice_scatter(x, s, 1, 1, None, 2),
                      [lambda: torch.randn(3, 6), lambda: torch.randn(3, 3)]),
    "slice_scatter_negative": (lambda x, s: torch.slice_scatter(x, s, 0, -3, -1),
                               [lambda: torch.randn(5, 2), lambda: torch.randn(2, 2)]),
    "select_scatter": (lambda x, s: torch.select_scatter(x, s, 1, -1), [lambda: torch.randn(3, 4),
                                                                         lambda: torch.randn(3)]),
    "diagonal_scatter": (lambda x, s: torch.diagonal_scatter(x, s, -1), [lambda: torch.randn(4, 3),
                                                                          lambda: torch.randn(3)]),
    "index_fill": (lambda x, i: x.index_fill(1, i, -2.0), [lambda: torch.randn(3, 5),
                                                            lambda: torch.tensor([4, -5, 1])]),
    "block_diag": (lambda a, b, c: torch.block_diag(a, b, c), [lambda: torch.randn(2, 3), lambda: torch.randn(4),
                                                               lambda: torch.randn(())]),
    "cartesian_prod": (lambda a, b, c: torch.cartesian_prod(a, b, c), [lambda: torch.randn(3), lambda: torch.randn(2),
                                                                       lambda: torch.randn(4)]),
    "bucketize": (lambda v, b: torch.bucketize(v, b), [lambda: torch.randn(4, 5), lambda: _sorted(7)]),
    "bucketize_right": (lambda v, b: torch.bucketize(v, b, right=True, out_int32=True),
                        [lambda: torch.randint(-3, 3, (6,)).float(), lambda: torch.arange(-2.0, 3.0)]),
    "searchsorted_rows": (lambda b, v: torch.searchsorted(b, v, side="right"), [lambda: _sorted(3, 6),
                                                                                 lambda: torch.randn(3, 4)]),
    "isin": (lambda x, t: torch.isin(x, t), [lambda: torch.randint(0, 8, (3, 4)), lambda: torch.randint(0, 8, (5,))]),
    "isin_invert": (lambda x, t: torch.isin(x, t, invert=True), [lambda: torch.randint(0, 6, (7,)),
                                                                 lambda: torch.randint(0, 6, (2, 2))]),
    "trapezoid": (lambda y: torch.trapezoid(y, dx=0.5), [lambda: torch.randn(3, 5)]),
    "trapezoid_x": (lambda y, x: torch.trapezoid(y, x, dim=0), [lambda: torch.randn(5, 3), lambda: _sorted(5)]),
    "sum_to_size": (lambda x: x.sum_to_size(3, 1), [lambda: torch.randn(2, 3, 4)]),
    "conjugates": (lambda x: (torch.conj(x) * 2, torch.resolve_conj(x), torch.conj_physical(x)),
                   [lambda: torch.randn(3, 4)]),
    "softmax_backward": (lambda g, x: aten._softmax_backward_data(g, x.softmax(1), 1, torch.float32),
                         [lambda: torch.randn(3, 4), lambda: torch.randn(3, 4)]),
    "safe_softmax": (lambda x: aten._safe_softmax(x.masked_fill(x > 1, float("-inf")), -1),
                     [lambda: torch.randn(6, 3) + torch.tensor([[5.0], [0], [0], [0], [0], [0]])]),
    "dropout_backward": (lambda g, m: aten.native_dropout_backward(g, m > 0, 2.0),
                         [lambda: torch.randn(3, 4), lambda: torch.randn(3, 4)]),
}
GRADIENTS = ["slice_scatter", "select_scatter", "diagonal_scatter", "index_fill", "block_diag", "cartesian_prod",
             "trapezoid", "trapezoid_x", "sum_to_size"]


def _arguments(name: str, dtype: torch.dtype) -> list[torch.Tensor]:
    return [a.to(dtype) if a.is_floating_point() else a for a in (make() for make in CASES[name][1])]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64], ids=str)
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_eager(name: str, dtype: torch.dtype, backend: str) -> None:
    if dtype == torch.float64 and name == "softmax_backward":
        pytest.skip("the test's input_dtype is float32")
    fn, args = CASES[name][0], _arguments(name, dtype)
    compiled = minicompiler.compile(lambda *a: fn(*a), backend=backend)
    expected, actual = fn(*args), compiled(*args)
    torch.testing.assert_close(actual, expected)
    for e, a in zip(*(r if isinstance(r, tuple) else (r,) for r in (expected, actual)), strict=True):
        assert (e.dtype, e.shape) == (a.dtype, a.shape)
    assert_generated(compiled)


@pytest.mark.parametrize("name", GRADIENTS)
def test_gradient(name: str) -> None:
    fn, args = CASES[name][0], _arguments(name, torch.float64)
    compiled_gradients_match(fn, args)


def test_index_fill_out_of_range_raises() -> None:
    fn = CASES["index_fill"][0]
    compiled = minicompiler.compile(fn, backend="cpp")
    with pytest.raises(IndexError, match="out of bounds"):
        compiled(torch.randn(3, 5), torch.tensor([1, 5]))
