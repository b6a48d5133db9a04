"""Scans (capture/torch_reductions.py, torch_masked.py; ir/scans.py): cumsum, cumprod,
logcumsumexp, cummax/cummin (values and indices), masked.cumsum/cumprod, each compiled to
generated kernels only (no extern call), vs eager on fresh random inputs, on C++ over dtypes and
on Triton (TRITON_INTERPRET=1); gradients in float64.

The inputs are whole numbers in [-3, 3]: rows have ties (cummax's position is the last of equal
values, as in eager) and zeros; some have NaNs and infinities."""

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
NAN, INF = float("nan"), float("inf")

# name -> (function of (x, mask), shape of x, the non-float dtypes eager accepts)
INTEGERS = (torch.int64, torch.bool)
CASES: dict[str, tuple[Callable[..., Any], tuple[int, ...], tuple[torch.dtype, ...]]] = {
    "cumsum": (lambda x, m: torch.cumsum(x, 1), (5, 7), INTEGERS),
    "cumsum_dim0": (lambda x, m: x.cumsum(0), (6, 4), ()),
    "cumsum_dtype": (lambda x, m: torch.cumsum(x, -1, dtype=torch.float64), (4, 5), (torch.int64,)),
    "cumsum_transposed": (lambda x, m: torch.cumsum(x.t(), 1), (6, 4), ()),
    "cumsum_sliced": (lambda x, m: torch.cumsum(x[:, 1::2], 1), (3, 9), ()),
    "cumsum_3d": (lambda x, m: torch.cumsum(x, 1), (2, 5, 3), ()),
    "cumsum_long_rows": (lambda x, m: torch.cumsum(x, 1), (3, 5000), ()),  # Triton: several blocks a row
    "cumsum_0d": (lambda x, m: torch.cumsum(x, 0), (), INTEGERS),
    "cumsum_empty_dim": (lambda x, m: torch.cumsum(x, 1), (3, 0), ()),
    "cumsum_empty_rows": (lambda x, m: torch.cumsum(x, 1), (0, 4), ()),
    "cumsum_fused": (lambda x, m: torch.softmax(torch.cumsum(x.exp(), 1) * 0.1, 1), (4, 6), ()),
    "cumprod": (lambda x, m: torch.cumprod(x, 1), (5, 7), INTEGERS),
    "cumprod_nan": (lambda x, m: x.cumprod(-1), (4, 7), ()),
    "cumprod_dim0": (lambda x, m: torch.cumprod(x.t(), 0) * 0.5, (6, 9), ()),
    "logcumsumexp": (lambda x, m: torch.logcumsumexp(x, 1), (5, 7), ()),
    "logcumsumexp_specials": (lambda x, m: torch.logcumsumexp(x, 0), (7, 3), ()),
    "cummax": (lambda x, m: torch.cummax(x, 1), (5, 9), INTEGERS),
    "cummax_nan": (lambda x, m: torch.cummax(x, -1), (4, 7), ()),
    "cummin": (lambda x, m: x.cummin(0), (6, 4), (torch.int64,)),
    "cummin_nan": (lambda x, m: torch.cummin(x, 1), (4, 7), ()),
    "cummax_long_rows": (lambda x, m: torch.cummax(x, 1), (2, 5000), ()),  # two blocks a row
    "cummax_transposed": (lambda x, m: torch.cummax(x.t(), 1).indices, (6, 4), ()),
    "masked_cumsum": (lambda x, m: masked.cumsum(x, 1, mask=m), (4, 5), ()),
    # the running sum of trapezoids: of width dx, or between sample points (1-d along dim, or one per element)
    "cumulative_trapezoid": (lambda x, m: torch.cumulative_trapezoid(x, dx=0.5), (4, 6), (torch.int64,)),
    "cumulative_trapezoid_1d_points": (lambda x, m: torch.cumulative_trapezoid(x, x[:, 0].abs().cumsum(0), dim=0),
                                       (5, 3), ()),
    "cumulative_trapezoid_points": (lambda x, m: torch.cumulative_trapezoid(x, x.abs().cumsum(1)), (3, 6), ()),
    "masked_cumprod": (lambda x, m: masked.cumprod(x, 0, mask=m), (5, 4), ()),
}
# the flat positions of NaNs (two in the first row) and of infinities
NANS = {"cumprod_nan": [2, 5, 10], "cummax_nan": [2, 5, 10], "cummin_nan": [2, 5, 10],
        "logcumsumexp_specials": [9]}
SPECIALS = {"logcumsumexp_specials": {-INF: [0, 3, 6, 4], INF: [7, 10, 13]}}
# cumsum's and cumprod's gradients are generated; logcumsumexp's and cummax/cummin's stay torch calls
GRADIENTS = ["cumsum", "cumsum_transposed", "cumsum_fused", "cumsum_0d", "masked_cumsum", "cumulative_trapezoid",
             "cumulative_trapezoid_points", "cumprod", "cumprod_dim0",
             "logcumsumexp", "cummax", "cummin", "masked_cumprod"]


def _arguments(name: str, dtype: torch.dtype) -> list[Any]:
    _, shape, _ = CASES[name]
    x = torch.randint(-3, 4, shape).to(torch.float64)
    x.view(-1)[NANS.get(name, [])] = NAN
    for value, positions in SPECIALS.get(name, {}).items():
        x.view(-1)[positions] = value
    x = x > 0 if dtype == torch.bool else x.to(dtype)
    return [x, torch.rand(shape) < 0.7]


@pytest.mark.parametrize(("backend", "dtype"), COMBOS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_scan_matches_eager(name: str, backend: str, dtype: torch.dtype) -> None:
    fn, args = CASES[name][0], _arguments(name, dtype)
    compiled = minicompiler.compile(fn, backend=backend)
    # float16: eager rounds its running value to float16 at every step, the kernels keep it in float32
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.float16 else {}
    torch.testing.assert_close(compiled(*args), fn(*args), equal_nan=True, **tol)
    assert_generated(compiled)


INTEGER_CASES = [(name, dtype) for name in sorted(CASES) for dtype in CASES[name][2]]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("name", "dtype"), INTEGER_CASES)
def test_integer_scan_matches_eager(name: str, dtype: torch.dtype, backend: str) -> None:
    """Integers and bool add up and multiply in int64 (as eager's); cummax/cummin keep their dtype."""
    fn, args = CASES[name][0], _arguments(name, dtype)
    assert_same_as_eager(minicompiler.compile(fn, backend=backend), fn, args)


@pytest.mark.parametrize("name", GRADIENTS)
def test_scan_gradient(name: str) -> None:
    fn = CASES[name][0]
    x, mask = _arguments(name, torch.float64)
    # moved off whole numbers (no ties), but the zeros kept: cumprod's gradient has its own rule there
    x = torch.where(x == 0, x, x + 0.25 * torch.randn_like(x)).requires_grad_()

    def loss(fn: Callable[..., Any]) -> torch.Tensor:
        out = fn(x, mask)
        values = [o for o in (out if isinstance(out, tuple) else (out,)) if o.is_floating_point()]
        return sum((v * torch.randn_like(v, generator=torch.Generator().manual_seed(i))).sum()
                   for i, v in enumerate(values))

    compiled = minicompiler.compile(fn, backend="cpp")
    expected = torch.autograd.grad(loss(fn), x)
    actual = torch.autograd.grad(loss(compiled), x)
    torch.testing.assert_close(actual, expected, equal_nan=True)


@pytest.mark.skipif("triton" not in BACKENDS, reason="Triton runs here under TRITON_INTERPRET=1 only")
@pytest.mark.parametrize("name", ["cumsum", "cumprod", "logcumsumexp", "cummax_nan", "cummin_nan"])
def test_triton_scan_carries_across_blocks(name: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows of 50 swept 16 at a time, several rows per program (some past the last row): each
    block's scan continues the blocks before it. argmax/argmin's (value, position) pairs too."""
    from minicompiler.codegen import triton as triton_backend

    monkeypatch.setattr(triton_backend, "MAX_RBLOCK", 16)
    scan_fn = CASES[name][0]

    def fn(x: torch.Tensor, m: torch.Tensor) -> Any:
        return scan_fn(x, m), torch.argmax(x, 1), torch.argmin(x, 1)

    x = torch.randint(-3, 4, (7, 50)).float()
    x.view(-1)[[3, 20, 40, 130]] = NAN
    compiled = minicompiler.compile(fn, backend="triton")
    torch.testing.assert_close(compiled(x, None), fn(x, None), equal_nan=True)
    assert_generated(compiled)
