"""Outer reductions in C++, many rows at once (codegen/cpp_tiled.py): column statistics of a
row-major matrix sweep LANES neighbouring columns together. Each case is compared with the
reference interpreter, and the kernel is checked to be the tiled one (or not, where a lane
could not keep what the reduction needs)."""

import math

import pytest
import torch

from minicompiler.codegen.cpp_tiled import LANES


def first_kernel(module) -> str:
    return next(iter(module.kernel_sources.values()))


def tiled(text: str) -> bool:
    return f"xb += {LANES}" in text


def normalize_columns(g, x):
    """numpy_fn's first step: (x - mean) / std per column, and the row sums of its square."""
    n = x.meta.shape[0]
    mean = g.call("mul", g.call("sum", x, (0,), True), 1 / n)
    centred = g.call("sub", x, mean)
    std = g.call("sqrt", g.call("mul", g.call("sum", g.call("mul", centred, centred), (0,), True), 1 / n))
    normal = g.call("div", centred, std)
    return normal, g.call("sum", g.call("mul", normal, normal), (1,), False)


@pytest.mark.parametrize("columns", [LANES, 3 * LANES + 5, 7])  # whole blocks, a part block, less than one
def test_column_statistics_sweep_the_lanes_together(columns, check):
    module = check(normalize_columns, torch.randn(70, columns, dtype=torch.float64), backend="cpp")
    assert tiled(first_kernel(module))
    name = next(iter(module.kernel_sources))  # the report says which kernels, for the course to show
    assert any(f"swept {LANES} rows at once" in note and name in note for note in module.notes), module.notes


@pytest.mark.parametrize("op", ["sum", "prod", "amax", "amin"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.float16, torch.bfloat16, torch.int32, torch.bool])
def test_every_lane_reduction_and_dtype(op, dtype, check):
    if dtype == torch.bool and op != "amax":
        pytest.skip("bool sums and products are integers in torch: another kernel")
    x = (torch.rand(9, 2 * LANES + 3) + 0.5) if op == "prod" else torch.randn(9, 2 * LANES + 3)
    x = x.to(dtype) if dtype.is_floating_point else torch.randint(-3, 4, x.shape).to(dtype)
    if dtype.is_floating_point and op in ("amax", "amin"):
        x[4, 1] = math.nan  # propagated in its column only
    module = check(lambda g, x: g.call(op, g.call("mul", x, x), (0,), False), x, backend="cpp", tolerance=2e-2)
    assert tiled(first_kernel(module))


def test_batch_norm_statistics_of_a_channels_last_input_are_tiled(check):
    """Channels in neighbouring addresses: the lanes are channels, the sweep an outer loop over
    N and an inner one over H, W."""
    x = torch.randn(4, 5, 6, 40).permute(0, 3, 1, 2)  # logical (4, 40, 5, 6), channels last

    def statistics(g, x):
        centred = g.call("sub", x, g.call("mul", g.call("sum", x, (0, 2, 3), True), 1 / 120))
        return centred, g.call("sum", g.call("mul", centred, centred), (0, 2, 3), False)

    module = check(statistics, x, backend="cpp", tolerance=1e-4)
    text = first_kernel(module)
    assert tiled(text) and "ri <" in text


def test_argmax_of_columns_keeps_its_row_by_row_loop(check):
    """argmax keeps a position beside each value: no lanes for it, and the result is eager's."""
    x = torch.randn(30, 50)
    x[7:12] = x[7]  # ties: the first of equal values wins
    module = check(lambda g, x: g.call("argmax", x, (0,), False), x, backend="cpp")
    assert not tiled(first_kernel(module))


def test_row_sums_of_a_row_major_matrix_are_not_tiled(check):
    module = check(lambda g, x: g.call("sum", x, (1,), False), torch.randn(40, 70), backend="cpp")
    assert not tiled(first_kernel(module))
