"""Constant folding, CSE, DCE and the simplify driver."""

from __future__ import annotations

import pytest
import torch

from minicompiler.decompose import decompose
from minicompiler.ir import Graph, SourceLoc, TensorMeta, graph_to_python, run_graph, verify
from minicompiler.simplify import (
    PASSES,
    eliminate_common_subexpressions,
    eliminate_dead_code,
    fold_constants,
    simplify,
    simplify_with_log,
)


def ops_of(graph: Graph) -> list[str]:
    return [n.op for n in graph.compute_nodes()]


def assert_same_results(before: Graph, after: Graph, *inputs: torch.Tensor) -> None:
    verify(after)
    torch.testing.assert_close(run_graph(after, *inputs), run_graph(before, *inputs), equal_nan=True)


# -- constant folding ------------------------------------------------------------------------
def test_pointwise_ops_and_views_of_constants_fold_into_one_full() -> None:
    g = Graph()
    x = g.placeholder("x", TensorMeta((2, 3), torch.float32))
    two = g.call("full", (3,), 2.0, torch.float32, "cpu")
    scaled = g.call("mul", g.call("add", two, g.call("full", (), 1.5, torch.float32, "cpu")), -4)
    wide = g.call("expand", g.call("reshape", g.call("exp", scaled), (1, 3)), (2, 3))
    g.output(g.call("add", x, wide))
    folded = eliminate_dead_code(fold_constants(g))
    assert ops_of(folded) == ["full", "add"]
    assert_same_results(g, folded, torch.randn(2, 3))


@pytest.mark.parametrize(
    "dtype, other",
    [
        (torch.float16, (torch.float32, 0.1)),  # a 0-d float32 does not promote a float16 tensor...
        (torch.int32, (torch.float64, 0.7)),  # ...but a 0-d float does promote an int tensor
        (torch.bfloat16, (torch.bfloat16, 3.3)),
        (torch.bool, (torch.int64, 3)),
    ],
)
def test_folding_follows_torch_type_promotion(dtype: torch.dtype, other: tuple) -> None:
    g = Graph()
    x = g.placeholder("x", TensorMeta((4,), torch.float64))
    left = g.call("full", (4,), 1, dtype, "cpu")
    right = g.call("full", (), other[1], other[0], "cpu")
    g.output(g.call("add", x, g.call("add", left, right)))
    folded = eliminate_dead_code(fold_constants(g))
    assert ops_of(folded) == ["full", "add"]
    x = torch.randn(4, dtype=torch.float64)
    torch.testing.assert_close(run_graph(folded, x), run_graph(g, x), rtol=0, atol=0)


def test_ops_on_real_inputs_and_reductions_do_not_fold() -> None:
    g = Graph()
    x = g.placeholder("x", TensorMeta((3,), torch.float32))
    ones = g.call("full", (3,), 1.0, torch.float32, "cpu")
    g.output((g.call("add", x, ones), g.call("sum", ones, (0,), False)))
    assert ops_of(fold_constants(g)) == ops_of(g)


# -- CSE -------------------------------------------------------------------------------------
def test_cse_reuses_repeated_pure_nodes() -> None:
    g = Graph()
    x = g.placeholder("x", TensorMeta((5,), torch.float32))
    a, b = g.call("exp", x), g.call("exp", x)
    g.output(g.call("add", g.call("mul", a, 2.0), g.call("mul", b, 2.0)))
    log: list[str] = []
    result = eliminate_dead_code(eliminate_common_subexpressions(g, log))
    assert ops_of(result) == ["exp", "mul", "add"]
    assert log == ["cse: %exp_0: repeats %exp", "cse: %mul_1: repeats %mul"]
    assert_same_results(g, result, torch.randn(5))


@pytest.mark.parametrize(
    "first, second, dtype",
    [
        (1, 1.0, torch.int32),  # equal in Python, but int + 1.0 is a float
        (0.0, -0.0, torch.float32),  # x * -0.0 and x * 0.0 differ in the sign of zero
        (True, 1, torch.float32),
    ],
)
def test_cse_tells_apart_constants_python_thinks_equal(first, second, dtype: torch.dtype) -> None:
    g = Graph()
    x = g.placeholder("x", TensorMeta((5,), dtype))
    g.output((g.call("mul", x, first), g.call("mul", x, second)))
    assert ops_of(eliminate_common_subexpressions(g)) == ["mul", "mul"]


def test_impure_nodes_are_never_merged_or_dropped() -> None:
    g = Graph()
    x = g.placeholder("x", TensorMeta((5,), torch.float32))
    noise = [g.call("torch_call", torch.rand_like, x) for _ in range(3)]
    g.output(g.call("add", noise[0], noise[1]))  # noise[2] is unused
    result = simplify(g)
    assert ops_of(result) == ["torch_call", "torch_call", "torch_call", "add"]


# -- DCE -------------------------------------------------------------------------------------
def test_dce_drops_unused_nodes_but_keeps_inputs() -> None:
    g = Graph()
    x = g.placeholder("x", TensorMeta((5,), torch.float32))
    g.placeholder("unused_input", TensorMeta((2,), torch.float32))
    g.call("sin", g.call("cos", x))
    g.output(g.call("neg", x))
    log: list[str] = []
    result = eliminate_dead_code(g, log)
    assert ops_of(result) == ["neg"]
    assert [n.name for n in result.inputs] == ["x", "unused_input"]
    assert len(log) == 2 and all(line.startswith("dce: ") for line in log)


# -- the driver ------------------------------------------------------------------------------
def test_log_names_the_rule_node_and_source_line() -> None:
    g = Graph()
    x = g.placeholder("x", TensorMeta((4,), torch.float32))
    with g.provenance(SourceLoc("/home/me/user.py", 4, "y = torch.exp(torch.log(x))")):
        y = g.call("exp", g.call("log", x))
    g.output(y)
    result, log = simplify_with_log(g)
    assert ops_of(result) == []
    assert "algebraic: %exp: exp(log(x)) -> x at user.py:4 (y = torch.exp(torch.log(x)))" in log
    assert result.outputs is result.inputs[0]


def test_simplify_runs_passes_until_nothing_changes() -> None:
    # permute(permute(x)) -> one permute, which is the identity -> x; then the rest cancels.
    g = Graph()
    x = g.placeholder("x", TensorMeta((3, 3), torch.float32))
    back = g.call("permute", g.call("permute", x, (1, 0)), (1, 0))
    scaled = g.call("mul", g.call("neg", g.call("neg", back)), g.call("full", (), 1.0, torch.float32, "cpu"))
    g.output(g.call("add", scaled, g.call("mul", back, 0.5)))
    result, log = simplify_with_log(g)
    assert ops_of(result) == ["mul", "add"]
    assert_same_results(g, result, torch.randn(3, 3))
    assert simplify_with_log(result)[1] == []  # a fixed point


@pytest.mark.parametrize("simplify_pass", [*PASSES, simplify], ids=lambda p: p.__name__)
def test_passes_leave_their_input_alone(simplify_pass) -> None:
    g = Graph()
    x = g.placeholder("x", TensorMeta((4,), torch.float32))
    g.call("cos", x)
    g.output(g.call("add", g.call("mul", g.call("exp", x), 1), g.call("exp", x)))
    before = graph_to_python(g)
    after = simplify_pass(g)
    assert graph_to_python(g) == before
    assert_same_results(g, after, torch.randn(4))


@pytest.mark.parametrize(
    "op, args, shape",
    [
        ("layer_norm", ((8,),), (4, 8)),
        ("softmax", (-1,), (4, 8)),
        ("gelu", (), (4, 8)),
        ("var", ((0, 1),), (4, 8)),
        ("linear", (), (4, 8)),
    ],
)
def test_decompose_then_simplify_matches_eager(op: str, args: tuple, shape: tuple) -> None:
    g = Graph()
    x = g.placeholder("x", TensorMeta(shape, torch.float32))
    inputs = [torch.randn(shape)]
    if op == "linear":
        args = (g.placeholder("w", TensorMeta((3, shape[-1]), torch.float32)),)
        inputs.append(torch.randn(3, shape[-1]))
    g.output(g.call(op, x, *args))
    result = simplify(decompose(g))
    verify(result, primitive_only=True)
    torch.testing.assert_close(run_graph(result, *inputs), run_graph(g, *inputs))
