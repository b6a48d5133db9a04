"""Guards and recompiles: every assumption capture made is checked on each call; a change
recompiles (never a stale result), the report names the guard that failed, and past the cache
limit the function runs eagerly with one warning."""

from __future__ import annotations

import warnings

import pytest
import torch
from torch import nn

import minicompiler
from minicompiler.api import CACHE_SIZE_LIMIT

from .conftest import assert_same

OFFSET = 1.0


def uses_global(x):
    return x + OFFSET


class Scaled(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.scale = 2.0
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        return self.drop(x) * self.scale


def test_changing_a_global_recompiles() -> None:
    global OFFSET
    compiled = minicompiler.compile(uses_global, backend="eager")
    x = torch.randn(4)
    assert_same(compiled(x), uses_global(x))
    OFFSET = 5.0
    try:
        assert_same(compiled(x), uses_global(x))
    finally:
        OFFSET = 1.0
    assert "OFFSET" in compiled.report.recompile_reason


def test_module_attribute_and_train_eval_recompile() -> None:
    model = Scaled().eval()
    compiled = minicompiler.compile(model, backend="eager")
    x = torch.randn(8)
    assert_same(compiled(x), model(x))
    model.scale = 3.0
    assert_same(compiled(x), model(x))
    assert "scale" in compiled.report.recompile_reason
    model.train()
    torch.manual_seed(1)
    out = compiled(x)
    assert "training" in compiled.report.recompile_reason
    assert ((out == 0) | torch.isclose(out, x * 2 * 3.0)).all()  # dropout in training mode: zeros or x/(1-p)*s


@pytest.mark.parametrize("change", ["shape", "dtype"])
def test_a_new_shape_or_dtype_recompiles_and_stays_correct(change: str) -> None:
    fn = lambda x: torch.softmax(x * 2, dim=-1)  # noqa: E731
    compiled = minicompiler.compile(fn, backend="cpp")
    first = torch.randn(4, 8)
    second = torch.randn(4, 16) if change == "shape" else torch.randn(4, 8, dtype=torch.float64)
    for x in (first, second, first):
        assert_same(compiled(x), fn(x))
    assert len(compiled.reports) == 2
    assert "guard failed: x: " in compiled.report.recompile_reason


def test_a_list_length_is_guarded() -> None:
    fn = lambda xs: sum(x * i for i, x in enumerate(xs))  # noqa: E731
    compiled = minicompiler.compile(fn, backend="eager")
    for n in (2, 3):
        xs = [torch.randn(3) for _ in range(n)]
        assert_same(compiled(xs), fn(xs))
    assert "len(args[0]) == 2" in compiled.report.recompile_reason


def test_past_the_cache_limit_runs_eagerly_with_one_warning() -> None:
    fn = lambda x, k: x * k  # noqa: E731
    compiled = minicompiler.compile(fn, backend="eager")
    x = torch.randn(3)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        for k in range(CACHE_SIZE_LIMIT + 3):
            assert_same(compiled(x, k), fn(x, k))
    assert len(compiled.cache) == CACHE_SIZE_LIMIT
    assert len([w for w in caught if "cache size limit" in str(w.message)]) == 1
