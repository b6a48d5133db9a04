"""Random programs compiled with dynamic=True, called with several sizes: every result must
equal eager's, however many size guards, specializations and graph breaks there were.

Programs are written as Python source (so capture sees ordinary user code) over two inputs
whose shapes are built from two sizes a, b that change from call to call."""

from __future__ import annotations

import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import minicompiler

# How an input's shape is made from the call's sizes (a, b): broadcastable with each other.
SHAPES = {"ab": lambda a, b: (a, b), "b": lambda a, b: (b,), "a1": lambda a, b: (a, 1), "1b": lambda a, b: (1, b)}
UNARY = ["torch.cos({})", "torch.tanh({})", "({}).abs()", "torch.relu({})", "{} * n"]  # n = x.shape[-1]
BINARY = ["{} + {}", "{} * {}", "torch.maximum({}, {})", "{} - {}"]
# Expressions of one value that read its shape: reductions, means, slices, reshapes.
SHAPED = [
    "{0}.sum(-1, keepdim=True)", "{0}.mean(-1, keepdim=True)", "{0}.amax(0, keepdim=True)",
    "{0}.mean(0, keepdim=True)", "{0}.var(-1, keepdim=True)",
    "{0}.softmax(-1)", "{0}.reshape(-1).reshape({0}.shape)", "{0} * {0}.shape[-1] ** -0.5",
    "torch.cat([{0}[..., :1], {0}[..., 1:]], -1)", "{0} + {0}.flatten().sum()",
]


@st.composite
def programs(draw):
    """Python source of `def program(x, y)`: a few lines, each on earlier values."""
    names, lines = ["x", "y"], ["    n = x.shape[-1]"]
    for i in range(draw(st.integers(1, 6))):
        pick = st.sampled_from(names)
        kind = draw(st.sampled_from(["unary", "binary", "shaped", "shaped", "break"]))
        if kind == "break":  # a graph break: the values so far, n included, live across it
            lines.append('    print(end="")')
            continue
        if kind == "unary":
            expr = draw(st.sampled_from(UNARY)).format(draw(pick))
        elif kind == "binary":
            expr = draw(st.sampled_from(BINARY)).format(draw(pick), draw(pick))
        else:
            expr = draw(st.sampled_from(SHAPED)).format(draw(pick))
        lines.append(f"    v{i} = {expr}")
        names.append(f"v{i}")
    body = "\n".join(lines)
    source = f"def program(x, y):\n{body}\n    return {names[-1]}\n"
    shapes = (draw(st.sampled_from(sorted(SHAPES))), draw(st.sampled_from(sorted(SHAPES))))
    return source, shapes


def build(source: str):
    namespace = {"torch": torch}
    exec(compile(source, "<random program>", "exec"), namespace)  # noqa: S102 - the test's own generated code
    return namespace["program"]


SIZES = st.lists(st.tuples(st.integers(2, 9), st.integers(2, 9)), min_size=3, max_size=3)


def check(program, sizes, backend: str) -> None:
    source, (shape_x, shape_y) = program
    fn = build(source)
    compiled = minicompiler.compile(fn, backend=backend, dynamic=True)
    for a, b in sizes:
        x, y = torch.randn(SHAPES[shape_x](a, b)), torch.randn(SHAPES[shape_y](a, b))
        torch.testing.assert_close(compiled(x, y), fn(x, y), rtol=1e-4, atol=1e-4, equal_nan=True,
                                   msg=lambda m: f"{source}\n{m}")  # var over one element: NaN in both


@settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), SIZES)
def test_random_programs_with_symbolic_sizes_match_eager(program, sizes):
    check(program, sizes, "cpp")


@settings(max_examples=5, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(programs(), SIZES)
def test_random_programs_with_symbolic_sizes_match_eager_in_triton(program, sizes):
    check(program, sizes, "triton")  # through TRITON_INTERPRET=1 on the CPU
