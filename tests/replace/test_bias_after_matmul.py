"""A linear layer's bias moved out of cuBLAS's epilogue into the pointwise kernel after the matmul
(replace/bias_after_matmul.py, on the GPU). The rewrite is checked on the CPU by running the graph
before and after it; the GPU program against eager on the H100."""

from __future__ import annotations

import copy
import os

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import minicompiler
from minicompiler.ir import copy_graph
from minicompiler.ir.interpreter import run_graph
from minicompiler.replace.bias_after_matmul import _race, bias_after_matmul


class FeedForward(nn.Module):
    """BERT's feed-forward block: linear, GELU, linear, residual add, LayerNorm."""

    def __init__(self, width: int = 16) -> None:
        super().__init__()
        self.up, self.down, self.norm = nn.Linear(width, 4 * width), nn.Linear(4 * width, width), nn.LayerNorm(width)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.norm(x + self.down(F.gelu(self.up(x))))


def simplified_graph(fn, *inputs: torch.Tensor):  # noqa: ANN001, ANN201 - a callable, a Graph
    compiled = minicompiler.compile(fn, backend="cpp")
    with torch.no_grad():
        compiled(*inputs)
    return compiled.cache[0].compiled.artifacts["simplify"]


def rewritten_values(fn, *inputs: torch.Tensor, parameters=()) -> list[str]:  # noqa: ANN001
    """Rewrite fn's graph; assert it computes what it did; the rewrite's notes."""
    graph = simplified_graph(fn, *inputs)
    rewritten = copy_graph(graph)
    notes = bias_after_matmul(rewritten, worth_it=lambda node: True)  # the race is the GPU's
    values = [*inputs, *(p.detach() for p in parameters)]
    torch.testing.assert_close(run_graph(rewritten, *values), run_graph(graph, *values))
    if notes:
        assert "addmm" not in [n.op for n in rewritten.compute_nodes()]
    return notes


def test_both_biases_of_a_feed_forward_block_move_into_the_kernels_after_them() -> None:
    torch.manual_seed(0)
    block = FeedForward()
    notes = rewritten_values(block, torch.randn(3, 5, 16), parameters=block.parameters())
    assert len(notes) == 2, notes


def test_a_product_read_directly_and_through_a_reshape_gets_its_bias_once() -> None:
    linear = nn.Linear(8, 6)

    def both(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = linear(x)
        return y.sin(), y.reshape(2, 4, 6).exp()

    notes = rewritten_values(both, torch.randn(8, 8), parameters=linear.parameters())
    assert len(notes) == 1, notes


def test_the_bias_stays_in_the_call_where_the_product_is_read_by_a_library_call_or_returned() -> None:
    linear = nn.Linear(8, 8)
    graph = simplified_graph(lambda x: linear(x) @ x.t(), torch.randn(4, 8))
    assert bias_after_matmul(graph, worth_it=lambda node: True) == []
    graph = simplified_graph(lambda x: (linear(x), linear(x).tanh()), torch.randn(4, 8))
    assert bias_after_matmul(graph, worth_it=lambda node: True) == []


def test_half_and_double_precision_keep_the_bias_in_the_call() -> None:
    linear = nn.Linear(8, 8).double()
    graph = simplified_graph(lambda x: linear(x).tanh(), torch.randn(4, 8, dtype=torch.float64))
    assert bias_after_matmul(graph, worth_it=lambda node: True) == []


def needs_a_gpu() -> None:
    # asked when the test runs, not at collection (the GPU plugin turns the interpreter off then)
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("needs a CUDA GPU and compiled (not interpreted) Triton")


def test_the_race_moves_the_bias_where_mm_is_faster_and_only_there() -> None:
    needs_a_gpu()
    block = FeedForward(768).cuda()
    x = torch.randn(8, 128, 768, device="cuda")
    compiled = minicompiler.compile(block)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), block(x), rtol=1e-4, atol=1e-4)
    moved = [line for g in compiled.report.graphs for s in g.stages if s.name == "bias after matmul"
             for line in s.text.splitlines()]
    # the race of each linear's shapes: x @ w.t() (w.t() is a transposed view), the bias
    cuda = torch.device("cuda")
    races = [_race((((n,), (1,), torch.float32, cuda), ((1024, k), (k, 1), torch.float32, cuda),
                    ((k, n), (1, k), torch.float32, cuda))) for k, n in ((768, 3072), (3072, 768))]
    assert len(moved) == sum(races), (moved, races)


def test_bert_feed_forward_on_the_gpu_matches_eager_in_inference_and_training(monkeypatch) -> None:
    needs_a_gpu()
    torch.manual_seed(0)
    block = FeedForward(64).cuda()
    reference = copy.deepcopy(block)
    moved = []  # the race decides which biases move: here every one does, so the program has the adds

    def move_every_bias(graph):  # noqa: ANN001, ANN202
        notes = bias_after_matmul(graph, worth_it=lambda node: True)
        moved.extend(notes)
        return notes

    monkeypatch.setattr("minicompiler.pipeline.bias_after_matmul", move_every_bias)
    compiled = minicompiler.compile(block)
    x = torch.randn(4, 32, 64, device="cuda")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), reference(x), rtol=1e-4, atol=1e-4)
    assert len(moved) == 2, moved
    x = torch.randn(4, 32, 64, device="cuda", requires_grad=True)
    x_ref = x.detach().clone().requires_grad_()
    compiled(x).square().sum().backward()
    reference(x_ref).square().sum().backward()
    torch.testing.assert_close(x.grad, x_ref.grad, rtol=1e-3, atol=1e-3)
    for (name, got), want in zip(block.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(got.grad, want.grad, rtol=1e-3, atol=1e-3, msg=name)
