"""A max pool whose input needs a gradient reads each window's value from x at its argmax (so the
gradient goes to one element, as torch's does, one add per output); once gradients are derived the
value is the window's maximum again (replace/max_pool_values.py): the inference program reads each
window once for its maximum, the training forward once for both the maximum and the argmax it
saves. Values, gradients and the kernels' reductions are checked against eager on both backends."""

from __future__ import annotations

import copy
import os

import pytest
import torch
from torch import nn

import minicompiler
from minicompiler.autograd import pool_gradient
from minicompiler.decompose import decompose
from minicompiler.ir import Graph, TensorMeta, run_graph
from minicompiler.replace.max_pool_values import max_pool_values


def net() -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 4, 3, padding=1), nn.ReLU(), nn.MaxPool2d(3, 2, 1), nn.Conv2d(4, 4, 3))


def generated(compiled: minicompiler.CompiledModule, suffix: str) -> str:
    """The generated code of the program whose stages end in `suffix` (each line of a kernel says
    which node it computes: `# sum = amax(where_20, (4, 5), False)`)."""
    return next(s.text for g in compiled.report.graphs for s in g.stages if s.name == "codegen" + suffix)


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_inference_takes_the_maximum_in_one_sweep_and_training_keeps_torchs_gradient(backend: str) -> None:
    if backend == "triton" and not os.environ.get("TRITON_INTERPRET"):
        pytest.skip("Triton on CPU tensors needs TRITON_INTERPRET=1")
    torch.manual_seed(0)
    model = net()
    reference = copy.deepcopy(model)
    compiled = minicompiler.compile(model, backend=backend)
    x = torch.randn(2, 3, 12, 12)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x), reference(x))
    code = generated(compiled, "")
    assert " = amax(" in code and " = argmax(" not in code, code
    notes = next(s for g in compiled.report.graphs for s in g.stages if s.name == "max pool values").text
    assert "no longer read at its argmax" in notes

    # on a GPU, cuDNN's TF32 convolutions round differently in eager's and the compiled layouts
    with torch.backends.cudnn.flags(allow_tf32=False):
        compiled(x).square().sum().backward()
        reference(x).square().sum().backward()
    for got, expected in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(got.grad, expected.grad, rtol=1e-4, atol=1e-4)
    code = generated(compiled, " (forward)")
    assert " = argmax(" in code and " = amax(" in code, code  # the argmax saved, and the maximum
    # the backward adds each output's gradient at its window's maximum: over the pool's outputs
    # (2, 4, 6, 6), not over every tap of every window (2, 4, 6, 6, 3, 3); on a GPU each element of
    # x gathers it from the windows that hold it instead (autograd/pool_gradient.py), no scatter
    steps = next(s.text for g in compiled.report.graphs for s in g.stages if s.name == "fuse (backward)")
    scatters = [line for line in steps.splitlines() if "store_at" in line and "over [" in line]
    if x.device.type in pool_gradient.GATHERED_ON:
        assert not scatters and "load_at" in steps, steps
    else:
        assert scatters and all("over [2, 4, 6, 6]:" in line for line in scatters), steps


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_ties_send_the_gradient_to_the_first_maximum_after_an_inference_call(backend: str) -> None:
    """Windows of equal values (small integers): torch's gradient goes to each window's first
    largest element, not shared among them as amax's rule would. The inference program, compiled
    first, takes the maximum; the training program compiled from the same graph afterwards must
    still differentiate the pick at the argmax."""
    if backend == "triton" and not os.environ.get("TRITON_INTERPRET"):
        pytest.skip("Triton on CPU tensors needs TRITON_INTERPRET=1")
    def fn(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return torch.nn.functional.max_pool2d(x, 3, 2, 1) * w

    compiled = minicompiler.compile(fn, backend=backend)
    x = torch.randint(0, 3, (2, 3, 8, 8)).float()
    w = torch.randn(2, 3, 4, 4)
    with torch.no_grad():
        torch.testing.assert_close(compiled(x, w), fn(x, w))
    ours, theirs = x.clone().requires_grad_(), x.clone().requires_grad_()
    compiled(ours, w).sum().backward()
    fn(theirs, w).sum().backward()
    torch.testing.assert_close(ours.grad, theirs.grad)


def test_a_read_at_an_argmax_that_no_max_pool_made_stays() -> None:
    """b read at a's argmax is no maximum of b; nor is x read at its own argmax rewritten, which
    would be right: only a max pool's read carries the promise (decompose/pooling.py's tag)."""
    def fn(a: torch.Tensor, b: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        best = a.argmax(-1, keepdim=True)
        return b.gather(-1, best), a.gather(-1, best)

    compiled = minicompiler.compile(fn)
    a, b = torch.randn(5, 7), torch.randn(5, 7)
    torch.testing.assert_close(compiled(a, b), fn(a, b))
    assert not any(s.name == "max pool values" for g in compiled.report.graphs for s in g.stages)


def test_a_tagged_read_of_another_tensor_is_not_taken_for_the_maximum() -> None:
    """The tag alone is not trusted: a pool's read moved onto another tensor keeps its read."""
    graph = Graph()
    x = graph.placeholder("x", TensorMeta((2, 3, 8, 8), torch.float32))
    y = graph.placeholder("y", TensorMeta((2, 3, 8, 8), torch.float32))
    graph.output(graph.call("max_pool", x, (3, 3), (2, 2), (1, 1), (1, 1), False, True))
    graph = decompose(graph)
    x, y = graph.inputs
    x_in, y_in = torch.randn(2, 3, 8, 8), torch.randn(2, 3, 8, 8)
    expected = run_graph(graph, x_in, y_in)
    reads = [n for n in graph.compute_nodes() if n.op == "load_at" and n.args[0] is x]
    moved = next(n for n in reads if n.meta.shape == (2, 3, 4, 4))  # the one at the argmax
    moved.args = (y, *moved.args[1:])
    before = run_graph(graph, x_in, y_in)
    assert max_pool_values(graph) == []
    torch.testing.assert_close(run_graph(graph, x_in, y_in), before)
    assert not torch.equal(before, expected)
