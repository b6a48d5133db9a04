"""A convolution's backward has two gradients, its input's and its weight's. torch.nn.grad's
functions compute one per call; the wrapper gathers the two into one `convolution_grads(...)`, one
`aten.convolution_backward` call per convolution as in eager (counted on the aten ops the backward
dispatches). For that the forward saves each convolution's input (autograd/partition.py), which
min-cut would otherwise recompute in the kernel that reads the input's gradient, too late for
one call. Gradients equal eager's."""

from __future__ import annotations

import copy

import pytest
import torch
import torch.nn as nn

import minicompiler


def conv_bn_relu_net(dims: int) -> nn.Module:
    conv, norm = (nn.Conv1d, nn.BatchNorm1d) if dims == 1 else (nn.Conv2d, nn.BatchNorm2d)
    return nn.Sequential(conv(3, 8, 3, padding=1), norm(8), nn.ReLU(), conv(8, 8, 3, stride=2, padding=1),
                         norm(8), nn.ReLU(), conv(8, 4, 1))


@pytest.mark.parametrize("dims", [1, 2])
@pytest.mark.parametrize("input_needs_grad", [False, True])
def test_one_backward_call_per_convolution(dims: int, input_needs_grad: bool, dispatched_ops: type) -> None:
    torch.manual_seed(0)
    net = conv_bn_relu_net(dims)
    eager = copy.deepcopy(net)
    compiled = minicompiler.compile(net, backend="cpp")
    x = torch.randn(4, 3, *(10,) * dims, requires_grad=input_needs_grad)
    x_eager = x.detach().clone().requires_grad_(input_needs_grad)
    out, expected = compiled(x), eager(x_eager)
    torch.testing.assert_close(out, expected)
    grad = torch.randn_like(out)
    with dispatched_ops() as ops:
        out.backward(grad)
    expected.backward(grad)
    for (name, got), want in zip(net.named_parameters(), eager.parameters(), strict=True):
        torch.testing.assert_close(got.grad, want.grad, rtol=1e-4, atol=1e-4, msg=name)
    if input_needs_grad:
        torch.testing.assert_close(x.grad, x_eager.grad, rtol=1e-4, atol=1e-4)
    assert ops.names.count("convolution_backward") == 3, ops.names  # one per convolution
    backward = next(s.text for g in compiled.report.graphs for s in g.stages if s.name == "codegen (backward)")
    # the first convolution's input gradient is wanted only if x needs one
    assert backward.count("= convolution_grads(") == 2 + input_needs_grad, backward
    notes = next(s.notes for g in compiled.report.graphs for s in g.stages if s.name == "codegen (backward)")
    assert f"gathered: convolution_grads for {2 + input_needs_grad} convolutions" in " ".join(notes), notes


def test_the_forward_saves_what_the_weight_gradients_read() -> None:
    """Each hidden convolution's input (a ReLU's output) crosses over as a saved tensor."""
    net = conv_bn_relu_net(2)
    compiled = minicompiler.compile(net, backend="cpp")
    compiled(torch.randn(4, 3, 10, 10)).sum().backward()
    graph = compiled.report.graphs[0]
    forward = graph.stage("codegen (forward)").text
    saved = forward.split("    return ")[-1]
    relu_outputs = [line.split(" = ")[0].strip() for line in forward.splitlines()
                    if line.strip().startswith("where") and " = " in line and "empty" in line]
    assert relu_outputs and all(name in saved for name in relu_outputs), (relu_outputs, saved)
