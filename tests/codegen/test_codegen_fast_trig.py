"""The C++ backend's float32 sin/cos: vectorized polynomials, with an exact fallback per block."""

import math

import torch

from minicompiler.codegen import generate
from minicompiler.fuse import fuse
from minicompiler.ir import Graph, TensorMeta


def sin_cos_and_cos_cos(x_meta: TensorMeta):
    g = Graph()
    x = g.placeholder("x", x_meta)
    # the outer sin/cos of sin(x) and cos(x) take the short path for arguments in [-1, 1]
    g.output((g.call("sin", x), g.call("cos", x), g.call("cos", g.call("cos", x)), g.call("sin", g.call("sin", x))))
    return generate(fuse(g), "cpp")


def assert_close_to_float64(got: torch.Tensor, x: torch.Tensor, fn) -> None:
    """Within 4 float32 ulps of 1 of the float64 result: sin and cos lie in [-1, 1]."""
    expected = fn(x.double())
    torch.testing.assert_close(got.double(), expected, rtol=0, atol=4 * 2**-24, equal_nan=True)


def test_fast_sin_and_cos_across_their_range():
    near_multiples_of_half_pi = torch.arange(-80, 81) * (math.pi / 2)
    limit = 125.0
    x = torch.cat([
        torch.linspace(-130, 130, 300_001),  # the fast range, its edges and a little beyond
        near_multiples_of_half_pi, near_multiples_of_half_pi + 1e-6,
        torch.tensor([limit, -limit, math.nextafter(limit, 200), 0.0, -0.0, 1e-30]),
    ]).float()
    module = sin_cos_and_cos_cos(TensorMeta.of(x))
    assert "fast_sin(" in module.module_source and "std::sin(" in module.module_source
    assert "cos_of_unit(" in module.module_source and "sin_of_unit(" in module.module_source
    sin, cos, cos_cos, sin_sin = module([x])
    assert_close_to_float64(sin, x, torch.sin)
    assert_close_to_float64(cos, x, torch.cos)
    assert_close_to_float64(cos_cos, x, lambda v: torch.cos(torch.cos(v)))
    assert_close_to_float64(sin_sin, x, lambda v: torch.sin(torch.sin(v)))


def test_an_argument_out_of_range_makes_its_block_exact():
    """One value per block of 4096 beyond the fast range (each alone: a block is redone whole)."""
    beyond = [130.0, 54321.0, 1e6 + 0.5, 1e20, 3e30, 3e38, math.nan, math.inf, -math.inf]
    x = torch.randn(len(beyond) * 4096 + 17) * 3
    x[torch.arange(len(beyond)) * 4096 + 100] = torch.tensor(beyond)
    sin, cos, cos_cos, sin_sin = sin_cos_and_cos_cos(TensorMeta.of(x))([x])
    assert_close_to_float64(sin, x, torch.sin)
    assert_close_to_float64(cos, x, torch.cos)
    assert_close_to_float64(cos_cos, x, lambda v: torch.cos(torch.cos(v)))
    assert_close_to_float64(sin_sin, x, lambda v: torch.sin(torch.sin(v)))


def test_float16_and_bfloat16_use_the_float32_polynomials():
    for dtype in (torch.float16, torch.bfloat16):
        x = (torch.randn(5000) * 10).to(dtype)
        sin, cos, _, _ = sin_cos_and_cos_cos(TensorMeta.of(x))([x])
        torch.testing.assert_close(sin, torch.sin(x))
        torch.testing.assert_close(cos, torch.cos(x))
