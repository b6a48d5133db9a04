"""Reductions to a product or a position (capture/torch_reductions.py, torch_masked.py): prod,
argmax/argmin, max/min along a dim (values and indices), aminmax, masked.prod/argmax/argmin,
each compiled to generated kernels only (no extern call), vs eager on fresh random inputs, on C++
over dtypes and on Triton (TRITON_INTERPRET=1); gradients in float64.

The inputs are whole numbers in [-3, 3]: rows have ties (the first position must win, as in
eager) and zeros (a product's gradient has its own rule there); some have NaNs (argmax counts NaN
the largest, argmin the smallest, the first one wins)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import masked

import minicompiler

from .conftest import assert_generated, assert_same_as_eager

BACKENDS = ["cpp"] + (["triton"] if os.environ.get("TRITON_INTERPRET") == "1" else [])
COMBOS = ([("cpp", d) for d in (torch.float32, torch.float64, torch.float16)]
          + [(b, torch.float32) for b in BACKENDS[1:]])
NAN = float("nan")

# name -> (function of (x, mask), shape of x, the non-float dtypes eager accepts)
INTEGERS = (torch.int64, torch.bool)
CASES: dict[str, tuple[Callable[..., Any], tuple[int, ...], tuple[torch.dtype, ...]]] = {
    "prod": (lambda x, m: torch.prod(x), (3, 4), INTEGERS),
    "prod_dim": (lambda x, m: torch.prod(x, 1), (5, 7), INTEGERS),
    "prod_keepdim": (lambda x, m: x.prod(-1, keepdim=True), (4, 3, 5), ()),
    "prod_dtype": (lambda x, m: torch.prod(x, 0, dtype=torch.float64), (4, 6), (torch.int64,)),
    "prod_transposed": (lambda x, m: torch.prod(x.t(), 1), (6, 4), ()),  # along a stride-4 dim
    "prod_empty_dim": (lambda x, m: torch.prod(x, 1), (3, 0), INTEGERS),  # the identity, 1
    "prod_0d": (lambda x, m: torch.prod(x, 0), (), ()),
    "argmax": (lambda x, m: torch.argmax(x), (4, 5), (torch.int64,)),  # the position in x flattened
    "argmax_dim": (lambda x, m: torch.argmax(x, 1), (5, 9), (torch.int64,)),
    "argmax_nan": (lambda x, m: torch.argmax(x, -1), (4, 7), ()),
    "argmin_keepdim": (lambda x, m: x.argmin(0, keepdim=True), (6, 4), (torch.int64,)),
    "argmin_nan": (lambda x, m: torch.argmin(x), (4, 7), ()),
    "argmax_sliced": (lambda x, m: torch.argmax(x[:, ::2], 1), (4, 11), ()),
    "argmax_empty_rows": (lambda x, m: torch.argmax(x, 1), (0, 3), ()),
    "argmin_0d": (lambda x, m: torch.argmin(x), (), ()),
    "argmax_long_rows": (lambda x, m: torch.argmax(x, 1), (3, 5000), ()),  # Triton: several blocks a row
    "max_dim": (lambda x, m: torch.max(x, 1), (5, 7), INTEGERS),
    "max_nan": (lambda x, m: x.max(dim=-1), (4, 7), ()),
    "min_dim_keepdim": (lambda x, m: torch.min(x, 0, keepdim=True), (6, 5), (torch.int64,)),
    "min_transposed": (lambda x, m: torch.min(x.t(), 1).indices, (6, 4), ()),
    "max_0d": (lambda x, m: torch.max(x, 0), (), ()),
    "aminmax": (lambda x, m: torch.aminmax(x, dim=1), (5, 6), INTEGERS),
    "aminmax_all": (lambda x, m: torch.aminmax(x, keepdim=True), (3, 4), ()),
    "masked_prod": (lambda x, m: masked.prod(x, 1, mask=m), (4, 5), ()),
    "masked_prod_all": (lambda x, m: masked.prod(x, mask=m), (3, 4), ()),
    "masked_argmax": (lambda x, m: masked.argmax(x, 1, mask=m), (4, 5), ()),
    "masked_argmin": (lambda x, m: masked.argmin(x, 0, keepdim=True, mask=m), (5, 4), ()),
}
# the flat positions of NaNs: two in the first row (the first must win), one in another
NANS = {"argmax_nan": [2, 5, 10], "argmin_nan": [2, 5, 10], "max_nan": [2, 5, 10]}
# products' gradients: the flat positions of zeros in random normal inputs: a row with one zero
# and a row with two (one zero of the whole tensor for the products over all dims)
ZEROS = {"prod": [5], "prod_dim": [1, 7, 12], "prod_keepdim": [1, 7, 9], "prod_transposed": [1, 4, 8],
         "masked_prod": [1, 7, 9], "masked_prod_all": [5]}
GRADIENTS = ["prod", "prod_dim", "prod_keepdim", "prod_transposed", "prod_0d", "max_dim", "max_nan",
             "min_dim_keepdim", "max_0d", "aminmax", "aminmax_all", "masked_prod", "masked_prod_all"]


def _arguments(name: str, dtype: torch.dtype) -> list[Any]:
    _, shape, _ = CASES[name]
    x = torch.randint(-3, 4, shape).to(torch.float64)
    x.view(-1)[NANS.get(name, [])] = NAN
    x = x > 0 if dtype == torch.bool else x.to(dtype)
    return [x, torch.rand(shape) < 0.7]


@pytest.mark.parametrize(("backend", "dtype"), COMBOS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_reduction_matches_eager(name: str, backend: str, dtype: torch.dtype) -> None:
    fn, args = CASES[name][0], _arguments(name, dtype)
    compiled = minicompiler.compile(fn, backend=backend)
    # float16 products: eager multiplies in float16, the kernels in float32 (rounded once)
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.float16 else {}
    torch.testing.assert_close(compiled(*args), fn(*args), equal_nan=True, **tol)
    assert_generated(compiled)


INTEGER_CASES = [(name, dtype) for name in sorted(CASES) for dtype in CASES[name][2]]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("name", "dtype"), INTEGER_CASES)
def test_integer_reduction_matches_eager(name: str, dtype: torch.dtype, backend: str) -> None:
    """Integers and bool multiply in int64 (as eager's prod); positions of int64 and bool values."""
    fn, args = CASES[name][0], _arguments(name, dtype)
    assert_same_as_eager(minicompiler.compile(fn, backend=backend), fn, args)


@pytest.mark.parametrize("name", GRADIENTS)
def test_reduction_gradient(name: str) -> None:
    """Products: rows with no zero, one zero and two (each zero's gradient is the product of the
    others); max/min along a dim: all of it to the one element at the position, ties or not;
    aminmax: shared among ties, as amin's and amax's."""
    fn = CASES[name][0]
    x, mask = _arguments(name, torch.float64)
    if name in ZEROS:
        x = torch.randn(x.shape, dtype=torch.float64)
        x.view(-1)[ZEROS[name]] = 0.0
    x.requires_grad_()

    def loss(fn: Callable[..., Any]) -> torch.Tensor:
        out = fn(x, mask)
        values = [o for o in (out if isinstance(out, tuple) else (out,)) if o.is_floating_point()]
        return sum((v * torch.randn_like(v, generator=torch.Generator().manual_seed(i))).sum()
                   for i, v in enumerate(values))

    compiled = minicompiler.compile(fn, backend="cpp")
    expected = torch.autograd.grad(loss(fn), x)
    actual = torch.autograd.grad(loss(compiled), x)
    torch.testing.assert_close(actual, expected, equal_nan=True)
