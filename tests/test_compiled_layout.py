"""Channels-last end to end: a channels-last conv+bn+relu net compiles to code whose results equal
eager's, in eager's memory format, with no copy to contiguous after the convolution (checked on the
ops the compiled call dispatches, and in the generated wrapper); the report's `layout` step says
which buffers are channels-last. CUDA: the same through Triton (skipped without CUDA)."""

from __future__ import annotations

import copy
import os
import re

import pytest
import torch
from torch import nn
from torch.utils._python_dispatch import TorchDispatchMode

import minicompiler

COPIES = {"clone", "contiguous", "_to_copy"}  # (copy_ writes the new running statistics back)


def conv_bn_relu(device: str) -> nn.Module:
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                        nn.Conv2d(8, 4, 3, padding=1), nn.ReLU())
    return net.to(device=device, memory_format=torch.channels_last)


def check_channels_last(device: str, training: bool, dispatched_ops: type) -> None:
    net = conv_bn_relu(device).train(training)
    compiled = minicompiler.compile(net)
    x = torch.randn(2, 3, 9, 11, device=device).to(memory_format=torch.channels_last)
    with torch.no_grad():
        compiled(x)  # compiled (and, in training, running statistics updated once) outside the op count
        with dispatched_ops() as ops:
            out = compiled(x)
        expected = net(x)  # in training, from batch statistics: the running ones do not matter
    torch.testing.assert_close(out, expected)
    assert out.stride() == expected.stride()  # eager's memory format: channels-last
    assert not COPIES & set(ops.names), ops.names
    graph = compiled.report.graphs[0]
    # (no copy to row-major: COPIES above; the wrapper's .contiguous() on a folded conv+bn weight
    # or bias already laid out as its meta says is no copy, and dispatches nothing)
    assert "channels-last" in graph.stage("layout").text


@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_channels_last_kept_on_cpu(training: bool, dispatched_ops: type) -> None:
    check_channels_last("cpu", training, dispatched_ops)


def test_channels_last_gradients_equal_eager() -> None:
    net = conv_bn_relu("cpu")
    eager = conv_bn_relu("cpu")
    eager.load_state_dict(net.state_dict())
    x = torch.randn(2, 3, 9, 11).to(memory_format=torch.channels_last)
    out = minicompiler.compile(net)(x)
    expected = eager(x)
    torch.testing.assert_close(out, expected)
    assert out.stride() == expected.stride()
    out.square().sum().backward()
    expected.square().sum().backward()
    for ours, theirs in zip(net.parameters(), eager.parameters(), strict=True):
        # sums over N*H*W in another order than eager's: float32 rounding, on gradients of size ~10
        torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-4, atol=1e-4)


def test_row_major_stays_row_major() -> None:
    net = nn.Sequential(nn.Conv2d(3, 4, 3), nn.ReLU())
    compiled = minicompiler.compile(net)
    x = torch.randn(1, 3, 6, 6)
    with torch.no_grad():
        out = compiled(x)
        torch.testing.assert_close(out, net(x))
    assert out.is_contiguous()
    assert not any(s.name == "layout" for s in compiled.report.graphs[0].stages)


class ConvNeXtBlock(nn.Module):
    """timm's ConvNeXt block: a depthwise convolution, then LayerNorm and an MLP over the activations
    permuted to (N, H, W, C), permuted back and added to the block's input."""

    def __init__(self, channels: int = 8) -> None:
        super().__init__()
        self.conv = nn.Conv2d(channels, channels, 7, padding=3, groups=channels)
        self.norm = nn.LayerNorm(channels)
        self.fc = nn.Linear(channels, channels)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        y = self.conv(x).permute(0, 2, 3, 1)
        return x + self.fc(self.norm(y)).permute(0, 3, 1, 2)


@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_a_view_of_a_channels_last_convolution_reads_it_without_a_copy(training: bool, dispatched_ops: type) -> None:
    # the convolution of a channels-last input is channels-last, and its permute is then row-major
    # (N, H, W, C), as in eager: before, the convolution's output was copied to row-major for the view
    net = nn.Sequential(ConvNeXtBlock(), ConvNeXtBlock()).train(training)
    eager = copy.deepcopy(net)
    compiled = minicompiler.compile(net)
    x = torch.randn(2, 8, 9, 11).to(memory_format=torch.channels_last)
    with torch.set_grad_enabled(training):  # eval: the inference program; training: forward and backward
        compiled(x)
        with dispatched_ops() as ops:
            out = compiled(x)
        expected = eager(x)
    torch.testing.assert_close(out, expected)
    assert out.stride() == expected.stride()
    assert not COPIES & set(ops.names), ops.names
    layout = next(s.text for s in compiled.report.graphs[0].stages if s.name.startswith("layout"))
    assert re.search(r"torch_call\w*: channels-last, as torch lays it out", layout), layout
    if training:
        out.square().sum().backward()
        expected.square().sum().backward()
        for ours, theirs in zip(net.parameters(), eager.parameters(), strict=True):
            torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-4, atol=1e-4)


def test_a_node_whose_reshape_would_copy_channels_last_stays_row_major() -> None:
    # the layout optimization wants the ReLU channels-last (a convolution reads it), but its
    # `view(2, -1)` (a reshape in the graph) of (C, H, W) would then copy: it stays row-major
    def f(x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        y = torch.relu(x)
        return torch.conv2d(y, w, padding=1), y.view(2, -1) * 2

    x, w = torch.randn(2, 3, 5, 5), torch.randn(4, 3, 3, 3)
    compiled = minicompiler.compile(f, options={"layout_optimization": True})
    for ours, theirs in zip(compiled(x, w), f(x, w), strict=True):
        torch.testing.assert_close(ours, theirs)
    graph = compiled.report.graphs[0]
    assert "torch_call: channels-last" in graph.stage("layout").text  # the convolution is
    assert not re.search(r"^where\w*: channels-last", graph.stage("layout").text, re.MULTILINE)
    assert "ops.reshape" not in graph.stage("codegen").text  # the view is one (no copy)


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_channels_last_kept_on_cuda(training: bool, dispatched_ops: type) -> None:
    check_channels_last("cuda", training, dispatched_ops)


# -- the layout optimization: convolutions made channels-last (on CUDA by default) ---------------
def row_major_net(device: str) -> nn.Module:
    return nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 6, 3, padding=1),
                         nn.ReLU(), nn.Conv2d(6, 4, 1)).to(device)


def same_layout(ours: torch.Tensor, theirs: torch.Tensor) -> bool:
    """Equal strides along every dim of size > 1: a dim of size 1 is never stepped along, so its
    stride means nothing (torch's is_contiguous ignores it too; the weight gradient of a 1x1
    convolution run channels-last differs from eager's there only)."""
    return ours.shape == theirs.shape and all(
        n == 1 or a == b for n, a, b in zip(ours.shape, ours.stride(), theirs.stride(), strict=True))


def check_optimized_layout(device: str, options: dict | None) -> None:
    """Row-major model and input; every call's values and strides equal eager's, also after the
    weights change in place (the channels-last copies are made again)."""
    net = row_major_net(device).eval()
    compiled = minicompiler.compile(net, options=options)
    with torch.no_grad():
        for _ in range(2):
            x = torch.randn(2, 3, 9, 11, device=device)
            out, expected = compiled(x), net(x)
            torch.testing.assert_close(out, expected)
            assert out.stride() == expected.stride()
            net[3].weight.mul_(-1.5)  # as an optimizer step would
    graph = compiled.report.graphs[0]
    assert "3_weight: converted to channels-last once" in graph.stage("layout").text
    assert "back to eager's layout, as a graph output" in graph.stage("layout").text
    assert "channels_last_copy(" in graph.stage("codegen").text


def test_layout_optimization_forced_on_cpu() -> None:
    check_optimized_layout("cpu", {"layout_optimization": True})


def test_layout_optimization_off_on_cpu_by_default() -> None:
    net = row_major_net("cpu").eval()
    compiled = minicompiler.compile(net)
    with torch.no_grad():
        compiled(torch.randn(1, 3, 5, 5))
    assert not any(s.name == "layout" for s in compiled.report.graphs[0].stages)


def test_layout_optimization_training_gradients_equal_eager() -> None:
    net = row_major_net("cpu")
    eager = copy.deepcopy(net)
    compiled = minicompiler.compile(net, options={"layout_optimization": True})
    for _ in range(2):
        x = torch.randn(2, 3, 9, 11, requires_grad=True)
        x_eager = x.detach().clone().requires_grad_()
        out, expected = compiled(x), eager(x_eager)
        torch.testing.assert_close(out, expected)
        assert out.stride() == expected.stride()
        out.square().sum().backward()
        expected.square().sum().backward()
        torch.testing.assert_close(x.grad, x_eager.grad)
        assert x.grad.stride() == x_eager.grad.stride()
        for ours, theirs in zip(net.parameters(), eager.parameters(), strict=True):
            # float32 sums over N*H*W in another order than eager's; the first convolution's bias
            # gradient is ~0 (the batch norm after it cancels it), all rounding: an absolute bound
            torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-4, atol=1e-4)
            assert same_layout(ours.grad, theirs.grad), (ours.grad.stride(), theirs.grad.stride())
    assert any(s.name.startswith("layout") for s in compiled.report.graphs[0].stages)


class CopiedShapes(TorchDispatchMode):
    """The shapes of the tensors copied (to another layout) inside the block."""

    def __init__(self) -> None:
        super().__init__()
        self.shapes: list[tuple[int, ...]] = []

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # noqa: ANN001, ANN204 - torch's protocol
        result = func(*args, **(kwargs or {}))
        if func.overloadpacket.__name__ in COPIES:
            self.shapes.append(tuple(result.shape))
        return result


def test_layout_optimization_backward_keeps_activation_gradients_channels_last() -> None:
    """A convolution's gradient for its input is computed from the channels-last weight copy (the
    forward's, saved), so it comes back channels-last, as the kernels around it read it: no copy
    of an activation-sized gradient inside the backward. Gradients equal eager's, laid out alike."""
    # (3x3 convolutions: a 1x1 weight is row-major and channels-last at once, and oneDNN answers a
    # row-major gradient for it, which is copied; cuDNN answers channels-last for a channels-last grad)
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 6, 3, padding=1),
                        nn.ReLU(), nn.Conv2d(6, 4, 3))
    eager = copy.deepcopy(net)
    compiled = minicompiler.compile(net, options={"layout_optimization": True})
    x = torch.randn(5, 3, 9, 11, requires_grad=True)  # batch 5: no weight's dim is 5
    compiled(x).square().sum().backward()  # compiled outside the count
    x.grad = None
    out = compiled(x)
    with CopiedShapes() as copies:
        out.square().sum().backward()
    graph = compiled.report.graphs[0]
    # copied by a kernel in the forward (a trained weight changes every step), which saves the copy
    # for the backward
    assert "5_weight: copied channels-last by a kernel" in graph.stage("layout (forward)").text
    # each gradient for a hidden activation (not x's, which the backward returns) is asked for in
    # channels-last, the layout it now comes in (it was asked row-major: a copy on CUDA); each
    # convolution's two gradients come from one call
    wrapper = graph.stage("codegen (backward)").text
    returned = set(re.findall(r"\w+", wrapper.split("    return ")[-1]))
    # (x's gradient comes out of the extern channels-last: a kernel copies it as x is laid out)
    returned |= set(re.findall(r"kernel_clone\w*(?:\[[^\]]*\])?\((\w+)", wrapper))
    input_grads = re.findall(r"(\w+), \w+ = convolution_grads\(", wrapper)
    assert len(input_grads) == 3, wrapper
    hidden = [re.search(rf"{name} = {name}\.contiguous\((.*)\)", wrapper).group(1)
              for name in input_grads if name not in returned]
    assert len(hidden) == 2 and all(layout == "memory_format=torch.channels_last" for layout in hidden), hidden
    # the saved tensors arrive as the forward laid them out: no check of their layout per call
    assert "channels_last_copy" not in wrapper, wrapper
    assert not [shape for shape in copies.shapes if shape[:1] == (5,) and shape != tuple(x.shape)], copies.shapes
    x_eager = x.detach().clone().requires_grad_()
    eager(x_eager).square().sum().backward()
    torch.testing.assert_close(x.grad, x_eager.grad, rtol=1e-4, atol=1e-4)
    assert x.grad.stride() == x_eager.grad.stride()


def test_trained_weights_are_copied_by_a_kernel_frozen_ones_kept() -> None:
    """A training step's forward copies each trained weight channels-last in a kernel of its own,
    every step (it changes every step: a copy kept until it changes would be made again anyway, by
    torch's slower strided copy), and its backward copies the weight's gradient back row-major in
    a kernel; a frozen weight's copy is kept across calls, as in inference. Either way the
    gradients and the updated weights equal eager's."""
    # (the first layer computes the first convolution's input: a convolution of the row-major input
    # itself stays row-major, see the next test)
    net = nn.Sequential(nn.Hardtanh(), nn.Conv2d(3, 8, 3), nn.ReLU(), nn.Conv2d(8, 4, 3), nn.Conv2d(4, 4, 3, groups=4))
    net[1].weight.requires_grad_(False)
    eager = copy.deepcopy(net)
    compiled = minicompiler.compile(net, options={"layout_optimization": True})
    for model in (net, eager):
        model.optimizer = torch.optim.SGD([p for p in model.parameters() if p.requires_grad], lr=0.1)
    for _ in range(3):  # the weights change between calls
        x = torch.randn(2, 3, 10, 10)
        for model, run in ((net, compiled), (eager, eager)):
            model.optimizer.zero_grad()
            run(x).square().sum().backward()
            model.optimizer.step()
        for ours, theirs in zip(net.parameters(), eager.parameters(), strict=True):
            torch.testing.assert_close(ours, theirs, rtol=1e-4, atol=1e-4)
    graph = compiled.report.graphs[0]
    notes = graph.stage("layout (forward)").text
    assert "1_weight: converted to channels-last once" in notes
    assert "3_weight: copied channels-last by a kernel on every step" in notes
    # a depthwise weight, (4, 1, 3, 3), is the same memory either way: not copied at all
    assert "4_weight: converted to channels-last once" in notes
    forward = graph.stage("codegen (forward)").text
    assert forward.count("channels_last_copy(") == 1 and "kernel_clone" in forward
    # the trained weight's gradient comes out of cuDNN/oneDNN channels-last: the backward copies it
    # row-major in a kernel, so AccumulateGrad keeps it as it is instead of copying it again
    assert "copied row-major by a kernel" in graph.stage("layout (backward)").text
    loss = compiled(torch.randn(2, 3, 10, 10)).square().sum()
    net.optimizer.zero_grad()
    with CopiedShapes() as copies:
        loss.backward()
    assert net[3].weight.grad.is_contiguous() and tuple(net[3].weight.shape) not in copies.shapes, copies.shapes
    with torch.no_grad():  # inference keeps every copy
        compiled(torch.randn(2, 3, 10, 10))
    inference = compiled.report.graphs[-1].stage("layout").text
    assert "3_weight: converted to channels-last once" in inference


def test_a_convolution_of_the_callers_row_major_input_stays_row_major() -> None:
    """The first convolution of a batch of images as the caller passes them, row-major, runs
    row-major, as in eager: made channels-last, its input was converted inside every call (and
    again for its weight's gradient), and its weight copied in every training step. The kernel
    after it writes channels-last for the next convolution, which is laid out as before."""
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 6, 3, padding=1))
    eager = copy.deepcopy(net)
    compiled = minicompiler.compile(net, options={"layout_optimization": True})
    for _ in range(2):
        x = torch.randn(4, 3, 9, 11)
        out, expected = compiled(x), eager(x)
        torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
        assert out.stride() == expected.stride()
        out.square().sum().backward()
        expected.square().sum().backward()
    for ours, theirs in zip(net.parameters(), eager.parameters(), strict=True):
        torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-4, atol=1e-4)
        assert ours.grad.stride() == theirs.grad.stride()
    graph = compiled.report.graphs[0]
    forward, backward = graph.stage("layout (forward)").text, graph.stage("layout (backward)").text
    assert "0_weight" not in forward and "3_weight: copied channels-last by a kernel" in forward, forward
    # of the two convolutions' outputs, only the second's is channels-last
    assert len(re.findall(r"^torch_call\w*: channels-last, as torch lays it out", forward, re.M)) == 1, forward
    assert backward.count("copied row-major by a kernel") == 1, backward  # the second convolution's only


def test_a_replayed_program_converts_the_callers_input_too() -> None:
    """Replayed from a CUDA graph (reduce-overhead), launches cost no host time: the first
    convolution runs channels-last like the others, its weight copied by a kernel, and its input
    copied channels-last by a kernel too (else the library converts it, in the forward and again
    for the weight's gradient). The forward saves the copy: the backward reads it channels-last."""
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.Conv2d(8, 6, 3, padding=1))
    eager = copy.deepcopy(net)
    compiled = minicompiler.compile(net, options={"triton.cudagraphs": True, "layout_optimization": True})
    x = torch.randn(4, 3, 9, 11)
    out, expected = compiled(x), eager(x)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
    out.square().sum().backward()
    expected.square().sum().backward()
    for ours, theirs in zip(net.parameters(), eager.parameters(), strict=True):
        torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-4, atol=1e-4)
    graph = compiled.report.graphs[0]
    forward = graph.stage("layout (forward)").text
    assert "0_weight: copied channels-last by a kernel" in forward, forward
    assert len(re.findall(r"^torch_call\w*: channels-last, as torch lays it out", forward, re.M)) == 2, forward
    assert "input: copied channels-last by a kernel, for the convolutions that read it" in forward, forward
    saved = graph.stage("codegen (forward)").text.split("# ---- wrapper ----")[1].split("return (")[1]
    assert re.search(r"\bclone\w*", saved) and not re.search(r"\binput\b", saved), saved


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs CUDA")
def test_layout_optimization_on_by_default_on_cuda() -> None:
    check_optimized_layout("cuda", None)


def one_convolution_among_many_ops(x: torch.Tensor, weight: torch.Tensor) -> torch.Tensor:
    """A ViT's shape: one convolution (the patch embedding), then hundreds of other ops."""
    y = torch.nn.functional.conv2d(x, weight, stride=4)
    for _ in range(110):  # each step shrinks a difference (x 1.5 magnified TF32's by 1.5^110)
        y = torch.relu(y * 0.99 + 0.01)
    return y


def _captured(fn, *args):  # noqa: ANN001, ANN202 - a test helper
    from minicompiler.capture import capture

    return capture(fn, args, {}).graph


def test_layout_optimization_is_worth_it_only_with_enough_convolutions() -> None:
    """TorchInductor's rule of thumb: fewer than one convolution per 300 nodes, no conversion."""
    from minicompiler.layout import NODES_PER_CONVOLUTION, too_few_convolutions, worth_channels_last

    x, weight = torch.randn(2, 3, 16, 16), torch.randn(8, 3, 4, 4)
    vit_like = _captured(one_convolution_among_many_ops, x, weight)
    assert len(vit_like.nodes) >= NODES_PER_CONVOLUTION and not worth_channels_last(vit_like)
    assert "layout optimization skipped: 1 convolution(s)" in too_few_convolutions(vit_like)[0]
    cnn = _captured(row_major_net("cpu").eval(), torch.randn(2, 3, 9, 11))
    assert worth_channels_last(cnn) and too_few_convolutions(cnn) == []
    no_convolution = _captured(lambda x: x.sin(), x)
    assert not worth_channels_last(no_convolution) and too_few_convolutions(no_convolution) == []


@pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU")
def test_one_convolution_among_many_ops_stays_row_major_on_cuda() -> None:
    x, weight = torch.randn(2, 3, 16, 16, device="cuda"), torch.randn(8, 3, 4, 4, device="cuda")
    compiled = minicompiler.compile(one_convolution_among_many_ops)
    # 220 float32 roundings per element in eager, fewer in one kernel (fused multiply-adds): ~1e-5 apart
    expected = one_convolution_among_many_ops(x, weight)
    torch.testing.assert_close(compiled(x, weight), expected, rtol=1e-4, atol=1e-5)
    graph = compiled.report.graphs[0]
    assert "layout optimization skipped" in graph.stage("layout").text
    assert "channels_last_copy(" not in graph.stage("codegen").text


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_pointwise_kernels_walk_channels_last_memory_in_order(backend: str) -> None:
    """A kernel writing a channels-last tensor walks it in memory order: element i of the loop is
    stored at offset i (neighbouring threads, neighbouring addresses), and a row-major operand is
    the one read through strides. Walked in (N, C, H, W) order both would be strided (uncoalesced
    on a GPU)."""
    if backend == "triton" and not os.environ.get("TRITON_INTERPRET"):
        pytest.skip("Triton on CPU tensors needs TRITON_INTERPRET=1")
    fn = lambda x, y: torch.relu(x) * 2 + y  # noqa: E731
    x = torch.randn(2, 8, 5, 7).to(memory_format=torch.channels_last)
    y = torch.randn(8, 5, 7)  # broadcast, row-major
    compiled = minicompiler.compile(fn, backend=backend)
    out, expected = compiled(x, y), fn(x, y)
    torch.testing.assert_close(out, expected)
    assert out.stride() == expected.stride() == x.stride()
    [kernel] = compiled.report.graphs[0].kernels
    store = next(line for line in kernel.code.splitlines() if "out_" in line and ("store" in line or "] =" in line))
    assert "//" not in store and "/ " not in store, store  # the loop index itself: no index arithmetic
    load_y = next(line for line in kernel.code.splitlines() if "in_y" in line and ("load" in line or "in_y[" in line))
    assert "%" in load_y, load_y  # y, row-major, is the operand read out of order


@pytest.mark.parametrize("backend", ["cpp", "triton"])
def test_a_max_pool_before_a_convolution_writes_channels_last_windows_in_memory_order(backend: str) -> None:
    """Under the layout optimization a max pool (the maximum over each window: a reduction) that a
    convolution reads is written channels-last, and its windows are walked channel by channel:
    neighbouring rows read and write neighbouring addresses of channels-last tensors. Row-major
    rows read them C elements apart (the stem's pool of a ResNet-18 training step: 0.31 ms on the
    H100, against torch.compile's 0.09)."""
    if backend == "triton" and not os.environ.get("TRITON_INTERPRET"):
        pytest.skip("Triton on CPU tensors needs TRITON_INTERPRET=1")
    torch.manual_seed(0)
    fn = lambda x, w: torch.conv2d(torch.max_pool2d(torch.relu(x), 3, 2, 1), w, padding=1)  # noqa: E731
    x = torch.randn(2, 8, 16, 16).to(memory_format=torch.channels_last)
    w = torch.randn(4, 8, 3, 3)
    compiled = minicompiler.compile(fn, backend=backend, options={"layout_optimization": True})
    torch.testing.assert_close(compiled(x, w), fn(x, w), rtol=1e-4, atol=1e-4)
    graph = compiled.report.graphs[0]
    assert re.search(r"amax\w*: channels-last, as the convolution reading it runs", graph.stage("layout").text)
    pool = next(k for k in graph.kernels if k.kind == "reduction")
    store = next(line for line in pool.code.splitlines() if "out_amax" in line and ("store" in line or "] =" in line))
    assert not any(op in store for op in ("//", "%", "*")), store  # row i is stored at offset i: in memory order


def test_a_training_max_pool_with_indices_before_a_convolution_gets_gradients_as_eager() -> None:
    """The training stem of a ResNet (conv, batch norm, ReLU, max pool, conv): the pool writes its
    maximum channels-last, and the argmax it keeps for the backward in the same order (one kernel
    stores both, row by row); every gradient equals eager's."""
    torch.manual_seed(0)
    model = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(), nn.MaxPool2d(3, 2, 1),
                          nn.Conv2d(8, 8, 3, padding=1))
    reference = copy.deepcopy(model)
    compiled = minicompiler.compile(model, options={"layout_optimization": True})
    x = torch.randn(2, 3, 16, 16)
    compiled(x).square().sum().backward()
    reference(x).square().sum().backward()
    for got, expected in zip(model.parameters(), reference.parameters(), strict=True):
        torch.testing.assert_close(got.grad, expected.grad, rtol=1e-4, atol=1e-4)
    layout = next(s for g in compiled.report.graphs for s in g.stages if s.name == "layout (forward)")
    pool = re.search(r"argmax\w*: channels-last, as (\w+) over the same windows", layout.text)
    assert pool and f"\n{pool[1]}: channels-last, as the convolution reading it runs" in layout.text, layout.text


@pytest.mark.parametrize("training", [False, True], ids=["eval", "train"])
def test_triton_adds_a_convolutions_bias_in_the_kernel_after_it(training: bool) -> None:
    """Triton: conv(x, w, b) is conv(x, w, None) + b, the add fused into the ReLU's kernel (cuDNN
    would add b in a pass of its own); eval folds the batch norm into that bias first. Results and
    gradients equal eager's. C++ keeps the bias in the call (oneDNN adds it for free)."""
    if not os.environ.get("TRITON_INTERPRET"):
        pytest.skip("Triton on CPU tensors needs TRITON_INTERPRET=1")
    # (on a GPU, cuDNN's TF32 convolutions round differently in eager's and the compiled layouts:
    # weight gradients 3e-3 apart on the H100; float32 ones agree to 1e-4)
    with torch.backends.cudnn.flags(allow_tf32=False):
        check_conv_bias_in_the_next_kernel(training)


def check_conv_bias_in_the_next_kernel(training: bool) -> None:
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU(),
                        nn.Conv2d(8, 4, 3, bias=True), nn.ReLU()).train(training)
    eager = copy.deepcopy(net)
    compiled = minicompiler.compile(net, backend="triton")
    x = torch.randn(2, 3, 9, 11)
    with torch.set_grad_enabled(training):
        out, expected = compiled(x), eager(x)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
    graph = compiled.report.graphs[0]
    notes = graph.stage("conv bias").notes
    assert len(notes) == 2, notes  # the second convolution's bias, and the first's (in eval, the folded one)
    convolutions = [line for line in graph.stage("conv bias").text.splitlines() if "torch_call(torch._Var" in line]
    assert len(convolutions) == 2 and all(", None, (" in line for line in convolutions), convolutions
    if training:
        out.square().sum().backward()
        expected.square().sum().backward()
        for ours, theirs in zip(net.parameters(), eager.parameters(), strict=True):
            torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-4, atol=1e-4)
    cpp = minicompiler.compile(copy.deepcopy(net).cpu(), backend="cpp")
    with torch.no_grad():
        cpp(x.cpu())
    assert not any(s.name == "conv bias" for s in cpp.report.graphs[0].stages)


def test_reduce_overhead_on_triton_keeps_batch_norm_as_an_affine_map() -> None:
    """Under CUDA graphs (Triton, reduce-overhead) a folded conv+bn weight would be folded again at
    every replay: the eval batch norm is (x - mean) * scale + beta in the kernel after the
    convolution instead, equal to eager's; other modes keep the fold."""
    if not os.environ.get("TRITON_INTERPRET"):
        pytest.skip("Triton on CPU tensors needs TRITON_INTERPRET=1")
    net = nn.Sequential(nn.Conv2d(3, 8, 3, padding=1), nn.BatchNorm2d(8), nn.ReLU()).eval()
    with torch.no_grad():  # running statistics of a trained net, not 0 and 1
        net[1].running_mean.uniform_(-1, 1), net[1].running_var.uniform_(0.5, 2)
    x = torch.randn(2, 3, 9, 11)
    for mode, step in (("reduce-overhead", "batch norm"), ("default", "fold conv+bn")):
        compiled = minicompiler.compile(copy.deepcopy(net), backend="triton", mode=mode)
        with torch.no_grad():
            torch.testing.assert_close(compiled(x), net(x), rtol=1e-4, atol=1e-4)
        steps = [s.name for s in compiled.report.graphs[0].stages]
        assert step in steps and not {"batch norm", "fold conv+bn"} - {step} & set(steps), steps


def test_a_formula_of_coordinates_takes_the_layout_of_what_it_masks() -> None:
    """A max pool's gradient masks the output gradient with window arithmetic computed from
    coordinates (iota), full-size in the graph but never in memory. Taken as a row-major tensor it
    outvoted the channels-last gradient beside it, and the kernel writing the masked gradient read
    that gradient H*W elements apart between neighbouring threads; it no longer counts."""
    from minicompiler.ir import Graph, TensorMeta
    from minicompiler.layout import assign_layouts

    g = Graph()
    shape = (2, 8, 4, 4)
    grad = g.placeholder("grad", TensorMeta(shape, torch.float32, strides=(128, 1, 32, 8)))
    rows = g.call("add", g.call("iota", (1, 1, 4, 1), 2, torch.int64), g.call("full", shape, 0, torch.int64))
    masked = g.call("where", g.call("ge", g.call("mul", rows, 2), 3), grad, 0.0)
    g.output(g.call("mul", masked, 2.0))
    notes = assign_layouts(g)
    assert f"{masked.name}: channels-last, as torch lays it out" in notes, notes
    assert masked.meta.strides == (128, 1, 32, 8)
