"""Gathers (decompose/gathers.py, capture/torch_gathers.py): flip, roll, repeat, pad, cat, gather,
embedding, ... each one `load_at` kernel, vs eager on fresh random inputs, on C++ over dtypes and
non-contiguous inputs, on Triton (TRITON_INTERPRET=1); gradients in float64; indices out of range
raise as eager's; the result is a copy, never the input's memory."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F

import minicompiler

from .conftest import assert_generated

BACKENDS = ["cpp"] + (["triton"] if os.environ.get("TRITON_INTERPRET") == "1" else [])
DTYPES = [torch.float32, torch.float64, torch.float16, torch.int64, torch.bool]


def _ints(high: int, *shape: int) -> torch.Tensor:
    return torch.randint(0, high, shape)


# name -> (function of x, x's shape, other arguments made afresh per call)
CASES: dict[str, tuple[Callable[..., Any], tuple[int, ...], Callable[[], list[Any]]]] = {
    "flip": (lambda x: torch.flip(x, (0, 2)), (3, 4, 5), list),
    "flip_method": (lambda x: x.flip(-1), (3, 4), list),
    "fliplr": (torch.fliplr, (3, 4), list),
    "roll": (lambda x: torch.roll(x, (2, -1), (0, 1)), (4, 5), list),
    "roll_flat": (lambda x: torch.roll(x, 7), (3, 4), list),
    "rot90": (lambda x: torch.rot90(x, 1, (0, 1)), (3, 4), list),
    "rot90_3": (lambda x: torch.rot90(x, -1, (1, 0)), (3, 4, 2), list),
    "repeat": (lambda x: x.repeat(2, 1, 3), (3, 4), list),
    "tile": (lambda x: torch.tile(x, (2,)), (3, 4), list),
    "pad_constant": (lambda x: F.pad(x, (1, 2, 0, 3), value=1.0), (2, 3, 4), list),
    "pad_crop": (lambda x: F.pad(x, (-1, 2)), (3, 5), list),
    "pad_reflect": (lambda x: F.pad(x, (2, 3), mode="reflect"), (2, 3, 5), list),
    "pad_replicate": (lambda x: F.pad(x, (1, 2, 2, 1), mode="replicate"), (1, 2, 3, 4), list),
    "pad_circular": (lambda x: F.pad(x, (2, -1), mode="circular"), (2, 3, 4), list),
    "cat": (lambda x, y: torch.cat([x, y, x], dim=1), (3, 4), lambda: [torch.randn(3, 2)]),
    "stack": (lambda x, y: torch.stack([x, y], dim=-1), (3, 4), lambda: [torch.randn(3, 4)]),
    "hstack": (lambda x, y: torch.hstack([x, y]), (3, 4), lambda: [torch.randn(3, 1)]),
    "column_stack": (lambda x, y: torch.column_stack([x[:, 0], y]), (3, 4), lambda: [torch.randn(3, 2)]),
    "gather": (lambda x, i: torch.gather(x, 1, i), (3, 5), lambda: [_ints(5, 3, 7)]),
    "take_along_dim": (lambda x, i: torch.take_along_dim(x, i - 2, 0), (4, 3), lambda: [_ints(4, 2, 1)]),
    "index_select": (lambda x, i: torch.index_select(x, 0, i), (5, 3), lambda: [_ints(5, 8)]),
    "take": (lambda x, i: torch.take(x, i - 6), (3, 4), lambda: [_ints(18, 2, 5)]),
    "embedding": (lambda w, i: F.embedding(i, w), (6, 4), lambda: [_ints(6, 2, 3)]),
    "advanced_index": (lambda x, i: x[i - 2], (4, 3), lambda: [_ints(4, 2, 3)]),  # negative ones too
    "advanced_index_pair": (lambda x, i, j: x[:, i, j - 1] * 2, (2, 4, 5), lambda: [_ints(4, 3), _ints(5, 2, 1)]),
    "advanced_index_sliced": (lambda x, i: x[1:, ..., i], (3, 2, 4), lambda: [_ints(4, 5)]),
    "masked_fill": (lambda x, m: x.masked_fill(m > 0, 1), (3, 4), lambda: [torch.randn(4)]),
    "diag": (lambda x: torch.diag(x, 1) + 0, (4,), list),
    "diag_of_matrix": (lambda x: torch.diag(x, -1), (4, 5), list),
    "diag_embed": (lambda x: torch.diag_embed(x, -1, 0, 2), (2, 3), list),
    "diagflat": (lambda x: torch.diagflat(x.t()), (2, 3), list),
    "permute_copy": (lambda x: torch.permute_copy(x, (1, 0)), (3, 4), list),
    "clone_of_slice": (lambda x: x[:, 1::2].clone(), (3, 5), list),
}
FLOAT_ONLY = {"pad_reflect", "pad_replicate", "pad_circular"}  # torch has no integer kernels for these
GRADIENTS = ["flip", "roll_flat", "repeat", "pad_constant", "pad_reflect", "cat", "gather", "index_select",
             "take", "embedding", "masked_fill", "diag_embed", "diag_of_matrix", "advanced_index",
             "advanced_index_pair"]


def _call(name: str, dtype: torch.dtype, transposed: bool = False) -> tuple[Callable[..., Any], list[Any]]:
    fn, shape, others = CASES[name]
    x = torch.randn(shape[::-1] if transposed else shape).mul(4)
    x = (x.t() if transposed else x).to(dtype) if dtype != torch.bool else (x > 0)
    extra = [a.to(dtype) if a.is_floating_point() and dtype != torch.bool else a for a in others()]
    return fn, [x, *extra]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
@pytest.mark.parametrize("name", sorted(CASES))
def test_gather_matches_eager_cpp(name: str, dtype: torch.dtype) -> None:
    if name in FLOAT_ONLY and not dtype.is_floating_point:
        pytest.skip("eager has no kernel for this dtype")
    fn, args = _call(name, dtype)
    compiled = minicompiler.compile(lambda *a: fn(*a), backend="cpp")
    torch.testing.assert_close(compiled(*args), fn(*args))
    assert_generated(compiled)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", [n for n in sorted(CASES) if len(CASES[n][1]) == 2])
def test_gather_of_transposed_input(name: str, backend: str) -> None:
    fn, args = _call(name, torch.float32, transposed=True)
    compiled = minicompiler.compile(lambda *a: fn(*a), backend=backend)
    torch.testing.assert_close(compiled(*args), fn(*args))


@pytest.mark.parametrize("name", GRADIENTS)
def test_gather_gradient(name: str) -> None:
    fn, args = _call(name, torch.float64)
    args = [a.requires_grad_() if a.is_floating_point() else a for a in args]
    floats = [a for a in args if a.requires_grad]
    weights = torch.randn(fn(*args).shape, dtype=torch.float64)
    compiled = minicompiler.compile(lambda *a: fn(*a), backend="cpp")
    # (masked_fill's mask is made by a comparison: no gradient reaches it, here as in eager)
    expected = torch.autograd.grad((fn(*args) * weights).sum(), floats, allow_unused=True, materialize_grads=True)
    actual = torch.autograd.grad((compiled(*args) * weights).sum(), floats, allow_unused=True,
                                 materialize_grads=True)
    torch.testing.assert_close(actual, expected)


def test_embedding_padding_row_gets_no_gradient() -> None:
    weight = torch.randn(5, 3, dtype=torch.float64, requires_grad=True)
    ids = torch.tensor([[0, 2, 2], [4, 2, 1]])

    def fn(w: torch.Tensor, i: torch.Tensor) -> torch.Tensor:
        return F.embedding(i, w, padding_idx=-3)  # row 2

    compiled = minicompiler.compile(fn, backend="cpp")
    torch.testing.assert_close(compiled(weight, ids), fn(weight, ids))
    (grad,) = torch.autograd.grad(compiled(weight, ids).sum(), weight)
    (expected,) = torch.autograd.grad(fn(weight, ids).sum(), weight)
    torch.testing.assert_close(grad, expected)
    assert grad[2].abs().sum() == 0


@pytest.mark.parametrize(("name", "bad"), [("gather", 5), ("index_select", -1), ("take", 12), ("embedding", 6)])
def test_index_out_of_range_raises(name: str, bad: int) -> None:
    fn, args = _call(name, torch.float32)
    args[1] = args[1].clone()
    args[1].view(-1)[-1] = bad + (6 if name == "take" else 0)  # the functions above shift take's indices by -6
    with pytest.raises((IndexError, RuntimeError)):
        fn(*args)
    compiled = minicompiler.compile(lambda *a: fn(*a), backend="cpp")
    with pytest.raises(IndexError, match="out of bounds"):
        compiled(*args)


def test_advanced_index_checks_each_index() -> None:
    """x[i, j] reads one flat position of x's two dims: j past its dim must still raise, even
    where i * 5 + j would land inside x."""
    fn = lambda x, i, j: x[i, j]  # noqa: E731
    compiled = minicompiler.compile(fn, backend="cpp")
    x, i = torch.randn(4, 5), torch.tensor([0, 1])
    torch.testing.assert_close(compiled(x, i, torch.tensor([4, -5])), fn(x, i, torch.tensor([4, -5])))
    for bad in (5, -6):
        with pytest.raises(IndexError, match="out of bounds"):
            compiled(x, i, torch.tensor([0, bad]))


def test_indexing_by_mask_or_apart_stays_eager() -> None:
    """Index tensors apart from each other (or beside an int) move their dims to the front: one
    torch call. A mask's result has as many elements as it has Trues: a graph break. Both correct."""
    x, i = torch.randn(3, 4, 5), torch.tensor([2, 0])
    for fn in (lambda x, i: x[i, :, i], lambda x, i: x[0, i], lambda x, i: x[x > 0]):
        compiled = minicompiler.compile(fn, backend="cpp")
        torch.testing.assert_close(compiled(x, i), fn(x, i))
    assert compiled.report.graph_breaks and "nonzero" in compiled.report.graph_breaks[0].reason
    apart = minicompiler.compile(lambda x, i: x[i, :, i], backend="cpp")
    apart(x, i)
    assert "extern" in {k.kind for g in apart.report.graphs for k in g.kernels}


def test_gather_fuses_with_its_neighbours() -> None:
    """flip(x * 2) + 1: the product is stored (flip reads it elsewhere than its own element), the
    flip and the sum are one kernel."""
    def fn(x: torch.Tensor) -> torch.Tensor:
        return torch.flip(x * 2, (0,)) + 1

    compiled = minicompiler.compile(fn, backend="cpp")
    x = torch.randn(6, 5)
    torch.testing.assert_close(compiled(x), fn(x))
    kernels = [k for g in compiled.report.graphs for k in g.kernels]
    assert [k.kind for k in kernels] == ["pointwise", "pointwise"]
    fusion = [f for g in compiled.report.graphs for f in g.fusion if not f.fused]
    assert any("load_at" in f.reason for f in fusion)


def test_copies_do_not_share_memory() -> None:
    def fn(x: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return x.clone(), x.clone(), torch.cat([x]), x.contiguous()

    compiled = minicompiler.compile(fn, backend="cpp")
    x = torch.randn(3, 4)
    first, second, joined, same = compiled(x)
    first.add_(1)
    torch.testing.assert_close(second, x)
    assert len({t.data_ptr() for t in (first, second, x)}) == 3
    assert joined.data_ptr() != x.data_ptr() and same.data_ptr() == x.data_ptr()  # as eager's


def test_cat_with_growing_size_is_one_compilation() -> None:
    """A cache grown by cat, one row per call: symbolic sizes, compiled once."""
    def fn(cache: torch.Tensor, row: torch.Tensor) -> torch.Tensor:
        return torch.cat([cache, row * 2], dim=0).flip(0)

    compiled = minicompiler.compile(fn, backend="cpp", dynamic=True)
    row = torch.randn(1, 4)
    for length in (3, 5, 8):
        cache = torch.randn(length, 4)
        torch.testing.assert_close(compiled(cache, row), fn(cache, row))
    assert len(compiled.report.graphs) == 1
