"""Random pointwise/reduction DAGs: whatever fuse groups, the generated code must agree.

Inputs come in random broadcastable shapes and layouts (contiguous, transposed, sliced with
a step, expanded), and the code is generated with sizes baked in or as runtime arguments."""

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minicompiler.codegen import generate
from minicompiler.fuse import fuse
from minicompiler.ir import Graph, TensorMeta, run_graph

UNARY = ["cos", "sin", "tanh", "abs", "neg", "erf"]
BINARY = ["add", "sub", "mul", "maximum", "minimum"]
REDUCTIONS = ["sum", "amax"]
SHAPES = [(6, 5), (5,), (6, 1), (1, 5), (4, 6, 5)]
LAYOUTS = ["contiguous", "transposed", "sliced", "expanded"]


@st.composite
def programs(draw):
    """A list of (op, operand indices, extra) steps over two inputs."""
    steps = []
    for i in range(draw(st.integers(1, 8))):
        available = 2 + i
        kind = draw(st.sampled_from(["unary", "binary", "where", "reduce"]))
        pick = st.integers(0, available - 1)
        if kind == "unary":
            steps.append((draw(st.sampled_from(UNARY)), [draw(pick)], None))
        elif kind == "binary":
            steps.append((draw(st.sampled_from(BINARY)), [draw(pick), draw(pick)], None))
        elif kind == "where":
            steps.append(("where", [draw(pick), draw(pick), draw(pick)], None))
        else:  # which dim, counted from the end, and keepdim
            dim_and_keepdim = (draw(st.integers(1, 3)), draw(st.booleans()))
            steps.append((draw(st.sampled_from(REDUCTIONS)), [draw(pick)], dim_and_keepdim))
    inputs = [(draw(st.sampled_from(SHAPES)), draw(st.sampled_from(LAYOUTS))) for _ in range(2)]
    return steps, inputs


def make_input(shape, layout):
    """Fresh random values of `shape` in the memory layout `layout`."""
    if layout == "transposed" and len(shape) >= 2:
        return torch.randn(shape[::-1]).permute(*reversed(range(len(shape))))
    if layout == "sliced":
        return torch.randn(*shape[:-1], shape[-1] * 2 + 1)[..., 1::2] if shape else torch.randn(())
    if layout == "expanded":
        return torch.randn(shape[-1:]).expand(shape)
    return torch.randn(shape)


def broadcast(values):
    try:
        torch.broadcast_shapes(*[v.meta.shape for v in values])
        return True
    except RuntimeError:
        return False


def build(steps, metas):
    g = Graph()
    values = [g.placeholder(name, meta) for name, meta in zip("ab", metas, strict=True)]
    for op, operands, extra in steps:
        args = [values[i] for i in operands]
        if not broadcast(args):  # e.g. a [6] sum beside a [6, 5] input: negate the first instead
            values.append(g.call("neg", args[0]))
        elif op == "where":
            values.append(g.call("where", g.call("gt", args[0], args[1]), args[1], args[2]))
        elif op in REDUCTIONS:
            ndim = args[0].meta.ndim
            dim, keepdim = extra
            values.append(g.call(op, args[0], (ndim - min(dim, ndim),), keepdim) if ndim else args[0])
        else:
            values.append(g.call(op, *args))
    g.output(tuple(values[2:]))
    return g


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.sampled_from(["cpp", "triton"]), st.booleans())
def test_random_programs_match_the_interpreter(program, backend, dynamic):
    steps, layouts = program
    inputs = [make_input(shape, layout) for shape, layout in layouts]
    g = build(steps, [TensorMeta.of(t) for t in inputs])
    got, expected = generate(fuse(g), backend, dynamic=dynamic)(inputs), run_graph(g, *inputs)
    for a, e in zip(got, expected, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-4)
