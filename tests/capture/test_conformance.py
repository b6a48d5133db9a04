"""Capture conformance: the Python constructs of issue 3, each compiled and compared with eager on
two calls with fresh random inputs. `BREAKS` lists how many graph breaks each case may have
(0 unless named): the constructs that should capture whole must not break."""

from __future__ import annotations

import math
from collections import namedtuple
from dataclasses import dataclass

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import minicompiler

from .conftest import assert_same

SCALE = 0.5
Pair = namedtuple("Pair", ["a", "b"])


@dataclass
class Batch:
    x: torch.Tensor
    y: torch.Tensor


class Block(nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc = nn.Linear(4, 4)

    def forward(self, x):
        return torch.relu(self.fc(x))


class Residual(Block):
    def forward(self, x):
        return x + super().forward(x)


LAYERS = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])
SEQ = nn.Sequential(nn.Linear(4, 4), nn.GELU(), nn.Linear(4, 4))
RESIDUAL = Residual()


def helper(t, k=2):
    return t * k


def kwonly(x, *, power=2):
    return x**power


def varargs(*xs, **scales):
    return sum(x * scales.get("s", 1.0) for x in xs)


def closure_maker(c):
    def inner(x):
        return x * c

    return inner


TIMES3 = closure_maker(3.0)


def t(*shape):
    return lambda: torch.randn(*shape)


X = t(4, 4)
CASES: dict[str, tuple] = {
    # if/elif/else on Python values, shapes and flags
    "if_python_value": (lambda x, n=3: x + 1 if n > 2 else x - 1, [X]),
    "elif_on_shape": (lambda x: x.sum() if x.shape[0] == 1 else (x * 2 if x.dim() == 3 else x - 1), [X]),
    "if_module_training": (lambda x: F.dropout(x, 0.0, SEQ.training), [X]),
    "if_none": (lambda x, m=None: x if m is None else x * m, [X]),
    "and_or": (lambda x: x * (2 if x.shape[0] > 1 and x.shape[1] > 1 else 3), [X]),
    "ternary_dtype": (lambda x: x.double() if x.dtype == torch.float32 else x, [X]),
    # loops
    "for_range": (lambda x: [x := x * 0.5 + i for i in range(3)][-1], [X]),
    "for_list": (lambda x: sum(x * k for k in [1.0, 2.0, 3.0]), [X]),
    "for_tuple_unpack": (lambda x: sum(a * x + b for a, b in ((1, 2), (3, 4))), [X]),
    "for_module_list": (lambda x: [x := layer(x) for layer in LAYERS][-1], [X]),
    "sequential": (lambda x: SEQ(x), [X]),
    "for_dict_items": (lambda x: sum(v * x for k, v in {"a": 1.0, "b": 2.0}.items()), [X]),
    "zip": (lambda x, y: sum(a + b for a, b in zip(x, y, strict=True)), [X, X]),
    "enumerate": (lambda x: sum(row * i for i, row in enumerate(x)), [X]),
    "while_counter": (None, [X]),  # filled below: statements need a def
    "while_break": (None, [X]),
    "reversed_range": (lambda x: sum(x[i] for i in reversed(range(2))), [X]),
    # comprehensions
    "list_comprehension": (lambda x: torch.stack([x * i for i in range(3)]), [X]),
    "dict_comprehension": (lambda x: {f"p{i}": x**i for i in range(3)}, [X]),
    "generator_sum": (lambda x: sum(x[i] ** 2 for i in range(4)), [X]),
    "nested_comprehension": (lambda x: [[x[i, j] for j in range(2)] for i in range(2)], [X]),
    "comprehension_if": (lambda x: [x * i for i in range(6) if i % 2 == 0], [X]),
    # functions
    "closure": (lambda x: TIMES3(x), [X]),
    "nested_function": (None, [X]),
    "lambda_inside": (lambda x: (lambda y: y.exp())(x) + 1, [X]),
    "default_argument": (lambda x: helper(x) + helper(x, k=3), [X]),
    "keyword_only": (lambda x: kwonly(x, power=3), [X]),
    "varargs_kwargs": (lambda x, y: varargs(x, y, s=2.0), [X, X]),
    "star_call": (lambda x, y: torch.add(*(x, y)), [X, X]),
    "super_call": (lambda x: RESIDUAL(x), [X]),
    "method_call": (lambda x: Block.forward(RESIDUAL, x), [X]),
    # containers in and out
    "namedtuple_in": (lambda p: p.a * p.b, [lambda: Pair(torch.randn(3), torch.randn(3))]),
    "namedtuple_out": (lambda x: Pair(x + 1, x - 1), [X]),
    "dataclass_in": (lambda b: b.x @ b.y, [lambda: Batch(torch.randn(3, 3), torch.randn(3, 3))]),
    "dataclass_out": (lambda x: Batch(x, x * 2), [X]),
    "dict_in_out": (lambda d: {"s": d["a"] + d["b"]}, [lambda: {"a": torch.randn(3), "b": torch.randn(3)}]),
    "list_out": (lambda x: [x, x.t(), x.sum()], [X]),
    "tuple_unpack_star": (None, [X]),
    # context managers and exceptions
    "no_grad": (None, [X]),
    "enable_grad": (None, [X]),
    "try_except": (None, [X]),
    "try_finally": (None, [X]),
    "assert": (None, [X]),
    # Python values
    "isinstance": (lambda x: x * 2 if isinstance(x, torch.Tensor) else x, [X]),
    "fstring": (lambda x: {f"{x.shape[0]}x{x.shape[1]:03d}": x}, [X]),
    "walrus": (lambda x: (n := x.shape[0]) * x + n, [X]),
    "math_functions": (lambda x: x * math.sqrt(2.0) + math.pi * math.cos(0.5) + math.floor(2.7), [X]),
    "global_constant": (lambda x: x * SCALE, [X]),
    "shape_unpack": (None, [t(2, 3, 4)]),
    "size_and_dim": (lambda x: x.reshape(x.size(0), -1) * x.dim(), [t(2, 3, 4)]),
    "len_of_tensor": (lambda x: x * len(x), [X]),
    # indexing
    "index_int": (lambda x: x[1], [X]),
    "index_slice": (lambda x: x[1:3, ::2], [X]),
    "index_none_ellipsis": (lambda x: x[None, ..., 0], [t(2, 3, 4)]),
    "index_negative": (lambda x: x[-1, -2:], [X]),
    "index_tensor": (lambda x, i: x[i], [X, lambda: torch.randint(0, 4, (3,))]),
    "index_bool_mask": (lambda x: x[x > 0].sum(), [X]),
    # in-place ops on tensors the function made
    "inplace_add": (None, [X]),
    "inplace_augmented": (None, [X]),
    "setitem_created": (None, [X]),
}


def while_counter(x):
    i = 0
    while i < 3:
        x = x * 0.9 + i
        i += 1
    return x


def while_break(x):
    n = 0
    while True:
        x = x.tanh()
        n += 1
        if n == 3:
            break
    return x


def nested_function(x):
    def square_plus(y, c=1.0):
        return y * y + c

    return square_plus(x) + square_plus(x, c=2.0)


def tuple_unpack_star(x):
    first, *rest = x.unbind(0)
    return first + sum(rest)


def no_grad(x):
    with torch.no_grad():
        y = x * 2
    return y + 1


def enable_grad(x):
    with torch.no_grad():
        with torch.enable_grad():
            y = x.exp()
    return y


def try_except(x):
    try:
        y = x.sin()
    except RuntimeError:
        y = x
    return y


def try_finally(x):
    try:
        y = x.cos()
    finally:
        z = 1
    return y + z


def assert_(x):
    assert x.dim() == 2, "needs a matrix"
    return x.t()


def shape_unpack(x):
    b, c, h = x.shape
    return x.reshape(b, c * h) + h


def inplace_add(x):
    y = x * 2
    y.add_(1)
    y.mul_(x)
    return y


def inplace_augmented(x):
    y = x.clone()
    y += 1
    y *= 3
    return y


def setitem_created(x):
    y = torch.zeros_like(x)
    y[0] = x[1]
    y[:, 1] = 5.0
    return y


for fn in (while_counter, while_break, nested_function, tuple_unpack_star, no_grad, enable_grad, try_except,
           try_finally, shape_unpack, inplace_add, inplace_augmented, setitem_created):
    CASES[fn.__name__] = (fn, CASES[fn.__name__][1])
CASES["assert"] = (assert_, CASES["assert"][1])

# Cases that read tensor values: they compile as several graphs joined by eager Python.
BREAKS = {"index_bool_mask": 1, "index_tensor": 1, "namedtuple_out": 1, "dataclass_out": 1}
# Not captured yet: the whole call runs eagerly. (None left: `setitem_created` was until slice
# assignments were captured.)
KNOWN_GAPS: set[str] = set()
RECOMPILES = {"index_bool_mask"}  # the masked tensor's size changes with the values
CPP_CASES = {"sequential", "inplace_add", "generator_sum", "no_grad", "dict_comprehension"}


@pytest.mark.parametrize("name", [pytest.param(n, marks=pytest.mark.xfail(strict=True)) if n in KNOWN_GAPS else n
                                  for n in sorted(CASES)])
def test_construct(name: str) -> None:
    fn, makers = CASES[name]
    torch.manual_seed(0)
    compiled = minicompiler.compile(fn, backend="cpp" if name in CPP_CASES else "eager")
    for _ in range(2):
        args = tuple(make() for make in makers)
        assert_same(compiled(*args), fn(*args), rtol=1e-5, atol=1e-5)
    report = compiled.reports[0]
    assert report.eager_fallback is None, report.eager_fallback
    assert len(report.graph_breaks) <= BREAKS.get(name, 0), [b.reason for b in report.graph_breaks]
    if name not in RECOMPILES:
        assert len(compiled.reports) == 1, compiled.reports[-1].recompile_reason


def test_there_are_at_least_sixty_cases() -> None:
    assert len(CASES) >= 60
