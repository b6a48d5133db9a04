"""Reductions and fused reduction kernels (softmax, layer_norm) through both backends."""

import math

import pytest
import torch
import torch.nn.functional as F

from minicompiler.codegen import generate
from minicompiler.fuse import fuse
from minicompiler.ir import Graph, TensorMeta

CASES = [  # (shape, dims, keepdim)
    ((5, 37), (1,), True),
    ((5, 37), (0,), False),  # leading dim: rows are strided
    ((4, 3, 6), (0, 2), True),  # two dims, not adjacent
    ((4, 3, 5, 6), (0, 2, 3), True),  # BatchNorm's statistics: N, then the run H, W
    ((4, 3, 6), (), False),  # () means every dim: a 0-d result
    ((), (), False),
    ((1,), (0,), True),
    ((2, 5000), (1,), True),  # longer than one block: swept in chunks
    ((3, 0), (1,), True),  # empty rows: the sum is 0
]


@pytest.mark.parametrize("op", ["sum", "amax", "amin"])
@pytest.mark.parametrize("shape, dims, keepdim", CASES)
def test_reduction(op, shape, dims, keepdim, backend, check):
    if op != "sum" and 0 in shape:
        pytest.skip("amax/amin of nothing is an error in torch")
    x = torch.randn(shape)
    if op != "sum" and x.numel() > 3:
        x.view(-1)[2] = math.nan  # amax/amin propagate NaN
    check(lambda g, x: g.call(op, g.call("cos", x), dims, keepdim), x, backend=backend, tolerance=1e-4)


def test_batch_norm_statistics_of_a_channels_last_input(backend, check):
    """Reduced dims split into an outer and an inner loop: every buffer's index must follow it,
    whatever its layout (here channels-last, so H, W are not contiguous in memory)."""
    x = torch.randn(4, 5, 6, 3).permute(0, 3, 1, 2)  # logical (4, 3, 5, 6), channels last in memory
    w = torch.randn(1, 3, 1, 1)

    def fn(g, x, w):
        centred = g.call("sub", x, g.call("sum", x, (0, 2, 3), True))
        return g.call("mul", centred, w), g.call("sum", g.call("mul", centred, centred), (0, 2, 3), False)

    check(fn, x, w, backend=backend, tolerance=1e-4)


@pytest.mark.parametrize("dynamic", [False, True])
def test_a_reduction_over_neighbouring_dims_of_broadcast_operands(backend, check, dynamic):
    """Seed 001's sum(a[:, :, None] * b[:, None, :], (-2, -1)): each operand is broadcast along
    one of the two reduced dims. The C++ kernel loops over them nested (so the inner loop reads
    b contiguously and a once per outer step) instead of taking one flat index apart with / and %."""
    a, b = torch.randn(5, 37), torch.randn(5, 23)

    def outer_sum(g, a, b):
        product = g.call("mul", g.call("reshape", a, (5, 37, 1)), g.call("reshape", b, (5, 1, 23)))
        return g.call("exp", g.call("sum", product, (1, 2), False))

    module = check(outer_sum, a, b, backend=backend, tolerance=1e-4, dynamic=dynamic)
    if backend == "cpp":
        [kernel] = [text for name, text in module.kernel_sources.items() if "sum" in name]
        assert "ri <" in kernel and "/" not in kernel.split("extern")[1]


def test_reduction_of_a_transposed_input(backend, check):
    x = torch.randn(37, 6).t()
    check(lambda g, x: (g.call("sum", x, (1,), False), g.call("amax", x, (0,), True)), x, backend=backend)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16, torch.int32, torch.bool])
def test_reduction_dtypes(dtype, backend, check):
    x = torch.randn(6, 70) if dtype.is_floating_point else torch.randint(-3, 4, (6, 70))
    x = x.to(dtype)
    ops = ["sum", "amax"] if dtype == torch.bool else ["sum", "amax", "amin"]
    check(lambda g, x: tuple(g.call(op, x, (1,), False) for op in ops), x, backend=backend, tolerance=2e-2)


def softmax(g, x, dim=1):
    exps = g.call("exp", g.call("sub", x, g.call("amax", x, (dim,), True)))
    return g.call("div", exps, g.call("sum", exps, (dim,), True))


def layer_norm(g, x, weight, bias, eps=1e-5):
    n = x.meta.shape[-1]
    dims = (x.meta.ndim - 1,)
    centered = g.call("sub", x, g.call("div", g.call("sum", x, dims, True), n))
    variance = g.call("div", g.call("sum", g.call("mul", centered, centered), dims, True), n)
    normed = g.call("mul", centered, g.call("rsqrt", g.call("add", variance, eps)))
    return g.call("add", g.call("mul", normed, weight), bias)


@pytest.mark.parametrize("shape", [(8, 100), (3, 5000), (1, 1)])
def test_softmax_is_one_kernel_and_matches_torch(shape, backend, check):
    x = torch.randn(shape) * 5
    module = check(softmax, x, backend=backend)
    assert len(module.schedule.kernels) == 1
    torch.testing.assert_close(module([x]), torch.softmax(x, 1))


def test_softmax_over_leading_dim_with_float16_io(backend, check):
    x = torch.randn(300, 7, dtype=torch.float16)
    check(lambda g, x: softmax(g, x, dim=0), x, backend=backend)


def test_layer_norm_is_one_kernel_and_matches_torch(backend, check):
    x, weight, bias = torch.randn(4, 6, 50), torch.randn(50), torch.randn(50)
    module = check(layer_norm, x, weight, bias, backend=backend, tolerance=1e-4)
    assert len(module.schedule.kernels) == 1
    expected = F.layer_norm(x, (50,), weight, bias)
    torch.testing.assert_close(module([x, weight, bias]), expected, rtol=1e-4, atol=1e-4)


def test_reduction_kernel_outputs_per_row_and_per_element_values(backend, check):
    """Row values (the statistics) and element values stored by the same kernel."""

    def fn(g, x):
        total = g.call("sum", x, (1,), True)
        mean = g.call("div", total, x.meta.shape[1])
        return g.call("sub", x, mean), mean, g.call("sum", g.call("mul", x, 2.0), (1,), False)

    module = check(fn, torch.randn(9, 33), backend=backend)
    assert len(module.schedule.kernels) == 1


def test_views_inside_a_kernel_are_the_values_they_rename(backend, check):
    """BatchNorm's statistics reshaped [C] -> [1, C, 1, 1], a detached mean, and a row value
    expanded over the domain (read by element values and by a second reduction): one kernel,
    and every value matches the interpreter."""

    def fn(g, x, weight):
        per_channel = (1, 3, 1, 1)
        mean = g.call("div", g.call("sum", x, (0, 2, 3), False), 4 * 5 * 6)
        centred = g.call("sub", x, g.call("reshape", mean, per_channel))
        var = g.call("sum", g.call("mul", centred, centred), (0, 2, 3), True)
        spread = g.call("expand", g.call("rsqrt", g.call("add", var, 1e-5)), (4, 3, 5, 6))
        y = g.call("mul", g.call("mul", centred, spread), g.call("reshape", weight, per_channel))
        running = g.call("mul", g.call("detach", mean), 0.1)
        return y, g.call("add", spread, 1.0), g.call("sum", g.call("mul", y, spread), (0, 2, 3), False), running

    module = check(fn, torch.randn(4, 3, 5, 6), torch.randn(3), backend=backend, tolerance=1e-4)
    assert len(module.schedule.kernels) == 1


def test_a_value_compared_with_its_own_maximum_is_stored_once(backend):
    """x == amax(x) for a computed x: every row has its maximum, whatever the last bit of cos.
    Recomputing cos in a second sweep (vectorized there, scalar in the first) could lose it."""
    g = Graph()
    # on the default device: the GPU under -p tests.triton_on_gpu
    x = g.placeholder("x", TensorMeta((64, 37), torch.float32, torch.get_default_device()))
    y = g.call("cos", g.call("mul", x, 3.0))
    g.output(g.call("eq", y, g.call("amax", y, (1,), True)))
    schedule = fuse(g)
    assert len(schedule.kernels) == 2
    assert any("recomputed per sweep" in d.reason for d in schedule.refusals)
    for _ in range(3):
        is_max = generate(schedule, backend)([torch.randn(64, 37)])
        assert is_max.any(dim=1).all()


def test_cpp_keeps_a_row_of_values_for_later_sweeps_when_it_fits(check):
    """LayerNorm after GELU: the C++ kernel computes erf once per element and later sweeps read
    the row back from a per-thread buffer; a row too long for the cache is recomputed per sweep.
    Both match torch."""

    def gelu_layer_norm(g, x):
        h = g.call("mul", g.call("mul", x, 0.5), g.call("add", g.call("erf", g.call("mul", x, 0.7071)), 1.0))
        centred = g.call("sub", h, g.call("div", g.call("sum", h, (1,), True), x.meta.shape[1]))
        var = g.call("div", g.call("sum", g.call("mul", centred, centred), (1,), True), x.meta.shape[1])
        return g.call("mul", centred, g.call("rsqrt", g.call("add", var, 1e-5)))

    for cols, sweeps_computing_erf in ((1000, 1), (1 << 20, 3)):  # 2 cached values * 4 MB > the limit
        module = check(gelu_layer_norm, torch.randn(2, cols), backend="cpp", tolerance=1e-4)
        [kernel] = module.kernel_sources.values()
        assert kernel.count("std::erf") == sweeps_computing_erf
        assert ("cache_" in kernel) == (sweeps_computing_erf == 1)
