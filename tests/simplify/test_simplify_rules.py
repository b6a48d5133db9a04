"""Each algebraic rule fires where it should, never where it would change a result's dtype or
shape, and leaves the results unchanged."""

from __future__ import annotations

from collections.abc import Callable

import pytest
import torch

import minicompiler
from minicompiler.ir import Graph, Node, TensorMeta, run_graph
from minicompiler.simplify import RULES, apply_algebraic_rules, eliminate_dead_code

Build = Callable[[Graph, Node], Node]


def graph_of(build: Build, shape: tuple[int, ...], dtype: torch.dtype) -> Graph:
    graph = Graph()
    graph.output(build(graph, graph.placeholder("x", TensorMeta(shape, dtype))))
    return graph


def sample(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    if dtype == torch.bool:
        return torch.rand(shape) < 0.5
    if not dtype.is_floating_point:
        return torch.randint(1, 5, shape, dtype=dtype)
    return (torch.rand(shape, dtype=torch.float64) + 0.5).to(dtype)  # positive: exp(log(x)) is exact


def simplified(graph: Graph) -> tuple[Graph, list[str]]:
    log: list[str] = []
    return eliminate_dead_code(apply_algebraic_rules(graph, log)), log


def ops_of(graph: Graph) -> list[str]:
    return [n.op for n in graph.compute_nodes()]


def full(g: Graph, shape: tuple[int, ...], value: float) -> Node:
    return g.call("full", shape, value, torch.float32, "cpu")


# rule name -> (graph body, the ops left after the rule, input shape); inputs are float32
RULE_EXAMPLES: dict[str, tuple[Build, list[str], tuple[int, ...]]] = {
    "x*1 -> x": (lambda g, x: g.call("mul", x, 1), [], (3, 4)),
    "x+0 -> x": (lambda g, x: g.call("add", 0.0, x), [], (3, 4)),
    "x-0 -> x": (lambda g, x: g.call("sub", x, full(g, (4,), 0.0)), [], (3, 4)),
    "x/1 -> x": (lambda g, x: g.call("div", x, 1.0), [], (3, 4)),
    "x*0 -> zeros (not for floats)": (
        lambda g, x: g.call("mul", g.call("convert", x, torch.int32), 0), ["full"], (3, 4)
    ),
    "x/c -> x*(1/c) for c a power of 2": (lambda g, x: g.call("div", x, 0.125), ["mul"], (3, 4)),
    "x**1 -> x": (lambda g, x: g.call("pow", x, 1), [], (3, 4)),
    "x**2 -> x*x": (lambda g, x: g.call("pow", x, 2.0), ["mul"], (3, 4)),
    "x**0.5 -> sqrt(x)": (lambda g, x: g.call("pow", x, 0.5), ["sqrt"], (3, 4)),
    "neg(neg(x)) -> x": (lambda g, x: g.call("neg", g.call("neg", x)), [], (3, 4)),
    "exp(log(x)) -> x": (lambda g, x: g.call("exp", g.call("log", x)), [], (3, 4)),
    "convert(x, same dtype) -> x": (lambda g, x: g.call("convert", x, torch.float32), [], (3, 4)),
    "reshape to same shape -> x": (lambda g, x: g.call("reshape", x, (3, 4)), [], (3, 4)),
    "expand to same shape -> x": (lambda g, x: g.call("expand", x, (3, 4)), [], (3, 4)),
    "reshape(reshape(x)) -> reshape": (
        lambda g, x: g.call("reshape", g.call("reshape", x, (12,)), (4, 3)), ["reshape"], (3, 4)
    ),
    "permute identity -> x": (lambda g, x: g.call("permute", x, (0, 1, 2)), [], (2, 3, 4)),
    "permute(permute(x)) -> one permute": (
        lambda g, x: g.call("permute", g.call("permute", x, (1, 2, 0)), (0, 2, 1)), ["permute"], (2, 3, 4)
    ),
    # a weight's gradient: (x^T @ g)^T -> g^T @ x (here x^T @ x, batched; the next round of
    # simplify folds the permute of the permute)
    "permute(a @ b) -> permute(b) @ permute(a)": (
        lambda g, x: g.call("permute", g.call("matmul", g.call("permute", x, (0, 2, 1)), x), (0, 2, 1)),
        ["permute", "permute", "permute", "matmul"], (2, 3, 4),
    ),
    # seed 001's numpy_fn: the sum of an outer product is the product of the sums
    "sum(a*b) -> sum(a)*sum(b) where each summed dim is one factor's": (
        lambda g, x: g.call("sum", g.call("mul", g.call("reshape", x, (2, 3, 1)), g.call("reshape", x, (2, 1, 3))),
                            (1, 2), False),
        ["reshape", "reshape", "sum", "sum", "mul", "reshape"], (2, 3),
    ),
    # x[:, None, :] summed over its last dim: x's own sum, reshaped
    "sum(reshape(x) adding dims of size 1) -> reshape(sum(x))": (
        lambda g, x: g.call("sum", g.call("reshape", x, (2, 1, 3)), (2,), True), ["sum", "reshape"], (2, 3),
    ),
    # a position embedding's indices: torch.arange(4) broadcast over the batch, within a table of 4
    "check_indices(positions 0..n-1 within bounds) -> positions": (
        lambda g, x: g.call("add", x, g.call("convert", g.call("check_indices", positions(g, 4), 0, 4), torch.float32)),
        ["iota", "expand", "convert", "add"], (3, 4),
    ),
    # q, k, v = qkv.unbind(): each one's gradient padded with zeros, the three added up
    "cat(..., a, 0, ...) + cat(..., 0, b, ...) -> cat(..., a, b, ...)": (
        lambda g, x: g.call("add", g.call("add", g.call("cat", [x, full(g, (2, 4), 0.0)], 0),
                                          g.call("cat", [full(g, (1, 4), 0.0), g.call("exp", x),
                                                         full(g, (1, 4), 0.0)], 0)),
                            g.call("cat", [full(g, (2, 4), 0.0), g.call("neg", x)], 0)),
        ["exp", "neg", "cat"], (1, 4),
    ),
    # the qkv gradient: cat([g_q, g_k, g_v]) permuted to the projection's order, then reshaped
    "reshape(permute(cat(xs))) -> reshape(cat(permute(x) for x in xs))": (
        lambda g, x: g.call("reshape", g.call("permute", g.call("cat", [x, g.call("exp", x), g.call("neg", x)], 0),
                                              (1, 0, 2)), (2, 12)),
        ["exp", "neg", "permute", "permute", "permute", "cat", "reshape"], (1, 2, 4),
    ),
}


def positions(g: Graph, count: int) -> Node:
    return g.call("expand", g.call("iota", (1, count), 1, torch.int64, "cpu"), (3, count))


@pytest.mark.parametrize("rule", RULES, ids=lambda rule: rule.name)
def test_rule_fires_and_keeps_the_result(rule) -> None:
    build, ops_left, shape = RULE_EXAMPLES[rule.name]  # a new rule needs an example here
    graph = graph_of(build, shape, torch.float32)
    result, log = simplified(graph)
    assert any(rule.name in line for line in log), log
    assert ops_of(result) == ops_left
    x = sample(shape, torch.float32)
    torch.testing.assert_close(run_graph(result, x), run_graph(graph, x))


@pytest.mark.parametrize(
    "why, build, shape, dtype",
    [
        ("inf*0 is nan", lambda g, x: g.call("mul", x, 0), (3,), torch.float32),
        ("int * 0.0 is a float", lambda g, x: g.call("mul", x, 0.0), (3,), torch.int32),
        ("int ** 2.0 is a float", lambda g, x: g.call("pow", x, 2.0), (3,), torch.int64),
        ("exp(log(int)) is a float", lambda g, x: g.call("exp", g.call("log", x)), (3,), torch.int32),
        ("a real convert", lambda g, x: g.call("convert", x, torch.float64), (3,), torch.float32),
        ("a real reshape", lambda g, x: g.call("reshape", x, (4, 3)), (3, 4), torch.float32),
        ("a sum over a reshape that moves elements",
         lambda g, x: g.call("sum", g.call("reshape", x, (3, 2)), (1,), False), (2, 3), torch.float32),
        ("a real expand", lambda g, x: g.call("expand", x, (2, 3)), (3,), torch.float32),
        ("a transpose of a square", lambda g, x: g.call("permute", x, (1, 0)), (3, 3), torch.float32),
        ("the reshape of the permuted cat is a view of it",
         lambda g, x: g.call("reshape", g.call("permute", g.call("cat", [x, g.call("exp", x)], 0), (1, 0, 2)),
                             (2, 2, 2, 2)),
         (1, 2, 4), torch.float32),
        ("3 is not a power of 2", lambda g, x: g.call("div", x, 3.0), (3,), torch.float32),
        ("2**-20 is subnormal in float16", lambda g, x: g.call("div", x, 2.0**20), (3,), torch.float16),
        ("the 1 broadcasts x", lambda g, x: g.call("mul", x, full(g, (2, 3), 1.0)), (3,), torch.float32),
        ("the 0 promotes x", lambda g, x: g.call("add", x, full(g, (3,), 0.0)), (3,), torch.float16),
        ("both factors run along the summed dim", lambda g, x: g.call("sum", g.call("mul", x, x), (1,), False),
         (3, 4), torch.float32),
        ("the product is read unsummed too: it would be computed anyway",
         lambda g, x: g.call("add", g.call("sum", p := g.call("mul", g.call("reshape", x, (3, 1)),
                                                               g.call("reshape", x, (1, 3))), (0, 1), True), p),
         (3,), torch.float32),
        ("position 4 is past a table of 4",
         lambda g, x: g.call("check_indices", positions(g, 4), 0, 3), (3, 4), torch.float32),
        ("indices a user gives are checked", lambda g, x: g.call("check_indices", x, 0, 4), (3, 4), torch.int64),
        ("both cats have a non-zero piece at the same place",
         lambda g, x: g.call("add", g.call("cat", [x, full(g, (1, 4), 0.0)], 0),
                             g.call("cat", [g.call("neg", x), full(g, (1, 4), 0.0)], 0)), (1, 4), torch.float32),
        ("the cats' non-zero pieces overlap: an add is needed there",
         lambda g, x: g.call("add", g.call("cat", [x, full(g, (1, 4), 0.0)], 0),
                             g.call("cat", [full(g, (1, 4), 0.0), x], 0)), (2, 4), torch.float32),
        ("the product is read untransposed too: it would be computed twice",
         lambda g, x: g.call("add", g.call("permute", p := g.call("matmul", x, x), (1, 0)), p), (3, 3),
         torch.float32),
    ],
)
def test_rule_declines_when_the_result_would_change(why: str, build: Build, shape: tuple, dtype) -> None:
    graph = graph_of(build, shape, dtype)
    result, log = simplified(graph)
    assert log == [] and ops_of(result) == ops_of(graph), why


DTYPES = [torch.bool, torch.int32, torch.int64, torch.float16, torch.bfloat16, torch.float32, torch.float64]


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_no_rule_changes_dtype_or_shape(dtype: torch.dtype) -> None:
    for name, (build, _, shape) in RULE_EXAMPLES.items():
        x = sample(shape, dtype)
        try:
            graph = graph_of(build, shape, dtype)
            expected = run_graph(graph, x)
        except (RuntimeError, TypeError):  # op not defined for this dtype (e.g. neg of bool)
            continue
        result, _ = simplified(graph)
        before, after = graph.output_nodes()[0].meta, result.output_nodes()[0].meta
        assert (after.shape, after.dtype) == (before.shape, before.dtype), name
        torch.testing.assert_close(run_graph(result, x), expected, equal_nan=True, msg=name)


def test_the_rewrites_of_a_training_steps_graphs_are_in_the_report() -> None:
    """The forward's and backward's rule rewrites are levers too: the autograd step's notes list
    them (here the gradient of q, k, v = qkv.unbind(): one cat instead of three added)."""
    def attention_like(qkv: torch.Tensor) -> torch.Tensor:
        q, k, v = qkv.unbind(0)
        return (q * 2 + k.sin() * v).sum()

    qkv = torch.randn(3, 4, 5, requires_grad=True)
    compiled = minicompiler.compile(attention_like)
    (actual,) = torch.autograd.grad(compiled(qkv), qkv)
    (expected,) = torch.autograd.grad(attention_like(qkv), qkv)
    torch.testing.assert_close(actual, expected)
    notes = compiled.report.graphs[0].stage("autograd").notes
    assert any(note.startswith("backward: algebraic:") and "-> cat(..., a, b, ...)" in note for note in notes), notes
