"""`nn.Linear` then `nn.ReLU`: on the GPU, in a program nothing differentiates, the matmul and its
ReLU are one call, `torch._addmm_activation` (replace/addmm_relu.py: cuBLASLt's epilogue is the
ReLU), with no kernel after it. So is a training forward: the ReLU's gradient reads the sign of
its output, not of the product (autograd/pointwise_rules.py), so the product is the forward's
alone. A product read by anything else keeps its own call. The rewrite is checked
on the CPU by running the graph before and after it; the GPU program against eager on the H100."""

from __future__ import annotations

import copy
import os

import pytest
import torch
from torch import nn

import minicompiler
from minicompiler.ir import copy_graph
from minicompiler.ir.interpreter import run_graph
from minicompiler.replace.addmm_relu import addmm_relu


def mlp() -> nn.Module:
    return nn.Sequential(nn.Linear(32, 64), nn.ReLU(), nn.Linear(64, 64), nn.ReLU(), nn.Linear(64, 10))


def generated(compiled: minicompiler.CompiledModule, suffix: str) -> str:
    return next(s.text for g in compiled.report.graphs for s in g.stages if s.name == "codegen" + suffix)


def simplified_graph(fn, *inputs: torch.Tensor):  # noqa: ANN001, ANN201 - a callable, a Graph
    compiled = minicompiler.compile(fn, backend="cpp")
    with torch.no_grad():
        compiled(*inputs)
    return compiled, compiled.cache[0].compiled.artifacts["simplify"]


def test_the_rewrite_gives_the_graphs_values_nan_included() -> None:
    torch.manual_seed(0)
    model = mlp()
    x = torch.randn(16, 32)
    x[0, :] = float("nan")  # a NaN product stays NaN through the ReLU, as in eager
    compiled, graph = simplified_graph(model, x)
    rewritten = copy_graph(graph)
    notes = addmm_relu(rewritten)
    assert len(notes) == 2, notes
    assert [n.op for n in rewritten.compute_nodes()].count("where") == 0
    inputs = [x, *(p.detach() for p in model.parameters())]
    torch.testing.assert_close(run_graph(rewritten, *inputs), run_graph(graph, *inputs), equal_nan=True)
    # on the CPU the pipeline leaves the ReLU to a kernel: torch would make the same two passes
    assert "_addmm_activation" not in generated(compiled, "")


def test_a_product_read_elsewhere_keeps_its_own_call() -> None:
    linear = nn.Linear(8, 8)

    def both(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = linear(x)
        return y, torch.relu(y)

    _, graph = simplified_graph(both, torch.randn(4, 8))
    assert addmm_relu(graph) == []


def test_training_saves_each_relus_output_not_its_product() -> None:
    """The backward of Linear -> ReLU reads the ReLU's output (which the next layer's weight
    gradient reads anyway) for the ReLU's mask: the product is not saved, and the gradients,
    NaN rows included, are eager's."""
    torch.manual_seed(0)
    model = mlp()
    reference = copy.deepcopy(model)
    compiled = minicompiler.compile(model)
    x = torch.randn(16, 32)
    x[0, :] = float("nan")
    compiled(x).nan_to_num().square().sum().backward()
    reference(x).nan_to_num().square().sum().backward()
    for (name, got), want in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(got.grad, want.grad, rtol=1e-4, atol=1e-4, equal_nan=True, msg=name)
    saved = next(s.text for g in compiled.report.graphs for s in g.stages if s.name == "autograd")
    assert "addmm" not in saved.splitlines()[0] and saved.splitlines()[0].count("where") == 2, saved


def test_inference_and_training_on_the_gpu_call_addmm_with_its_relu() -> None:
    # asked when the test runs, not at collection (the GPU plugin turns the interpreter off then)
    if not torch.cuda.is_available() or os.environ.get("TRITON_INTERPRET") == "1":
        pytest.skip("needs a CUDA GPU and compiled (not interpreted) Triton")
    torch.manual_seed(0)
    model = mlp().cuda()
    reference = copy.deepcopy(model)
    compiled = minicompiler.compile(model)
    x = torch.randn(256, 32, device="cuda")
    # cuBLASLt's ReLU epilogue must keep NaN as eager's ReLU does: a row of NaN, one NaN, an inf
    x[0, :], x[1, 3], x[2, 5] = float("nan"), float("nan"), float("inf")
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), reference(x), equal_nan=True)
    code = generated(compiled, "")
    assert code.count("_addmm_activation") >= 2 and "kernel_" not in code.split("def call")[-1], code
    x = torch.randn(256, 32, device="cuda")  # training after inference: it differentiates the original graph
    compiled(x).square().sum().backward()
    reference(x).square().sum().backward()
    for (name, got), want in zip(model.named_parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(got.grad, want.grad, rtol=1e-3, atol=1e-3, msg=name)
    assert generated(compiled, " (forward)").count("_addmm_activation") >= 2
