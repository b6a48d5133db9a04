"""Every pointwise primitive through both backends, on awkward layouts and dtypes."""

import math

import pytest
import torch

UNARY = [
    "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "erf", "log1p",
    "expm1", "reciprocal", "floor", "ceil", "trunc", "sign", "logical_not", "sigmoid",
]
BINARY = [
    "add", "sub", "mul", "div", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
    "logical_and", "logical_or", "remainder",
]
POSITIVE_ONLY = {"log", "sqrt", "rsqrt"}


def values(*shape, dtype=torch.float32, positive=False):
    """Fresh random values in +-[0.2, 1.4] (inside every unary op's comfortable domain)."""
    x = torch.rand(shape, dtype=torch.float64) * 1.2 + 0.2
    if not positive:
        x = x * (torch.randint(0, 2, shape) * 2 - 1)
    return x.to(dtype)


def awkward(dtype=torch.float32, positive=False):
    """Layouts a kernel must index correctly."""
    return [
        values(1030, dtype=dtype, positive=positive),  # not a multiple of any block size
        values(dtype=dtype, positive=positive),  # 0-d
        values(1, dtype=dtype, positive=positive),  # one element
        values(7, 33, dtype=dtype, positive=positive).t(),  # transposed
        values(9, 40, dtype=dtype, positive=positive)[1:8:2, 3:37],  # sliced: offset and steps
        values(5, 1, dtype=dtype, positive=positive).expand(5, 6),  # stride 0
    ]


@pytest.mark.parametrize("op", UNARY)
def test_unary_on_awkward_layouts(op, backend, check):
    inputs = awkward(positive=op in POSITIVE_ONLY)
    check(lambda g, *xs: tuple(g.call(op, x) for x in xs), *inputs, backend=backend)


def halves(*shape, dtype=torch.float32):
    """Multiples of 0.5 in [-2, 2]: ties for comparisons, zeros for 0/0, 0**-1, x % 0."""
    return (torch.randint(-4, 5, shape) * 0.5).to(dtype)


@pytest.mark.parametrize("op", BINARY)
def test_binary_with_broadcasting_and_scalars(op, backend, check):
    a, b = halves(5, 1, 7), halves(3, 1)  # broadcast to [5, 3, 7]
    at = halves(6, 4).t()

    def fn(g, x, y, xt):
        outs = [g.call(op, x, y), g.call(op, xt, xt)]
        if op not in ("logical_and", "logical_or"):  # torch takes no Python number there
            outs.append(g.call(op, x, 1.5))
        if op in ("add", "sub", "mul", "div", "pow", "maximum", "minimum", "remainder"):
            outs.append(g.call(op, 2.0, y))
        return tuple(outs)

    check(fn, a, b, at, backend=backend)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_every_unary_op_in_other_float_dtypes(dtype, backend, check):
    x, p = values(3, 45, dtype=dtype).t(), values(45, dtype=dtype, positive=True)
    ops = [op for op in UNARY if op not in POSITIVE_ONLY]
    check(lambda g, x, p: tuple(g.call(op, x) for op in ops) + tuple(g.call(op, p) for op in POSITIVE_ONLY),
          x, p, backend=backend)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16, torch.bfloat16])
def test_every_binary_op_in_other_float_dtypes(dtype, backend, check):
    a, b = values(4, 33, dtype=dtype), values(33, dtype=dtype)
    b = b.abs() if dtype != torch.float64 else b  # keep pow real-valued where rounding differs
    check(lambda g, x, y: tuple(g.call(op, x, y) for op in BINARY), a, b, backend=backend)


@pytest.mark.parametrize("dtype", [torch.int64, torch.int32, torch.int8, torch.uint8])
def test_integer_arithmetic(dtype, backend, check):
    low = 0 if dtype == torch.uint8 else -20
    a = torch.randint(low, 20, (6, 7)).to(dtype)
    b = torch.randint(1, 9, (7,)).to(dtype)  # no zero divisors: integer % 0 is an error in torch

    def fn(g, x, y):
        ops = ["add", "mul", "div", "remainder", "maximum", "minimum", "eq", "lt", "ge", "logical_and"]
        outs = [g.call(op, x, y) for op in ops]
        outs += [g.call(op, x) for op in ("abs", "sign", "floor", "logical_not")]
        if dtype != torch.uint8:
            outs += [g.call("neg", x), g.call("sub", x, y)]
        outs += [g.call("pow", y, 2), g.call("pow", y, y), g.call("mul", x, 0.5), g.call("remainder", x, -3)]
        return tuple(outs)

    check(fn, a, b, backend=backend)


def test_bool_logic_and_where(backend, check):
    a, b = torch.rand(50) > 0.5, torch.rand(50) > 0.5
    x, y = torch.randn(50), torch.randn(50)
    check(
        lambda g, a, b, x, y: (
            g.call("logical_or", a, b), g.call("logical_not", a), g.call("where", a, x, y),
            g.call("where", g.call("lt", x, y), x, 0.0), g.call("add", a, b), g.call("sum", a, (0,), False),
        ),
        a, b, x, y, backend=backend,
    )


def test_nan_and_inf_follow_torch(backend, check):
    """maximum/minimum/where/comparisons and the math functions on NaN, +-inf and -0."""
    special = [math.nan, 1.0, math.inf, -math.inf, 0.0, -0.0, 2.0, math.nan, -1.5, 30.0]
    a = torch.tensor(special)
    b = torch.tensor(special[::-1])

    def fn(g, x, y):
        binary = ["maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge", "add", "mul", "div", "remainder"]
        outs = [g.call(op, x, y) for op in binary + ["pow"]]
        outs += [g.call("where", g.call("gt", x, y), x, y), g.call("maximum", x, 0.0)]
        outs += [g.call("convert", x, torch.bool), g.call("amax", x, (0,), False)]
        outs += [g.call("amin", y, (0,), True)]
        unary = ["exp", "log", "sqrt", "tanh", "expm1", "log1p", "erf", "abs", "floor", "trunc", "sign"]
        return tuple(outs + [g.call(op, x) for op in unary])

    check(fn, a, b, backend=backend)


def test_convert_rounds_through_low_precision(backend, check):
    x = torch.randn(33, 10) * 100

    def fn(g, x):
        half, brain = g.call("convert", x, torch.float16), g.call("convert", x, torch.bfloat16)
        return (
            g.call("convert", g.call("mul", half, 3.0), torch.float32),  # rounds to fp16 first
            g.call("add", brain, 1),
            g.call("convert", x, torch.int64),
            g.call("convert", g.call("convert", x, torch.int32), torch.float64),
        )

    check(fn, x, backend=backend)


def test_constants_are_inlined(backend, check):
    def fn(g, x):
        two = g.call("full", (4, 5), 2.0, torch.float32)
        big = g.call("full", (), math.inf, torch.float64)
        return g.call("mul", x, two), g.call("minimum", x, big), g.call("full", (2,), 7, torch.int64)

    module = check(fn, torch.randn(4, 5), backend=backend)
    constants = [n for n in module.schedule.graph.nodes if n.op == "full"]
    assert [n in module.schedule.buffers for n in constants] == [False, False, True]  # only the output
