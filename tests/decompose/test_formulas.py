"""Special functions and activations written as formulas of primitives (decompose/pointwise.py):
each compiled to a generated kernel (no extern call), vs eager, on C++ and Triton, over dtypes,
with the gradient for float64."""

from __future__ import annotations

import os

import pytest
import torch
import torch.nn.functional as F

import minicompiler

UNARY = {"sinh": torch.sinh, "cosh": torch.cosh, "exp2": torch.exp2, "log2": torch.log2, "log10": torch.log10,
         "frac": torch.frac, "deg2rad": torch.deg2rad, "rad2deg": torch.rad2deg, "softsign": F.softsign,
         "hardsigmoid": F.hardsigmoid, "hardswish": F.hardswish, "mish": F.mish, "elu": F.elu, "selu": F.selu,
         "celu": lambda x: F.celu(x, 0.7)}
BINARY = {"hypot": torch.hypot, "logical_xor": torch.logical_xor}
FLOAT_ONLY = {"frac", "softsign", "hardsigmoid", "hardswish", "mish", "elu", "selu", "celu", "hypot"}
DTYPES = [torch.float32, torch.float16, torch.bfloat16, torch.int64]  # all on C++, float32 on Triton too
BACKENDS = ["cpp"] + (["triton"] if os.environ.get("TRITON_INTERPRET") == "1" else [])


def _input(name: str, dtype: torch.dtype, shape: tuple[int, ...]) -> torch.Tensor:
    x = torch.randn(shape, dtype=torch.float64) * 3
    if name.startswith("log"):
        x = x.abs() + 0.1
    return x.to(dtype) if dtype.is_floating_point else x.round().to(dtype)


def _compiled_matches(fn, args: tuple, backend: str) -> minicompiler.CompileReport:
    compiled = minicompiler.compile(fn, backend=backend)
    expected, actual = fn(*args), compiled(*args)
    tol = {"atol": 2e-2, "rtol": 2e-2} if expected.dtype in (torch.float16, torch.bfloat16) else {}
    torch.testing.assert_close(actual, expected, equal_nan=True, **tol)
    return compiled.report


COMBOS = [(d, "cpp") for d in DTYPES] + [(torch.float32, b) for b in BACKENDS[1:]]


@pytest.mark.parametrize(("dtype", "backend"), COMBOS)
@pytest.mark.parametrize("name", [*UNARY, *BINARY])
def test_formula_is_generated(name: str, dtype: torch.dtype, backend: str) -> None:
    if name in FLOAT_ONLY and not dtype.is_floating_point:
        pytest.skip("torch defines it for floating point only")
    if name in BINARY:
        args = (_input(name, dtype, (5, 3)), _input(name, dtype, (3,)))  # broadcast
        fn = BINARY[name]
    else:
        args = (_input(name, dtype, (7, 3)).t(),)  # transposed
        fn = UNARY[name]
    report = _compiled_matches(lambda *a: fn(*a), args, backend)
    kinds = {k.kind for g in report.graphs for k in g.kernels}
    assert "extern" not in kinds and kinds, kinds


@pytest.mark.parametrize("name", [n for n in UNARY if n != "frac"] + ["hypot"])
def test_formula_gradient(name: str) -> None:
    fn = BINARY.get(name) or UNARY[name]
    args = [_input(name, torch.float64, (6,)).requires_grad_() for _ in range(2 if name in BINARY else 1)]
    compiled = minicompiler.compile(lambda *a: fn(*a), backend="cpp")
    expected = torch.autograd.grad(fn(*args).sum(), args)
    actual = torch.autograd.grad(compiled(*args).sum(), args)
    torch.testing.assert_close(actual, expected)
