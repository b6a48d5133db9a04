"""Random pointwise/reduction DAGs: whatever fuse groups, the generated code must agree."""

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from minicompiler.codegen import generate
from minicompiler.fuse import fuse
from minicompiler.ir import Graph, TensorMeta, run_graph

UNARY = ["cos", "sin", "tanh", "abs", "neg", "erf"]
BINARY = ["add", "sub", "mul", "maximum", "minimum"]
SHAPES = [(6, 5), (5,), (6, 1)]


@st.composite
def programs(draw):
    """A list of (op, operand indices, extra) steps over two inputs."""
    steps = []
    for i in range(draw(st.integers(1, 8))):
        available = 2 + i
        kind = draw(st.sampled_from(["unary", "binary", "where", "sum"]))
        pick = st.integers(0, available - 1)
        if kind == "unary":
            steps.append((draw(st.sampled_from(UNARY)), [draw(pick)]))
        elif kind == "binary":
            steps.append((draw(st.sampled_from(BINARY)), [draw(pick), draw(pick)]))
        elif kind == "where":
            steps.append(("where", [draw(pick), draw(pick), draw(pick)]))
        else:
            steps.append(("sum", [draw(pick)]))
    return steps, draw(st.sampled_from(SHAPES)), draw(st.sampled_from(SHAPES))


def build(steps, shape_a, shape_b):
    g = Graph()
    a = g.placeholder("a", TensorMeta(shape_a, torch.float32))
    values = [a, g.placeholder("b", TensorMeta(shape_b, torch.float32))]
    for op, operands in steps:
        args = [values[i] for i in operands]
        if op == "where":
            values.append(g.call("where", g.call("gt", args[0], args[1]), args[1], args[2]))
        elif op == "sum":
            last = (args[0].meta.ndim - 1,)
            values.append(g.call("sum", args[0], last, True) if args[0].meta.ndim else args[0])
        else:
            values.append(g.call(op, *args))
    g.output(tuple(values[2:]))
    return g


@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), st.sampled_from(["cpp", "triton"]))
def test_random_programs_match_the_interpreter(program, backend):
    steps, shape_a, shape_b = program
    g = build(steps, shape_a, shape_b)
    inputs = [torch.randn(shape_a), torch.randn(shape_b)]
    got, expected = generate(fuse(g), backend)(inputs), run_graph(g, *inputs)
    for a, e in zip(got, expected, strict=True):
        torch.testing.assert_close(a, e, rtol=1e-4, atol=1e-4)
