"""Reductions with few long rows run in two steps on Triton (fuse/split_reductions.py), and an
outer reduction (rows side by side in memory) walks its rows in memory order. Every result is
checked against eager on fresh random inputs, through the Triton interpreter on the CPU."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import minicompiler
from minicompiler.fuse import Kernel, fuse
from minicompiler.fuse import split_reductions as splitting
from minicompiler.fuse.split_reductions import _first_step_dims, split_reductions
from minicompiler.ir import Graph, TensorMeta
from minicompiler.layout import channels_last_strides

# Triton kernels run here through the interpreter; on a GPU machine under -p tests.triton_on_gpu, on the GPU
needs_triton = pytest.mark.triton_on_cpu_tensors


def reduction(shape: tuple[int, ...], dims: tuple[int, ...], op: str = "sum",
              dtype: torch.dtype = torch.float32, strides: tuple[int, ...] | None = None) -> tuple[Graph, object]:
    g = Graph()
    x = g.placeholder("x", TensorMeta(shape, dtype, strides=strides))
    node = g.call(op, x, dims, False)
    g.output(node)
    return g, node


@pytest.fixture
def small_inputs_split(monkeypatch):
    """Inputs of any size split: the tests of the split itself run on inputs small enough for the
    Triton interpreter."""
    monkeypatch.setattr(splitting, "WHOLE_INPUT", 0)


def test_a_batch_norms_sums_split_after_their_last_dim():
    """ResNet-18's first batch norm: 64 rows of 200,704; the first step keeps 114,688 rows."""
    assert _first_step_dims(reduction((16, 64, 112, 112), (0, 2, 3))[1]) == (3,)
    assert _first_step_dims(reduction((16, 64, 112, 112), (0, 2, 3), "amax")[1]) == (3,)


@pytest.mark.parametrize(("shape", "dims", "dtype", "why"), [
    ((1, 64, 56, 56), (0, 2, 3), torch.float32, "200,704 elements: one kernel sums and normalizes"),
    ((16, 512, 7, 7), (0, 2, 3), torch.float32, "rows of 784: short"),
    ((4096, 1000), (1,), torch.float32, "4096 rows: enough programs"),
    ((16, 64, 112, 112), (0, 2, 3), torch.float16, "a float16 partial sum would round"),
    ((64, 200704), (1,), torch.float32, "one reduced dim: nothing to split along"),
])
def test_reductions_left_whole(shape, dims, dtype, why):
    assert _first_step_dims(reduction(shape, dims, dtype=dtype)[1]) == (), why


@pytest.mark.parametrize(("shape", "chunks"), [((1024, 768), 64), ((1024, 3072), 16), ((2, 512, 768), 64)])
def test_a_bias_gradients_column_sums_split_their_rows(shape, chunks):
    """A bias's gradient sums the rows of (B*S, H) (or of (B, S, H) over B and S): 768 columns
    were 12 programs of 64 columns."""
    g = Graph()
    x = g.placeholder("x", TensorMeta(shape, torch.float32))
    node = g.call("sum", x, tuple(range(len(shape) - 1)), False)
    g.output(node)
    [note] = split_reductions(g)
    partial = node.args[0]
    rows = math.prod(shape[:-1])
    assert partial.op == "sum" and partial.meta.shape == (chunks, shape[-1])
    assert partial.args[0].meta.shape == (chunks, rows // chunks, shape[-1])
    assert node.args[1:] == ((0,), False) and node.meta.shape == (shape[-1],)
    assert f"split into {chunks} chunks" in note


@pytest.mark.parametrize(("shape", "dims", "why"), [
    ((1024, 32768), (0,), "512 programs of 64 columns already"),
    ((100, 768), (0,), "rows of 100: short"),
    ((1031, 768), (0,), "1031 rows: no divisor gives chunks of 8 or more"),
    ((1024, 10), (0,), "10,240 elements: one kernel reads them in microseconds"),
    ((), (), "a 0-d tensor: nothing to reduce"),
])
def test_column_sums_left_whole(shape, dims, why):
    g, _ = reduction(shape, dims)
    assert split_reductions(g) == [], why


@pytest.mark.usefixtures("small_inputs_split")
def test_split_in_place_keeps_the_result_node():
    g, node = reduction((4, 8, 64, 72), (0, 2, 3))
    notes = split_reductions(g)
    partial = node.args[0]
    assert (partial.op, partial.args[1:], partial.meta.shape) == ("sum", ((3,), True), (4, 8, 64, 1))
    assert g.nodes.index(partial) < g.nodes.index(node) and g.output_nodes() == [node]
    assert notes == [f"{node.name}: reduced in two steps, first dims (3,) into [4, 8, 64, 1]"]


@pytest.mark.usefixtures("small_inputs_split")
def test_second_steps_of_one_first_kernel_share_a_kernel():
    """Three split reductions of x: their first steps share x (one kernel); their second steps
    each fold another partial result of that kernel, and join one kernel too."""
    g = Graph()
    x = g.placeholder("x", TensorMeta((4, 8, 64, 72), torch.float32))
    sums = [g.call("sum", x, (0, 2, 3), False), g.call("sum", g.call("mul", x, x), (0, 2, 3), False),
            g.call("amax", x, (0, 2, 3), False)]
    g.output(tuple(sums))
    assert len(split_reductions(g)) == 3
    kernels = [s for s in fuse(g).steps if isinstance(s, Kernel)]
    assert [len([n for n in k.nodes if n.op in ("sum", "amax")]) for k in kernels] == [3, 3]


def test_outer_reduction_walks_rows_in_memory_order():
    """Partial sums over W of a channels-last tensor: rows (n, c, h) walked in (n, h, c) order."""
    shape = (4, 8, 64, 72)
    g, _ = reduction(shape, (3,), strides=channels_last_strides(shape))
    [kernel] = fuse(g).steps
    assert kernel.outer_reduction and kernel.row_order == (0, 2, 1)
    row_major, _ = reduction(shape, (3,))
    [kernel] = fuse(row_major).steps
    assert not kernel.outer_reduction and kernel.row_order == (0, 1, 2)


def _batch_norm_training_report(channels_last: bool):
    """A batch norm and ReLU trained one step, compiled and eager: every result compared; the
    compiled graph's report."""
    net = nn.Sequential(nn.BatchNorm2d(8), nn.ReLU())
    eager = nn.Sequential(nn.BatchNorm2d(8), nn.ReLU())
    x = torch.randn(4, 8, 64, 72)
    if channels_last:
        x = x.contiguous(memory_format=torch.channels_last)
    x.requires_grad_()
    x_eager = x.detach().clone().requires_grad_()
    compiled = minicompiler.compile(net, backend="triton")
    out, expected = compiled(x), eager(x_eager)
    torch.testing.assert_close(out, expected, rtol=1e-4, atol=1e-4)
    assert out.stride() == expected.stride()
    grad = torch.randn_like(out)
    out.backward(grad)
    expected.backward(grad)
    torch.testing.assert_close(x.grad, x_eager.grad, rtol=1e-4, atol=1e-4)
    for ours, theirs in zip(net.parameters(), eager.parameters(), strict=True):
        torch.testing.assert_close(ours.grad, theirs.grad, rtol=1e-4, atol=1e-3)  # sums of 18,432 terms
    torch.testing.assert_close(net[0].running_var, eager[0].running_var)
    return compiled.report.graphs[0]


def _reduction_kernels(graph, step: str) -> int:
    return graph.stage(f"fuse ({step})").text.split("buffers:")[0].count(": reduction over")


@pytest.mark.usefixtures("small_inputs_split")
@needs_triton
@pytest.mark.parametrize("channels_last", [False, True], ids=["row-major", "channels-last"])
def test_batch_norm_training_with_split_sums_equals_eager(channels_last):
    graph = _batch_norm_training_report(channels_last)
    assert "reduced in two steps" in graph.stage("split reductions (forward)").text
    assert "each chunk about its own mean" in graph.stage("split reductions (forward)").text
    assert "reduced in two steps" in graph.stage("split reductions (backward)").text
    for step in ("forward", "backward"):  # the statistics in two kernels each way, then the pointwise rest
        assert _reduction_kernels(graph, step) == 2, step


@needs_triton
@pytest.mark.parametrize("channels_last", [False, True], ids=["row-major", "channels-last"])
def test_small_batch_norm_training_is_one_kernel_each_way(channels_last):
    """147,456 elements: whole, the statistics and the normalization (and ReLU) are one kernel, and
    the backward's sums and the input's gradient another: no partial sums stored, fewer launches."""
    graph = _batch_norm_training_report(channels_last)
    assert not any(stage.name.startswith("split reductions") for stage in graph.stages)
    for step in ("forward", "backward"):
        kernels = graph.stage(f"fuse ({step})").text.split("buffers:")[0]
        # (the forward's other kernel counts the batches: num_batches_tracked += 1)
        assert kernels.count(": reduction over") == 1 and "pointwise over [4, 8, 64, 72]" not in kernels, step


@pytest.mark.usefixtures("small_inputs_split")
@needs_triton
@pytest.mark.parametrize("offset", [0.0, 1e3])
def test_variance_by_chunks_equals_float64(offset):
    """Each chunk's squares summed about its own mean, then the chunks combined: within float32's
    reach of float64's answer also far from zero (mean 1000, variance 0.25: x - mean keeps ~10 of
    float32's 24 bits), where E[x^2] - E[x]^2 would be off by about the variance itself."""
    x = torch.randn(4, 8, 64, 72) * 0.5 + offset
    x[0, :, 0, 0] += 20  # an outlier in each channel
    compiled = minicompiler.compile(lambda t: torch.var_mean(t, (0, 2, 3), correction=0), backend="triton")
    (var, mean), (var64, mean64) = compiled(x), torch.var_mean(x.double(), (0, 2, 3), correction=0)
    torch.testing.assert_close(var.double(), var64, rtol=1e-4, atol=0)
    torch.testing.assert_close(mean.double(), mean64, rtol=1e-6, atol=1e-6 * (1 + offset))
    assert "each chunk about its own mean" in compiled.report.graphs[0].stage("split reductions").text


@pytest.mark.usefixtures("small_inputs_split")
@needs_triton
@pytest.mark.parametrize("op", ["sum", "amax", "amin"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.int64])
def test_split_reductions_equal_eager(op, dtype):
    x = (torch.randn(4, 8, 64, 72) * 100).to(dtype).contiguous(memory_format=torch.channels_last)
    fn = getattr(torch, op)
    compiled = minicompiler.compile(lambda t: fn(t, (0, 2, 3)), backend="triton")
    result = compiled(x)
    # a float32 sum of 18,432 values of ~100, in another order than torch's: a channel summing to
    # ~200 came out 4e-3 away (1 draw in ~30 failed atol=1e-3); its partial sums reach ~1e4, whose
    # rounding steps are ~1e-3 each
    torch.testing.assert_close(result, fn(x, (0, 2, 3)), rtol=1e-5, atol=5e-2)
    assert "reduced in two steps" in compiled.report.graphs[0].stage("split reductions").text


@needs_triton
@pytest.mark.parametrize(("activation", "shape", "split", "op"), [
    (F.gelu, (4, 512, 64), "[256, 8, 96]", "erf"),  # the gradient reshaped to 2-d before its sum
    (F.relu, (1024, 64), "[128, 8, 96]", "where"),
], ids=["gelu-3d", "relu-2d"])
def test_linear_layer_gradients_with_split_column_sums_equal_eager(activation, shape, split, op):
    """A Linear layer's bias gradient, a column sum of the activation's gradient, in two steps: the
    kernel computing the activation's gradient computes it in the first step's shape, and sums it."""
    layer, eager = nn.Linear(64, 96), nn.Linear(64, 96)
    eager.load_state_dict(layer.state_dict())
    compiled = minicompiler.compile(lambda t: activation(layer(t)), backend="triton")
    x = torch.randn(*shape)
    grad = torch.randn(*shape[:-1], 96)
    compiled(x).backward(grad)
    activation(eager(x)).backward(grad)
    torch.testing.assert_close(layer.bias.grad, eager.bias.grad, rtol=1e-4, atol=1e-4)
    torch.testing.assert_close(layer.weight.grad, eager.weight.grad, rtol=1e-4, atol=1e-4)
    graph = compiled.report.graphs[0]
    assert "chunks, reduced in two steps" in graph.stage("split reductions (backward)").text
    kernels = [line for line in graph.stage("fuse (backward)").text.splitlines() if line.startswith("  kernel")]
    assert any(f" {op}" in line and f"reduction over {split}" in line for line in kernels), kernels


def test_cpp_backend_does_not_split():
    compiled = minicompiler.compile(lambda t: t.sum((0, 2, 3)), backend="cpp")
    x = torch.randn(4, 8, 64, 72).contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(compiled(x), x.sum((0, 2, 3)), rtol=1e-5, atol=1e-3)
    assert not any(s.name.startswith("split") for s in compiled.report.graphs[0].stages)


def test_row_order_of_symbolic_sizes_adds_no_size_guard():
    """Deciding a reduction's row order compares sizes: never symbolic ones (a comparison of s0 with
    64 would guard s0 != 64, and a later call with 64 rows would compile again)."""
    model = nn.Sequential(nn.Linear(64, 64), nn.LayerNorm(64))
    compiled = minicompiler.compile(model, dynamic=True)
    with torch.no_grad():
        for rows in (32, 64, 128):
            x = torch.randn(16, rows, 64)
            torch.testing.assert_close(compiled(x), model(x), rtol=1e-5, atol=1e-5)
    guards = [line for line in compiled.report.dynamic if line.startswith("size guard")]
    assert guards == ["size guard: s2 == 64"] and len(compiled.reports) == 1
