"""Scatters at indices a user gives (scatter, scatter_add, scatter_reduce, index_add, index_copy,
index_put, put, _unsafe_masked_index_put_accumulate, masked_scatter), each compiled to generated
kernels only (`store_at`; masked_scatter a gather), vs eager on fresh random inputs, on C++ and
Triton (TRITON_INTERPRET=1): float32, float64 and int64, repeated indices for the accumulating
forms (unique ones where a write replaces), non-contiguous inputs, empty ones, indices out of range
and negative ones; gradients in float64 against torch autograd."""

from __future__ import annotations

import os
from collections.abc import Callable
from typing import Any

import pytest
import torch

import minicompiler

from .conftest import assert_generated, compiled_gradients_match

BACKENDS = ["cpp"] + (["triton"] if os.environ.get("TRITON_INTERPRET") == "1" else [])


def _repeated(high: int, *shape: int) -> Callable[[], torch.Tensor]:
    """Indices in [0, high), many of them repeated (more indices than places)."""
    return lambda: torch.randint(0, high, shape)


def _unique_rows(high: int, rows: int, columns: int) -> Callable[[], torch.Tensor]:
    """Per column, `rows` distinct indices in [0, high): a write that replaces never meets another."""
    return lambda: torch.stack([torch.randperm(high)[:rows] for _ in range(columns)], 1)


def _unique(high: int, count: int) -> Callable[[], torch.Tensor]:
    return lambda: torch.randperm(high)[:count]


def _transposed(*shape: int) -> Callable[[], torch.Tensor]:
    """A non-contiguous tensor of `shape`."""
    return lambda: torch.randn(*reversed(shape)).t() if len(shape) == 2 else torch.randn(shape)


def _mask(*shape: int) -> Callable[[], torch.Tensor]:
    return lambda: torch.rand(shape) < 0.5


# name -> (function, makers of its arguments); floating arguments are cast to the dtype tested
CASES: dict[str, tuple[Callable[..., Any], list[Callable[[], torch.Tensor]]]] = {
    "scatter_add": (lambda x, i, s: torch.scatter_add(x, 0, i, s),
                    [lambda: torch.randn(5, 3), _repeated(5, 8, 3), lambda: torch.randn(8, 3)]),
    "scatter_add_dim1_smaller_index": (lambda x, i, s: x.scatter_add(1, i, s) * 2,
                                       [lambda: torch.randn(4, 6), _repeated(6, 3, 9), lambda: torch.randn(4, 10)]),
    "scatter_add_noncontiguous": (lambda x, i, s: torch.scatter_add(x, 1, i, s),
                                  [_transposed(4, 5), lambda: torch.randint(0, 5, (3, 4)).t(), _transposed(4, 4)]),
    "scatter_src": (lambda x, i, s: torch.scatter(x, 0, i, s), [lambda: torch.randn(6, 3), _unique_rows(6, 4, 3),
                                                               lambda: torch.randn(4, 3)]),
    "scatter_value": (lambda x, i: x.scatter(1, i, -1.5),
                      [lambda: torch.randn(3, 5), lambda: _unique_rows(5, 2, 3)().t()]),
    "scatter_reduce_add": (lambda x, i, s: x.scatter(0, i, s, reduce="add"),
                           [lambda: torch.randn(5, 2), _repeated(5, 7, 2), lambda: torch.randn(7, 2)]),
    "scatter_reduce_sum": (lambda x, i, s: torch.scatter_reduce(x, 0, i, s, "sum", include_self=False),
                           [lambda: torch.randn(5, 2), _repeated(5, 7, 2), lambda: torch.randn(7, 2)]),
    "scatter_reduce_amax": (lambda x, i, s: torch.scatter_reduce(x, 0, i, s, "amax"),
                            [lambda: torch.randn(5, 2), _repeated(5, 9, 2), lambda: torch.randn(9, 2)]),
    "scatter_reduce_amin_exclude": (lambda x, i, s: torch.scatter_reduce(x, 1, i, s, "amin", include_self=False),
                                    [lambda: torch.randn(2, 6), _repeated(6, 2, 9), lambda: torch.randn(2, 9)]),
    "scatter_reduce_mean": (lambda x, i, s: torch.scatter_reduce(x, 0, i, s, "mean"),
                            [lambda: torch.randn(6, 3), _repeated(6, 8, 3), lambda: torch.randn(8, 3)]),
    "scatter_reduce_mean_exclude": (lambda x, i, s: torch.scatter_reduce(x, 0, i, s, "mean", include_self=False),
                                    [lambda: torch.randn(6, 3), _repeated(6, 8, 3), lambda: torch.randn(8, 3)]),
    "index_add": (lambda x, i, s: torch.index_add(x, 0, i, s),
                  [lambda: torch.randn(5, 4), _repeated(5, 9), lambda: torch.randn(9, 4)]),
    "index_add_alpha_dim1": (lambda x, i, s: x.index_add(1, i, s.exp(), alpha=-2),
                             [lambda: torch.randn(3, 4), _repeated(4, 6), _transposed(3, 6)]),
    "index_add_in_place": (lambda x, i, s: (x * 1).index_add_(0, i, s),
                           [lambda: torch.randn(4), _repeated(4, 10), lambda: torch.randn(10)]),
    "index_copy": (lambda x, i, s: torch.index_copy(x, 1, i, s),
                   [lambda: torch.randn(3, 6), _unique(6, 4), lambda: torch.randn(3, 4)]),
    "index_put": (lambda x, i, v: torch.index_put(x, (i,), v),
                  [lambda: torch.randn(6, 3), lambda: torch.randperm(6)[:4] - 3, lambda: torch.randn(4, 3)]),
    "index_put_accumulate_two": (lambda x, i, j, v: torch.index_put(x, (i, j), v, accumulate=True),
                                 [lambda: torch.randn(4, 5, 2), lambda: torch.randint(-4, 4, (7, 1)),
                                  lambda: torch.randint(-5, 5, (1, 3)), lambda: torch.randn(2)]),
    "put": (lambda x, i, s: torch.put(x, i, s), [lambda: torch.randn(3, 4), lambda: torch.randperm(12)[:5] - 6,
                                                 lambda: torch.randn(5)]),
    "put_accumulate": (lambda x, i, s: x.put(i, s, accumulate=True),
                       [_transposed(3, 4), lambda: torch.randint(-12, 12, (4, 5)), lambda: torch.randn(20)]),
    "unsafe_masked_index_put_accumulate": (
        lambda x, m, i, j, v: torch._unsafe_masked_index_put_accumulate(x, m, [i, j], v),
        [lambda: torch.randn(4, 5), _mask(6, 6), lambda: torch.randint(-6, 6, (6, 1)),
         lambda: torch.randint(-7, 7, (1, 6)), lambda: torch.randn(6, 6)]),
    "masked_scatter": (lambda x, m, s: torch.masked_scatter(x, m, s),
                       [lambda: torch.randn(4, 5), _mask(4, 5), lambda: torch.randn(4, 6)]),
    "masked_scatter_broadcast_mask": (lambda x, m, s: x.masked_scatter(m, s) + 1,
                                      [lambda: torch.randn(3, 4), _mask(4), lambda: torch.randn(12)]),
    "scatter_add_empty": (lambda x, i, s: torch.scatter_add(x, 0, i, s),
                          [lambda: torch.randn(3, 2), lambda: torch.zeros(0, 2, dtype=torch.int64),
                           lambda: torch.randn(0, 2)]),
    "index_add_zero_d": (lambda x, i, s: torch.index_add(x, 0, i, s),
                         [lambda: torch.randn(()), lambda: torch.tensor([0]), lambda: torch.randn(())]),
}
REPLACING = {"scatter_src", "scatter_value", "index_copy", "index_put", "put", "masked_scatter",
             "masked_scatter_broadcast_mask"}
NO_INT64 = {"index_add_alpha_dim1", "scatter_reduce_mean", "scatter_reduce_mean_exclude", "scatter_value"}
GRADIENTS = ["scatter_add", "scatter_src", "scatter_reduce_sum",
             "scatter_reduce_amax", "scatter_reduce_amin_exclude", "scatter_reduce_mean", "index_add",
             "index_add_alpha_dim1", "index_copy", "index_put", "index_put_accumulate_two", "put",
             "put_accumulate", "masked_scatter", "masked_scatter_broadcast_mask"]


def _arguments(name: str, dtype: torch.dtype) -> list[torch.Tensor]:
    made = [make() for make in CASES[name][1]]
    if dtype == torch.int64:  # whole numbers: sums are exact, in any order
        return [(a * 10).round().to(dtype) if a.is_floating_point() else a for a in made]
    return [a.to(dtype) if a.is_floating_point() else a for a in made]


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("dtype", [torch.float32, torch.float64, torch.int64], ids=str)
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_eager(name: str, dtype: torch.dtype, backend: str) -> None:
    if dtype == torch.int64 and name in NO_INT64:
        pytest.skip("a float formula (exp, a mean, a float value)")
    fn, args = CASES[name][0], _arguments(name, dtype)
    compiled = minicompiler.compile(lambda *a: fn(*a), backend=backend)
    expected, actual = fn(*args), compiled(*args)
    torch.testing.assert_close(actual, expected)
    assert (actual.dtype, actual.shape) == (expected.dtype, expected.shape)
    assert_generated(compiled)


@pytest.mark.parametrize("name", GRADIENTS)
def test_gradient(name: str) -> None:
    fn, args = CASES[name][0], _arguments(name, torch.float64)
    assert_generated(compiled_gradients_match(fn, args))


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize(("name", "bad"), [("scatter_add", 5), ("scatter_add", -1), ("index_add", 5),
                                           ("index_add", -1), ("index_copy", 6), ("index_put", 6),
                                           ("index_put", -7), ("put", 12), ("put", -13)])
def test_out_of_range_raises(name: str, bad: int, backend: str) -> None:
    if torch.get_default_device().type == "cuda":  # (tests/triton_on_gpu.py)
        pytest.skip("on CUDA the check is a device-side assert, which leaves the process's CUDA context unusable")
    fn, args = CASES[name][0], _arguments(name, torch.float32)
    args[1] = args[1].clone()  # the index
    args[1].view(-1)[-1] = bad
    with pytest.raises((IndexError, RuntimeError)):
        fn(*args)  # eager raises too (scatter: RuntimeError; the compiled check: IndexError)
    compiled = minicompiler.compile(lambda *a: fn(*a), backend=backend)
    with pytest.raises(IndexError, match="out of bounds"):
        compiled(*args)


@pytest.mark.parametrize("backend", BACKENDS)
def test_repeated_positions_accumulate(backend: str) -> None:
    # every value lands on one of two elements: the adds must not lose one another (atomics)
    fn = lambda x, i, s: torch.index_add(x, 0, i, s)  # noqa: E731
    x, index, source = torch.zeros(2, dtype=torch.float64), torch.randint(0, 2, (5000,)), torch.rand(5000).double()
    compiled = minicompiler.compile(fn, backend=backend)
    torch.testing.assert_close(compiled(x, index, source), fn(x, index, source))


@pytest.mark.parametrize("backend", BACKENDS)
def test_embedding_backward_adds_whole_rows_on_the_cpu(backend: str) -> None:
    # load_at's backward for an embedding (repeated ids): on the CPU, torch's index_add_ of whole
    # rows (ir/gather.py accumulate_rows), one vectorized add per token instead of an atomic add
    # per element; a read that is not of whole rows keeps the generated scatter (take, below)
    weight = torch.randn(7, 4, dtype=torch.float64, requires_grad=True)
    ids = torch.randint(0, 7, (5, 6))
    compiled = minicompiler.compile(lambda w, i: torch.nn.functional.embedding(i, w).tanh(), backend=backend)
    weights = torch.randn(5, 6, 4, dtype=torch.float64)
    expected = torch.autograd.grad((torch.nn.functional.embedding(ids, weight).tanh() * weights).sum(), weight)
    actual = torch.autograd.grad((compiled(weight, ids) * weights).sum(), weight)
    torch.testing.assert_close(actual, expected)
    stages = [s for g in compiled.report.graphs for s in g.stages + g.autograd]
    fused = "".join(s.text for s in stages if s.name.startswith("fuse"))
    if weight.device.type == "cpu":
        assert "accumulate_rows" in "".join(s.text for s in stages if s.name.startswith("codegen"))
        assert "store_at" not in fused
    else:  # (run on a GPU by tests/triton_on_gpu.py) there the generated scatter's atomic adds stay
        assert "store_at" in fused


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_gathers_backward_is_generated(backend: str) -> None:
    # load_at's backward where the positions repeat (take): atomic adds into zeros, in a generated kernel
    x = torch.randn(7, 4, dtype=torch.float64, requires_grad=True)
    index = torch.randint(0, 28, (5, 6))
    compiled = minicompiler.compile(lambda t, i: torch.take(t, i).tanh(), backend=backend)
    weights = torch.randn(5, 6, dtype=torch.float64)
    expected = torch.autograd.grad((torch.take(x, index).tanh() * weights).sum(), x)
    actual = torch.autograd.grad((compiled(x, index) * weights).sum(), x)
    torch.testing.assert_close(actual, expected)
    assert_generated(compiled)
    stages = [s for g in compiled.report.graphs for s in g.stages + g.autograd]
    assert "accumulate_at" not in "".join(s.text for s in stages)
    assert "store_at" in "".join(s.text for s in stages if s.name.startswith("fuse"))


@pytest.mark.parametrize("backend", BACKENDS)
def test_in_place_on_an_input(backend: str) -> None:
    # x.index_add_ changes the caller's x, as eager's does
    fn = lambda x, i, s: x.index_add_(0, i, s).mul(2)  # noqa: E731
    x, index, source = torch.randn(4, 3), torch.randint(0, 4, (6,)), torch.randn(6, 3)
    mine, theirs = x.clone(), x.clone()
    compiled = minicompiler.compile(fn, backend=backend)
    torch.testing.assert_close(compiled(mine, index, source), fn(theirs, index, source))
    torch.testing.assert_close(mine, theirs)
    assert_generated(compiled)


@pytest.mark.parametrize("backend", BACKENDS)
def test_dynamic_sizes(backend: str) -> None:
    # one compile for several sizes of x and of the values: the kernels take their sizes as arguments
    fn = lambda x, i, s: torch.index_add(x, 0, i, s).relu()  # noqa: E731
    compiled = minicompiler.compile(fn, backend=backend, dynamic=True)
    for rows, picks in [(5, 9), (7, 13), (11, 3)]:
        x, index, source = torch.randn(rows, 4), torch.randint(0, rows, (picks,)), torch.randn(picks, 4)
        torch.testing.assert_close(compiled(x, index, source), fn(x, index, source))
    assert_generated(compiled)


def test_low_precision_gradient_keeps_torchs_index_add() -> None:
    # no atomic adds for bfloat16 in both backends: load_at's backward stays one torch index_add_
    weight = torch.randn(7, 4, dtype=torch.bfloat16, requires_grad=True)
    ids = torch.randint(0, 7, (5, 6))
    compiled = minicompiler.compile(lambda w, i: torch.nn.functional.embedding(i, w) * 3, backend="cpp")
    weights = torch.randn(5, 6, 4, dtype=torch.bfloat16)
    expected = torch.autograd.grad((torch.nn.functional.embedding(ids, weight) * 3 * weights).sum(), weight)
    actual = torch.autograd.grad((compiled(weight, ids) * weights).sum(), weight)
    torch.testing.assert_close(actual, expected)


@pytest.mark.parametrize("backend", BACKENDS)
def test_values_and_positions_are_computed_in_the_scatter_kernel(backend: str) -> None:
    # scatter_add(x, 1, i, exp(s)): exp and the position formula run in the kernel that adds; the
    # base's copy is a kernel of its own, and the sum of the result one more (it reads whole rows)
    fn = lambda x, i, s: torch.scatter_add(x, 1, i, s.exp()).sum(1)  # noqa: E731
    x, index, source = torch.randn(4, 6), torch.randint(0, 6, (4, 9)), torch.randn(4, 9)
    compiled = minicompiler.compile(fn, backend=backend)
    torch.testing.assert_close(compiled(x, index, source), fn(x, index, source))
    kernels = [k.nodes for g in compiled.report.graphs for k in g.kernels if k.kind == "pointwise"]
    scatter = next(nodes for nodes in kernels if "store_at" in nodes)
    assert "exp" in scatter and any(n.startswith("add") for n in scatter), scatter
    assert scatter[-1] == "store_at" and ["clone"] in kernels
