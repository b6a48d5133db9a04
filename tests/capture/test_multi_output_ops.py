"""Ops that return several tensors, lowered at capture (capture/torch_splits.py, torch_norms.py,
torch_losses.py): each compiled whole (one graph, no graph break, generated kernels only) and
compared with eager on fresh random inputs: the number of outputs, their shapes, dtypes and
values, which of them are views of an input (memory shared, as eager's), running statistics
updated in place, float64 gradients against torch autograd, and eager's errors kept."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import minicompiler

from ..decompose.conftest import assert_generated


def _compile_whole(fn: Callable[..., Any]) -> Any:
    return minicompiler.compile(fn, backend="cpp")


def _assert_whole(compiled: Any) -> None:
    """One graph, no graph break, and only kernels minicompiler wrote or views ("alias"); a
    function that returns its input as it is (a meshgrid of one tensor) has no kernel at all."""
    assert len(compiled.report.graphs) == 1
    assert not compiled.report.graph_breaks, compiled.report.graph_breaks
    if any(k.kind != "alias" for g in compiled.report.graphs for k in g.kernels):
        assert_generated(compiled)


def _assert_outputs(got: Any, expected: Any, **tolerances: float) -> None:
    assert isinstance(got, (tuple, list)) and len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert (g.shape, g.dtype) == (e.shape, e.dtype)
        torch.testing.assert_close(g, e, equal_nan=True, **tolerances)


def _shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr()


# --- one tensor cut into pieces ---------------------------------------------------------------
# name -> (function of x, shape of x, are the pieces views of x?)
SPLITS: dict[str, tuple[Callable[[torch.Tensor], Any], tuple[int, ...], bool]] = {
    "split_with_sizes": (lambda x: torch.split_with_sizes(x, [1, 3, 1]), (5, 4), True),
    "split_with_sizes_dim": (lambda x: torch.split_with_sizes(x, [2, 0, 2], dim=-1), (3, 4), True),
    "split_with_sizes_method": (lambda x: x.split_with_sizes([3, 2], 0), (5, 2), True),
    "unsafe_split": (lambda x: torch.unsafe_split(x, 2, 1), (3, 5), True),
    "unsafe_chunk": (lambda x: torch.unsafe_chunk(x, 3, -1), (2, 7), True),
    "tensor_split_sections": (lambda x: torch.tensor_split(x, 3, dim=1), (2, 7), True),
    "tensor_split_more_sections_than_rows": (lambda x: torch.tensor_split(x, 4), (3, 2), True),
    "tensor_split_indices": (lambda x: torch.tensor_split(x, [1, 4], 0), (6, 2), True),
    "tensor_split_odd_indices": (lambda x: torch.tensor_split(x, [-2, 9, 1], -1), (2, 5), True),
    "tensor_split_method": (lambda x: x.tensor_split((2,), dim=1), (3, 4), True),
    "hsplit_1d": (lambda x: torch.hsplit(x, 3), (6,), True),
    "hsplit": (lambda x: torch.hsplit(x, [1, 2]), (2, 4, 3), True),
    "vsplit": (lambda x: torch.vsplit(x, 2), (4, 3), True),
    "dsplit": (lambda x: x.dsplit([1]), (2, 2, 3), True),
    "split_with_sizes_copy": (lambda x: torch.split_with_sizes_copy(x, [2, 1], 1), (4, 3), False),
    "unbind_copy": (lambda x: torch.unbind_copy(x, -1), (3, 4), False),
    "unbind_copy_empty": (lambda x: torch.unbind_copy(x, 0), (3, 0, 2), False),
}


@pytest.mark.parametrize("name", sorted(SPLITS))
def test_split_matches_eager(name: str) -> None:
    fn, shape, views = SPLITS[name]
    compiled = _compile_whole(fn)
    for _ in range(2):  # fresh inputs: the second call reuses the graph
        x = torch.randn(shape)
        got, expected = compiled(x), fn(x)
        _assert_outputs(got, expected)
        for piece in got:
            if piece.numel():
                assert _shares_memory(piece, x) == views  # a view as eager's, or memory of its own
    _assert_whole(compiled)


def test_split_pieces_are_views_with_the_input_as_base() -> None:
    # as eager's: writing into the input shows in every piece
    fn = SPLITS["tensor_split_indices"][0]
    x = torch.randn(6, 2)
    pieces = _compile_whole(fn)(x)
    assert all(p._base is x for p in pieces)
    x.add_(1)
    torch.testing.assert_close(torch.cat(pieces), x)


@pytest.mark.parametrize("name", ["split_with_sizes", "tensor_split_indices", "split_with_sizes_copy",
                                  "unbind_copy"])
def test_split_gradient(name: str) -> None:
    fn = SPLITS[name][0]
    x = torch.randn(SPLITS[name][1], dtype=torch.float64, requires_grad=True)
    weights = [torch.randn(p.shape, dtype=torch.float64) for p in fn(x.detach())]

    def loss(x: torch.Tensor) -> torch.Tensor:
        return sum((p * w).sum() for p, w in zip(fn(x), weights, strict=True))

    (expected,) = torch.autograd.grad(loss(x), x)
    (got,) = torch.autograd.grad(_compile_whole(loss)(x), x)
    torch.testing.assert_close(got, expected)


def test_tensor_split_reads_a_cpu_tensor_of_indices_under_a_guard() -> None:
    # torch reads the indices (a CPU int64 tensor) as ints: so does capture, guarding their values
    def fn(x: torch.Tensor, indices: torch.Tensor) -> Any:
        return torch.tensor_split(x, indices, dim=1)

    compiled = _compile_whole(fn)
    for indices in ([1, 3], [1, 3], [2], 2):  # a 0-d tensor is a number of sections
        x, t = torch.randn(3, 5), torch.tensor(indices)
        _assert_outputs(compiled(x, t), fn(x, t))
    assert any("tolist()" in str(guard) for graph in compiled.report.graphs for guard in graph.guards)
    _assert_whole_graphs(compiled)


def _assert_whole_graphs(compiled: Any) -> None:
    assert not compiled.report.graph_breaks
    kinds = {k.kind for g in compiled.report.graphs for k in g.kernels}
    assert "extern" not in kinds, kinds


def test_tensor_split_by_indices_computed_inside_is_a_clear_graph_break() -> None:
    def fn(x: torch.Tensor, indices: torch.Tensor) -> Any:
        return torch.tensor_split(x, indices + 1)

    compiled = _compile_whole(fn)
    x, t = torch.randn(6), torch.tensor([0, 2])
    _assert_outputs(compiled(x, t), fn(x, t))
    assert "tensor of indices" in compiled.report.graph_breaks[0].reason


# name -> (function, its arguments): eager raises, and so does the compiled function
SPLIT_ERRORS: dict[str, tuple[Callable[..., Any], Callable[[], tuple[torch.Tensor, ...]]]] = {
    "sizes_do_not_add_up": (lambda x: torch.split_with_sizes(x, [1, 2]), lambda: (torch.randn(5),)),
    "negative_size": (lambda x: torch.split(x, [6, -1]), lambda: (torch.randn(5),)),
    "hsplit_uneven": (lambda x: torch.hsplit(x, 4), lambda: (torch.randn(2, 6),)),
    "vsplit_1d": (lambda x: torch.vsplit(x, 2), lambda: (torch.randn(6),)),
    "tensor_split_zero_sections": (lambda x: torch.tensor_split(x, 0), lambda: (torch.randn(4),)),
    "unsafe_chunk_zero": (lambda x: torch.unsafe_chunk(x, 0), lambda: (torch.randn(4),)),
    "split_size_zero": (lambda x: torch.split(x, 0), lambda: (torch.randn(4),)),
    "meshgrid_2d": (lambda a, b: torch.meshgrid(a, b, indexing="ij"), lambda: (torch.randn(2), torch.randn(2, 2))),
    "meshgrid_dtypes": (lambda a, b: torch.meshgrid(a, b, indexing="ij"),
                        lambda: (torch.randn(2), torch.randn(3, dtype=torch.float64))),
    "unsafe_split_list": (lambda x: torch.unsafe_split(x, [1, 2]), lambda: (torch.randn(3),)),
    "broadcast_mismatch": (lambda a, b: torch.broadcast_tensors(a, b), lambda: (torch.randn(2, 3), torch.randn(4))),
}


@pytest.mark.parametrize("name", sorted(SPLIT_ERRORS))
def test_eager_errors_stay_errors(name: str) -> None:
    fn, make = SPLIT_ERRORS[name]
    with pytest.raises((RuntimeError, TypeError)) as eager:
        fn(*make())
    with pytest.raises(type(eager.value)):
        _compile_whole(fn)(*make())


# --- several tensors given one shape ---------------------------------------------------------
GRIDS: dict[str, tuple[Callable[..., Any], list[tuple[int, ...]]]] = {
    "broadcast_tensors": (lambda a, b, c: torch.broadcast_tensors(a, b, c), [(3,), (1, 2, 1), (5, 1, 1)]),
    "broadcast_tensors_same_shape": (lambda a, b: torch.broadcast_tensors(a, b), [(2, 3), (3,)]),
    "meshgrid_ij": (lambda a, b, c: torch.meshgrid(a, b, c, indexing="ij"), [(3,), (), (4,)]),
    "meshgrid_xy": (lambda a, b, c: torch.meshgrid(a, b, c, indexing="xy"), [(3,), (2,), (4,)]),
    "meshgrid_list_xy": (lambda a, b: torch.meshgrid([a, b], indexing="xy"), [(3,), (5,)]),
    "meshgrid_one": (lambda a: torch.meshgrid([a], indexing="xy"), [(4,)]),
}


@pytest.mark.parametrize("name", sorted(GRIDS))
def test_grids_match_eager_as_views_of_their_inputs(name: str) -> None:
    fn, shapes = GRIDS[name]
    compiled = _compile_whole(fn)
    for _ in range(2):
        inputs = [torch.randn(s) for s in shapes]
        got = compiled(*inputs)
        _assert_outputs(got, fn(*inputs))
        assert all(_shares_memory(g, x) for g, x in zip(got, inputs, strict=True))
    _assert_whole(compiled)


def test_meshgrid_gradient() -> None:
    a, b = (torch.randn(n, dtype=torch.float64, requires_grad=True) for n in (3, 4))
    weights = [torch.randn(4, 3, dtype=torch.float64) for _ in range(2)]

    def loss(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        x, y = torch.meshgrid(a, b, indexing="xy")
        return (x * weights[0]).sum() + (y * y * weights[1]).sum()

    expected = torch.autograd.grad(loss(a, b), (a, b))
    got = torch.autograd.grad(_compile_whole(loss)(a, b), (a, b))
    torch.testing.assert_close(got, expected)


# --- normalisations that return their statistics ---------------------------------------------
def _layer_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> Any:
    return torch.native_layer_norm(x, (x.shape[-2], x.shape[-1]), w, b, 1e-5)


def _group_norm(x: torch.Tensor, w: torch.Tensor, b: torch.Tensor) -> Any:
    n, c, *rest = x.shape
    return torch.native_group_norm(x, w, b, n, c, rest[0] * rest[1], 2, 1e-3)


# name -> (function of (x, weight, bias), shape of x, shape of weight and bias)
NORMS: dict[str, tuple[Callable[..., Any], tuple[int, ...], tuple[int, ...]]] = {
    "native_layer_norm": (_layer_norm, (2, 3, 4, 5), (4, 5)),
    "native_layer_norm_no_affine": (lambda x, w, b: torch.native_layer_norm(x, (5,), None, None, 0.5), (3, 5), (5,)),
    "native_group_norm": (_group_norm, (3, 4, 2, 3), (4,)),
    "native_group_norm_no_affine": (lambda x, w, b: torch.native_group_norm(x, None, None, 2, 6, 5, 3, 1e-5),
                                    (2, 6, 5), (6,)),
}
NORM_DTYPES = [(torch.float32, {}), (torch.float64, {}), (torch.float16, {"atol": 2e-3, "rtol": 2e-3})]


@pytest.mark.parametrize(("dtype", "tolerances"), NORM_DTYPES)
@pytest.mark.parametrize("name", sorted(NORMS))
def test_norm_with_statistics_matches_eager(name: str, dtype: torch.dtype, tolerances: dict[str, float]) -> None:
    fn, shape, affine = NORMS[name]
    compiled = _compile_whole(fn)
    for _ in range(2):
        args = [torch.randn(s, dtype=torch.float64).to(dtype) for s in (shape, affine, affine)]
        _assert_outputs(compiled(*args), fn(*args), **tolerances)
    _assert_whole(compiled)


@pytest.mark.parametrize("name", ["native_layer_norm", "native_group_norm"])
def test_norm_with_statistics_gradient(name: str) -> None:
    # layer_norm's mean and rstd carry no gradient in eager (nor here); group_norm's do
    fn, shape, affine = NORMS[name]
    args = [torch.randn(s, dtype=torch.float64, requires_grad=True) for s in (shape, affine, affine)]
    weights = [torch.randn(t.shape, dtype=torch.float64) for t in fn(*args)]

    def loss(*args: torch.Tensor) -> torch.Tensor:
        outputs = fn(*args)
        return sum((t * w).sum() for t, w in zip(outputs, weights, strict=True) if t.requires_grad)

    expected = torch.autograd.grad(loss(*args), args)
    got_outputs = _compile_whole(fn)(*args)
    assert [t.requires_grad for t in got_outputs] == [t.requires_grad for t in fn(*args)]
    got = torch.autograd.grad(_compile_whole(loss)(*args), args)
    torch.testing.assert_close(got, expected)


def _batch_norm_arguments(dtype: torch.dtype = torch.float32, requires_grad: bool = False) -> list[torch.Tensor]:
    """x (N, C, L), weight, bias, running mean, running var."""
    x, w, b = (torch.randn(s, dtype=dtype, requires_grad=requires_grad) for s in ((4, 3, 5), (3,), (3,)))
    return [x, w, b, torch.randn(3, dtype=dtype), torch.rand(3, dtype=dtype) + 0.5]


# name -> function of (x, weight, bias, running_mean, running_var)
BATCH_NORMS: dict[str, Callable[..., Any]] = {
    "native_batch_norm_train": lambda x, w, b, m, v: torch.native_batch_norm(x, w, b, m, v, True, 0.3, 1e-5),
    "native_batch_norm_eval": lambda x, w, b, m, v: torch.native_batch_norm(x, w, b, m, v, False, 0.3, 1e-3),
    "native_batch_norm_no_stats": lambda x, w, b, m, v: torch.native_batch_norm(x, w, None, None, None, True, 0.1,
                                                                                1e-5),
    "legit_train": lambda x, w, b, m, v: torch._native_batch_norm_legit(x, w, b, m, v, True, 0.1, 1e-5),
    "legit_eval": lambda x, w, b, m, v: torch._native_batch_norm_legit(x, None, b, m, v, False, 0.1, 1e-5),
    "legit_no_stats": lambda x, w, b, m, v: torch._native_batch_norm_legit(x, w, b, True, -0.5, 1e-2),
    "with_update": lambda x, w, b, m, v: torch.ops.aten._batch_norm_with_update(x, w, b, m, v, 0.2, 1e-5),
}


@pytest.mark.parametrize("name", sorted(BATCH_NORMS))
def test_batch_norm_with_statistics_matches_eager(name: str) -> None:
    # the outputs, and the running statistics changed in place as eager changes them
    fn = BATCH_NORMS[name]
    compiled = _compile_whole(fn)
    for _ in range(2):
        args = _batch_norm_arguments()
        theirs = [t.clone() for t in args]
        _assert_outputs(compiled(*args), fn(*theirs))
        torch.testing.assert_close(args[3:], theirs[3:])
    _assert_whole(compiled)


@pytest.mark.parametrize("name", ["native_batch_norm_train", "native_batch_norm_eval", "legit_no_stats"])
def test_batch_norm_with_statistics_gradient(name: str) -> None:
    fn = BATCH_NORMS[name]
    args = _batch_norm_arguments(torch.float64, requires_grad=True)
    weight = torch.randn(4, 3, 5, dtype=torch.float64)

    def loss(*args: torch.Tensor) -> torch.Tensor:
        return (fn(*args)[0] * weight).sum()

    theirs = [t.detach().clone().requires_grad_(t.requires_grad) for t in args]
    expected = torch.autograd.grad(loss(*theirs), theirs[:3])
    got = torch.autograd.grad(_compile_whole(loss)(*args), args[:3])
    torch.testing.assert_close(got, expected)


# --- losses ----------------------------------------------------------------------------------
# name -> (function of (x, target, var), shapes of x, target and var (None: var is a float))
GAUSSIAN: dict[str, tuple[Callable[..., Any], list[tuple[int, ...] | None]]] = {
    "same_shape": (lambda x, t, v: F.gaussian_nll_loss(x, t, v), [(4, 3), (4, 3), (4, 3)]),
    "var_one_dim_short": (lambda x, t, v: F.gaussian_nll_loss(x, t, v, reduction="none"), [(4, 3), (4, 3), (4,)]),
    "var_size_one_dim": (lambda x, t, v: F.gaussian_nll_loss(x, t, v, full=True, reduction="sum"),
                         [(2, 3, 4), (2, 3, 4), (2, 1, 4)]),
    "broadcast_target": (lambda x, t, v: F.gaussian_nll_loss(x, t, v, eps=0.3), [(5, 2), (2,), (5, 2)]),
    "var_float": (lambda x, t: F.gaussian_nll_loss(x, t, 0.7, full=True), [(3, 4), (3, 4), None]),
}


def _gaussian_arguments(shapes: list[Any], dtype: torch.dtype = torch.float32, **kwargs: Any) -> list[torch.Tensor]:
    x, t = (torch.randn(s, dtype=dtype, **kwargs) for s in shapes[:2])
    if shapes[2] is None:
        return [x, t]
    var = torch.rand(shapes[2], dtype=dtype)
    var.view(-1)[0] = 1e-9  # below eps: clamped, with var's own gradient (torch's clamp_ under no_grad)
    return [x, t, var.requires_grad_(kwargs.get("requires_grad", False))]


@pytest.mark.parametrize("name", sorted(GAUSSIAN))
def test_gaussian_nll_loss_matches_eager(name: str) -> None:
    fn, shapes = GAUSSIAN[name]
    compiled = _compile_whole(fn)
    for _ in range(2):
        args = _gaussian_arguments(shapes)
        torch.testing.assert_close(compiled(*args), fn(*args))
    _assert_whole(compiled)


@pytest.mark.parametrize("name", sorted(GAUSSIAN))
def test_gaussian_nll_loss_gradient(name: str) -> None:
    fn, shapes = GAUSSIAN[name]
    args = _gaussian_arguments(shapes, torch.float64, requires_grad=True)
    expected = torch.autograd.grad(fn(*args).sum(), args)
    got = torch.autograd.grad(_compile_whole(fn)(*args).sum(), args)
    torch.testing.assert_close(got, expected)


def test_gaussian_nll_loss_keeps_eager_errors_it_can_decide() -> None:
    # a negative float variance and a variance of the wrong size raise as in eager (a graph break,
    # where torch runs); a tensor's negative entries are known only when the graph runs: they are
    # clamped to eps like any small variance (eager raises ValueError there)
    x, t = torch.randn(3, 4), torch.randn(3, 4)
    for var in (-1.0, torch.rand(2, 4)):
        with pytest.raises(ValueError):
            _compile_whole(lambda x, t, v=var: F.gaussian_nll_loss(x, t, v))(x, t)
    var = torch.rand(3, 4) - 0.5
    got = _compile_whole(lambda x, t, v: F.gaussian_nll_loss(x, t, v))(x, t, var)
    torch.testing.assert_close(got, F.gaussian_nll_loss(x, t, var.clamp(min=0)))


def _cosine_distance(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
    return 1 - F.cosine_similarity(a, b)


TRIPLET: dict[str, Callable[..., Any]] = {
    "default_distance": lambda a, p, n: F.triplet_margin_with_distance_loss(a, p, n),
    "pairwise_module_swap": lambda a, p, n: F.triplet_margin_with_distance_loss(
        a, p, n, distance_function=nn.PairwiseDistance(p=1.5), swap=True, reduction="sum"),
    "user_function": lambda a, p, n: F.triplet_margin_with_distance_loss(
        a, p, n, distance_function=_cosine_distance, margin=0.3, reduction="none"),
    "user_lambda": lambda a, p, n: F.triplet_margin_with_distance_loss(
        a, p, n, distance_function=lambda x, y: (x - y).abs().amax(-1), swap=True),
}


@pytest.mark.parametrize("name", sorted(TRIPLET))
def test_triplet_margin_with_distance_loss_inlines_the_distance(name: str) -> None:
    fn = TRIPLET[name]
    compiled = _compile_whole(fn)
    for _ in range(2):
        args = [torch.randn(5, 6) for _ in range(3)]
        torch.testing.assert_close(compiled(*args), fn(*args))
    _assert_whole(compiled)
    args = [torch.randn(5, 6, dtype=torch.float64, requires_grad=True) for _ in range(3)]
    expected = torch.autograd.grad(fn(*args).sum(), args)
    torch.testing.assert_close(torch.autograd.grad(compiled(*args).sum(), args), expected)


def test_triplet_margin_with_distance_loss_keeps_eager_errors() -> None:
    fn = lambda a, p, n: F.triplet_margin_with_distance_loss(a, p, n, margin=0.0)  # noqa: E731
    args = [torch.randn(2, 3) for _ in range(3)]
    with pytest.raises(ValueError):
        _compile_whole(fn)(*args)


@pytest.mark.parametrize("fn", [torch.allclose, torch.equal])
def test_bool_answers_fall_back_with_their_reason(fn: Callable[..., bool]) -> None:
    # a Python bool read from the values: a graph break at the call (torch runs it), said plainly
    a = torch.randn(4)
    compiled = _compile_whole(lambda a, b: fn(a, b))
    assert compiled(a, a.clone()) is True
    assert "Python bool" in compiled.report.graph_breaks[0].reason
    assert compiled(a, a + 1) is False
