"""Property: for random chains of torch-level ops on random broadcastable shapes,
decompose -> simplify gives the same results as the torch-level graph."""

from __future__ import annotations

from collections.abc import Callable

import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from minicompiler.decompose import decompose
from minicompiler.ir import Graph, Node, TensorMeta, run_graph, verify
from minicompiler.simplify import simplify

Step = Callable[[Graph, Node, Node, int], Node]  # (graph, current value, other input, a dim)


def _layer_norm(g: Graph, h: Node, y: Node, d: int) -> Node:
    return g.call("layer_norm", h, h.meta.shape[-1:]) if h.meta.ndim else g.call("neg", h)


STEPS: dict[str, Step] = {
    # activations and other composites
    "sigmoid": lambda g, h, y, d: g.call("sigmoid", h),
    "relu": lambda g, h, y, d: g.call("relu", h),
    "gelu": lambda g, h, y, d: g.call("gelu", h),
    "gelu_tanh": lambda g, h, y, d: g.call("gelu", h, approximate="tanh"),
    "silu": lambda g, h, y, d: g.call("silu", h),
    "softplus": lambda g, h, y, d: g.call("softplus", h),
    "leaky_relu": lambda g, h, y, d: g.call("leaky_relu", h, 0.1),
    "hardtanh": lambda g, h, y, d: g.call("hardtanh", h),
    "clamp": lambda g, h, y, d: g.call("clamp", h, min=-0.5),
    "square": lambda g, h, y, d: g.call("square", h),
    "addcmul": lambda g, h, y, d: g.call("addcmul", h, y, h, value=0.5),
    "lerp": lambda g, h, y, d: g.call("lerp", h, y, 0.3),
    # with the other input, broadcasting
    "add": lambda g, h, y, d: g.call("add", h, y),
    "mul": lambda g, h, y, d: g.call("mul", y, h),
    "maximum": lambda g, h, y, d: g.call("maximum", h, y),
    # reductions and normalisations
    "softmax": lambda g, h, y, d: g.call("softmax", h, d),
    "log_softmax": lambda g, h, y, d: g.call("log_softmax", h, d),
    "mean": lambda g, h, y, d: g.call("mean", h, d, True),
    "layer_norm": _layer_norm,
    # things simplify should take away
    "times_one": lambda g, h, y, d: g.call("mul", h, 1),
    "plus_zero": lambda g, h, y, d: g.call("add", 0, h),
    "neg_neg": lambda g, h, y, d: g.call("neg", g.call("neg", h)),
    "pow_2": lambda g, h, y, d: g.call("pow", h, 2),
    "half": lambda g, h, y, d: g.call("div", h, 2),
    "exp_log": lambda g, h, y, d: g.call("exp", g.call("log", g.call("sigmoid", h))),
    "repeat": lambda g, h, y, d: g.call("add", g.call("tanh", h), g.call("tanh", h)),
}
TOLERANCE = {torch.float32: 1e-4, torch.float64: 1e-9}


@st.composite
def broadcastable_shapes(draw: st.DrawFn) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """A shape, and a second shape that broadcasts to it (fewer dims, some of size 1)."""
    shape = tuple(draw(st.lists(st.integers(1, 5), max_size=3)))
    kept = shape[draw(st.integers(0, len(shape))) :]
    other = tuple(1 if draw(st.booleans()) else size for size in kept)
    return shape, other


@settings(max_examples=60, deadline=None)
@given(
    shapes=broadcastable_shapes(),
    chain=st.lists(st.tuples(st.sampled_from(sorted(STEPS)), st.integers(-3, 2)), min_size=1, max_size=5),
    dtype=st.sampled_from([torch.float32, torch.float64]),
)
def test_decompose_then_simplify_matches_torch_level_graph(shapes, chain, dtype) -> None:
    shape, other_shape = shapes
    g = Graph()
    x = g.placeholder("x", TensorMeta(shape, dtype))
    y = g.placeholder("y", TensorMeta(other_shape, dtype))
    h = x
    for name, dim in chain:
        h = STEPS[name](g, h, y, dim % max(h.meta.ndim, 1))
    g.output(h)

    result = simplify(decompose(g))
    verify(result, primitive_only=True)
    inputs = (torch.randn(shape, dtype=dtype), torch.randn(other_shape, dtype=dtype))
    expected, tol = run_graph(g, *inputs), TOLERANCE[dtype]
    torch.testing.assert_close(run_graph(result, *inputs), expected, rtol=tol, atol=tol, equal_nan=True)
