"""torch.masked's reductions and normalisations, lowered at capture to a `where` in front of the
plain op (capture/torch_masked.py): each compiled to generated kernels only (no extern call), vs
eager on fresh random inputs and masks, on C++ over dtypes and on Triton (TRITON_INTERPRET=1);
gradients in float64. Each mask leaves one row with no element kept, where eager gives NaN (mean,
var, softmax) or the identity (sum 0, amax -inf)."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
import torch
from torch import masked

import minicompiler

from .conftest import assert_generated

BACKENDS = ["cpp"] + (["triton"] if os.environ.get("TRITON_INTERPRET") == "1" else [])
COMBOS = ([("cpp", d) for d in (torch.float32, torch.float64, torch.float16)]
          + [(b, torch.float32) for b in BACKENDS[1:]])

# name -> (function of (x, mask), shape of x, shape of the mask or None for no mask)
CASES: dict[str, tuple[Callable[..., Any], tuple[int, ...], tuple[int, ...] | None]] = {
    "sum": (lambda x, m: masked.sum(x, 1, mask=m), (4, 5), (4, 5)),
    "sum_all_keepdim": (lambda x, m: masked.sum(x, keepdim=True, mask=m), (3, 4), (4,)),  # mask broadcast
    "sum_no_mask": (lambda x, m: masked.sum(x, (0, 2)), (3, 4, 2), None),
    "amax": (lambda x, m: masked.amax(x, -1, mask=m), (4, 5), (4, 5)),
    "amin": (lambda x, m: masked.amin(x, (0,), keepdim=True, mask=m), (4, 5), (4, 5)),
    "logsumexp": (lambda x, m: masked.logsumexp(x, 1, mask=m), (4, 5), (4, 5)),
    "mean": (lambda x, m: masked.mean(x, 1, mask=m), (4, 5), (4, 5)),
    "mean_no_mask": (lambda x, m: masked.mean(x, keepdim=True), (3, 4), None),
    "var": (lambda x, m: masked.var(x, 1, mask=m), (4, 5), (4, 5)),
    "var_biased_keepdim": (lambda x, m: masked.var(x, 0, False, keepdim=True, mask=m), (5, 4), (5, 4)),
    "std": (lambda x, m: masked.std(x, (0, 1), correction=2, mask=m), (4, 5, 2), (4, 5, 2)),
    "std_no_mask": (lambda x, m: masked.std(x, 1), (4, 5), None),
    "norm": (lambda x, m: masked.norm(x, 2.0, 1, mask=m), (4, 5), (4, 5)),
    "norm_1": (lambda x, m: masked.norm(x, 1, 0, keepdim=True, mask=m), (4, 5), (4, 5)),
    "norm_min": (lambda x, m: masked.norm(x, -float("inf"), 1, mask=m), (4, 5), (4, 5)),
    "normalize": (lambda x, m: masked.normalize(x, 2.0, 1, mask=m), (4, 5), (4, 5)),
    "softmax": (lambda x, m: masked.softmax(x, 1, mask=m), (4, 5), (4, 5)),
    "log_softmax": (lambda x, m: masked.log_softmax(x, -1, mask=m), (4, 5), (4, 5)),
    "softmin": (lambda x, m: masked.softmin(x, 0, mask=m), (5, 4), (5, 4)),
}
# amax/amin/norm(-inf) of a row with nothing kept is an infinity, and -inf from logsumexp: their
# gradients there are NaN in eager and compiled alike, so those are checked with every row kept
GRADIENTS = ["sum", "sum_all_keepdim", "mean", "mean_no_mask", "var", "var_biased_keepdim", "std",
             "std_no_mask", "norm", "norm_1", "normalize", "softmax", "log_softmax", "softmin"]
FULL_ROWS = ["amax", "amin", "logsumexp", "norm_min"]


def _arguments(name: str, dtype: torch.dtype, empty_row: bool = True) -> list[Any]:
    _, shape, mask_shape = CASES[name]
    x = torch.randn(shape, dtype=torch.float64).to(dtype)
    if mask_shape is None:
        return [x, None]
    mask = torch.rand(mask_shape) < 0.7
    mask.view(-1)[0] = True  # keep an element of the first row: its values are numbers
    if empty_row and len(mask_shape) > 1:
        mask[-1] = False  # and none of the last: NaN or the identity, as eager says
    return [x, mask]


@pytest.mark.parametrize(("backend", "dtype"), COMBOS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_masked_matches_eager(name: str, backend: str, dtype: torch.dtype) -> None:
    fn, args = CASES[name][0], _arguments(name, dtype)
    compiled = minicompiler.compile(fn, backend=backend)
    tol = {"atol": 2e-2, "rtol": 2e-2} if dtype == torch.float16 else {}
    torch.testing.assert_close(compiled(*args), fn(*args), equal_nan=True, **tol)
    assert_generated(compiled)


@pytest.mark.parametrize("name", GRADIENTS + FULL_ROWS)
def test_masked_gradient(name: str) -> None:
    fn = CASES[name][0]
    x, mask = _arguments(name, torch.float64, empty_row=name not in FULL_ROWS)
    x.requires_grad_()
    compiled = minicompiler.compile(fn, backend="cpp")
    # the NaNs of a row with nothing kept are left out of the loss, as a masked loss would
    expected = torch.autograd.grad(fn(x, mask).nan_to_num(0.0).sum(), x)
    actual = torch.autograd.grad(compiled(x, mask).nan_to_num(0.0).sum(), x)
    torch.testing.assert_close(actual, expected, equal_nan=True)
