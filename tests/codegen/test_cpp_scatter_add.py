"""A C++ scatter that adds (store_at 'add') runs on many threads. Where two places of the values
may add into one element, the adds are `omp atomic`, and the adds of 0 are skipped (each atomic
costs the same whatever it adds). Where the position's formula keeps blocks of the values apart
(a max pool's backward: one (n, c) plane each, codegen/scatter_blocks.py), each thread takes whole
blocks and adds plainly. Every result is checked against eager."""

from collections.abc import Callable

import torch
import torch.nn.functional as F

import minicompiler
from minicompiler.codegen.scatter_blocks import independent_blocks
from minicompiler.ir import Graph, Node, TensorMeta


def pool(x: torch.Tensor) -> torch.Tensor:
    return F.max_pool2d(x, 3, 2, 1)


def backward_code(compiled: minicompiler.CompiledFunction) -> str:
    return compiled.report.graphs[0].stage("codegen (backward)").text


def test_a_max_pool_backward_runs_plane_by_plane_without_atomics_and_matches_eager() -> None:
    x = torch.randn(4, 16, 64, 64)  # 4 * 16 * 32 * 32 outputs: enough for threads
    x[0, 0, :3, :3] = 1.0  # a window of ties: its gradient goes to the first maximum, as eager's
    compiled = minicompiler.compile(pool, backend="cpp")
    mine, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    grad = torch.randn(4, 16, 32, 32)
    compiled(mine).backward(grad)
    pool(theirs).backward(grad)
    torch.testing.assert_close(mine.grad, theirs.grad)
    code = backward_code(compiled)
    assert "for (int64_t block = 0; block < 64; ++block)" in code and "omp atomic" not in code, code


def test_a_scatter_at_positions_from_data_adds_atomically_and_skips_zeros() -> None:
    def fn(target: torch.Tensor, index: torch.Tensor, source: torch.Tensor) -> torch.Tensor:
        return target.index_add(0, index, F.relu(source))  # ReLU: about half the adds are of 0

    target, source = torch.randn(64, 512), torch.randn(4096, 512)
    index = torch.randint(0, 64, (4096,))
    compiled = minicompiler.compile(fn, backend="cpp")
    torch.testing.assert_close(compiled(target, index, source), fn(target, index, source))
    code = compiled.report.graphs[0].stage("codegen").text
    atomic = code.index("#pragma omp atomic")
    assert code[:atomic].rstrip().endswith("!= 0) {"), code[atomic - 200 : atomic + 100]


def _position(build: Callable[[Graph, Node], Node]) -> int:
    graph = Graph()
    reads = graph.placeholder("argmax", TensorMeta((2, 3, 4), torch.int64))
    return independent_blocks(build(graph, reads), (2, 3, 4))


def coordinate(g: Graph, dim: int) -> Node:
    shape = tuple(n if d == dim else 1 for d, n in enumerate((2, 3, 4)))
    return g.call("add", g.call("iota", shape, dim, torch.int64, torch.device("cpu")),
                  g.call("full", (2, 3, 4), 0, torch.int64, torch.device("cpu")))


def test_the_blocks_follow_from_the_positions_formula() -> None:
    def plane(g: Graph, reads: Node, step: int, spread: int) -> Node:
        # n * 3 * step + c * step + (a value in [0, spread) read from a tensor)
        inside = g.call("remainder", reads, spread)
        leading = g.call("add", g.call("mul", coordinate(g, 0), 3 * step), g.call("mul", coordinate(g, 1), step))
        return g.call("add", leading, inside)

    assert _position(lambda g, r: plane(g, r, 10, 10)) == 2  # each (n, c) in its own 10 elements
    assert _position(lambda g, r: plane(g, r, 10, 11)) == 0  # c's elements overlap the next c's
    assert _position(lambda g, r: g.call("add", g.call("mul", coordinate(g, 0), 40), r)) == 0  # data: anywhere
    # the last dim's own coordinate too: every place its own element
    exact = lambda g, r: g.call("add", plane(g, r, 4, 1), coordinate(g, 2))  # noqa: E731
    assert _position(exact) == 3
