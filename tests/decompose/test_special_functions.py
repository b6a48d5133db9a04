"""Special functions computed in generated kernels by torch's algorithms (codegen/cpp_special.py,
codegen/triton_special.py) and formulas of them (decompose/special_functions.py): lgamma, digamma,
polygamma, mvlgamma, zeta, erfinv, erfcx, log_ndtr, ndtri, nextafter, the modified Bessel functions
I0/I1, and masked.logaddexp. Each compiled to generated kernels only, vs eager on fresh random
inputs with poles, zeros, infinities and NaN among them: C++ in float32/float64/float16, Triton
(TRITON_INTERPRET=1) in float32; gradients in float64 against torch autograd."""

from __future__ import annotations

import os

import pytest
import torch

import minicompiler

from .conftest import assert_generated

BACKENDS = ["cpp"] + (["triton"] if os.environ.get("TRITON_INTERPRET") == "1" else [])
INF, NAN = float("inf"), float("nan")
# poles of the gamma family (0, -1, -2), +-0 (digamma's sign), both infinities, NaN, halves
EDGES = [0.0, -0.0, -1.0, -2.0, 1.0, 2.0, 0.5, -2.5, INF, -INF, NAN, 1e-30, 30.0, -30.5]


def _reals(shape: tuple[int, ...] = (6, 16), scale: float = 4.0) -> torch.Tensor:
    """Random float64 values in about [-3 scale, 3 scale], the first row the edge values."""
    x = torch.randn(shape, dtype=torch.float64) * scale
    x[0, : len(EDGES)] = torch.tensor(EDGES, dtype=torch.float64)
    return x


def _unit(shape: tuple[int, ...] = (6, 16)) -> torch.Tensor:
    """Values in [-1.1, 1.1] (erfinv's domain and a little beyond), with +-1, 0 and NaN."""
    x = torch.rand(shape, dtype=torch.float64) * 2.2 - 1.1
    # (not much closer to +-1: there erfinv's slope is huge, and one ulp of erf's moves float32 far)
    x[0, :6] = torch.tensor([1.0, -1.0, 0.0, -0.0, NAN, 0.9999])
    return x


def _probabilities(shape: tuple[int, ...] = (6, 16)) -> torch.Tensor:
    """ndtri's domain: (0, 1), both tails (below e^-2 and above 1 - e^-2) and far out, 0 and 1, outside."""
    p = torch.rand(shape, dtype=torch.float64)
    p[0, :9] = torch.tensor([0.0, 1.0, -0.5, 1.5, NAN, 1e-20, 1e-10, 0.05, 0.99])
    return p


# name -> (function, its input in float64)
CASES = {
    "lgamma": (torch.lgamma, _reals),
    "gammaln": (torch.special.gammaln, _reals),
    "digamma": (torch.digamma, _reals),
    "psi_method": (lambda x: x.digamma(), _reals),
    "polygamma_1": (lambda x: torch.polygamma(1, x), _reals),
    "polygamma_2": (lambda x: torch.special.polygamma(2, x), _reals),
    "polygamma_4": (lambda x: x.polygamma(4), _reals),
    "mvlgamma_1": (lambda x: torch.mvlgamma(x.abs() + 0.1, 1), _reals),
    "mvlgamma_5": (lambda x: torch.special.multigammaln(x.abs() + 2.1, 5), _reals),
    # q: poles and negatives (which need a whole x). (x.abs() + 1, not rounded, would let GCC's fast math
    # read x == 1 as x.abs() == 0, which 1e-30 is not, though 1e-30 + 1 rounds to 1)
    "zeta": (lambda x: torch.special.zeta(x.abs().round() + 1, x), _reals),
    "zeta_number": (lambda x: torch.special.zeta(3.0, x) + torch.special.zeta(x.abs() + 1.5, 2.0), _reals),
    "zeta_q": (lambda x: torch.special.zeta(2.5, x) - torch.special.zeta(4.0, x), _reals),  # torch: d/dq only
    "erfinv": (torch.erfinv, _unit),
    "erfcx": (torch.special.erfcx, lambda: _reals(scale=6.0)),
    "log_ndtr": (torch.special.log_ndtr, lambda: _reals(scale=12.0)),
    "ndtri": (torch.special.ndtri, _probabilities),
    "i0": (torch.i0, lambda: _reals(scale=10.0)),
    "i0e": (torch.special.i0e, lambda: _reals(scale=10.0)),
    "i1": (torch.special.i1, lambda: _reals(scale=10.0)),
    "i1e": (torch.special.i1e, lambda: _reals(scale=10.0)),
    "nextafter": (lambda x: torch.nextafter(x, x.flip(1)) + torch.nextafter(x, torch.zeros_like(x)), _reals),
    "fused": (lambda x: torch.lgamma(x.abs() + 1) * torch.special.i0e(x) - torch.erfinv(torch.tanh(x) * 0.9), _reals),
}
NO_HALF = {"zeta", "zeta_number", "zeta_q", "erfcx", "log_ndtr", "ndtri", "nextafter"}  # eager rejects float16 there
# Where eager's float32 is less exact than ours: erfcx(x < -6.1) is 2 e^(x*x) with x*x rounded
# (a relative error up to ~5e-6 near -9.3, where it overflows); ours corrects x*x's rounding.
FLOAT32_RTOL = {"erfcx": 1e-5, "fused": 1e-5}
# At and near the poles of digamma and trigamma (0, -1, -2, ...) eager's result goes through
# pi / tan(pi x) or pi^2 / sin(pi x)^2: a large number set by the last bits of tan or sin, which
# Triton's need not share (CI: digamma at x within ~5e-4 of a pole, 9e-5 apart relatively)
TRITON_POLES = {"polygamma_1", "digamma", "psi_method"}  # psi_method: x.digamma()


def _compare(name: str, dtype: torch.dtype, backend: str) -> None:
    fn, make = CASES[name]
    x = make().to(dtype)
    if backend == "triton" and name in TRITON_POLES:
        x = torch.where((x <= 0) & ((x - x.round()).abs() < 1e-2), 0.25, x)
    compiled = minicompiler.compile(fn, backend=backend)
    # On the GPU (tests/triton_on_gpu.py) the reference is eager's CPU kernel, which minicompiler
    # follows: eager's CUDA polygamma(4) is 6e-7 of the value off float64, the CPU's and ours 1e-7
    actual, expected = compiled(x), fn(x.cpu()).to(x.device)
    assert_generated(compiled)
    if dtype == torch.float16:
        tol = {"rtol": 1e-2, "atol": 1e-2}
    elif dtype == torch.float32 or backend == "triton":  # Triton's helpers are float32-accurate
        tol = {"rtol": FLOAT32_RTOL.get(name, 2e-6 if backend == "cpp" else 2e-5), "atol": 1e-5}
    else:
        tol = {}
    torch.testing.assert_close(actual, expected, equal_nan=True, **tol)


COMBOS = [("cpp", torch.float64), ("cpp", torch.float32), ("cpp", torch.float16)]
COMBOS += [(b, torch.float32) for b in BACKENDS[1:]]


@pytest.mark.parametrize(("backend", "dtype"), COMBOS)
@pytest.mark.parametrize("name", sorted(CASES))
def test_matches_eager(name: str, backend: str, dtype: torch.dtype) -> None:
    if dtype == torch.float16 and name in NO_HALF:
        pytest.skip("eager has no float16 kernel for it")
    _compare(name, dtype, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_float64_on_triton(backend: str) -> None:
    """Triton computes float64 inputs in float64 (its constants are float32: float32-accurate)."""
    _compare("fused", torch.float64, backend)


@pytest.mark.parametrize("backend", BACKENDS)
def test_erfinv_near_plus_minus_one_keeps_its_digits(backend: str) -> None:
    """Near +-1, erf(x) rounds to +-1 in float32 and a Newton step on erf(x) = y corrects by rounding
    noise: results were 8e-3 off (C++) and 7e-6 (Triton). Steps on erfc(|x|) = 1 - |y| keep every
    digit: within float32's reach of the float64 answer for the same input, either sign."""
    y = torch.cat([torch.linspace(0.7, 0.99, 200), 1 - torch.logspace(-2, -7, 400)]).to(torch.float32)
    y = torch.cat([y, -y])
    compiled = minicompiler.compile(torch.erfinv, backend=backend)
    torch.testing.assert_close(compiled(y).double(), torch.erfinv(y.double()), rtol=4e-7, atol=0)
    if backend == "cpp":  # in float64 too, as torch's
        y64 = y.double() + 1e-12
        torch.testing.assert_close(compiled(y64), torch.erfinv(y64), rtol=1e-13, atol=0)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("name", ["lgamma", "digamma", "erfinv", "i0", "i1e", "polygamma_2"])
def test_integer_inputs_become_float(name: str, backend: str) -> None:
    fn = CASES[name][0]
    x = torch.randint(-3, 6, (4, 8), dtype=torch.int32)
    if name == "erfinv":
        x = x.clamp(-1, 1)
    compiled = minicompiler.compile(fn, backend=backend)
    actual, expected = compiled(x), fn(x)
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual, expected, equal_nan=True, rtol=2e-5, atol=1e-5)
    assert_generated(compiled)


def test_nextafter_in_half_precision_stays_a_torch_call() -> None:
    """bfloat16's neighbour cannot be found in float32 (it would round back): torch computes it."""
    x = torch.randn(8).to(torch.bfloat16)
    compiled = minicompiler.compile(lambda x: torch.nextafter(x, x + 1), backend="cpp")
    torch.testing.assert_close(compiled(x), torch.nextafter(x, x + 1), rtol=0, atol=0)


# gradients: finite inputs away from the poles, where torch's derivatives are defined
GRADIENTS = {
    "lgamma": lambda: _reals(),
    "digamma": lambda: _reals(),
    "polygamma_1": lambda: _reals(),
    "polygamma_2": lambda: _reals(),
    "mvlgamma_5": lambda: _reals(),
    "zeta_q": lambda: _reals(),
    "nextafter": lambda: _reals(),
    "erfinv": lambda: _unit() * 0.9,
    "erfcx": lambda: _reals(scale=3.0),
    "log_ndtr": lambda: _reals(scale=8.0),
    "ndtri": lambda: _probabilities().clamp(1e-12, 1 - 1e-12),
    "i0": lambda: _reals(scale=10.0),
    "i0e": lambda: _reals(scale=10.0),
    "i1": lambda: _reals(scale=10.0),
    "i1e": lambda: _reals(scale=10.0),
    "fused": lambda: _reals(),
}


@pytest.mark.parametrize("name", sorted(GRADIENTS))
def test_gradient_matches_torch(name: str) -> None:
    fn = CASES[name][0]
    x = GRADIENTS[name]().nan_to_num(0.3, 3.0, -3.0)
    x = torch.where(x == x.round(), x + 0.25, x)  # no poles (whole numbers), no exact 0
    x[0, 0] = 0.0 if name in ("i1", "i1e") else x[0, 0]  # i1's slope at 0: torch's limit 1/2
    x = x.detach().requires_grad_()
    compiled = minicompiler.compile(fn, backend="cpp")
    (expected,) = torch.autograd.grad(fn(x).sum(), x)
    (actual,) = torch.autograd.grad(compiled(x).sum(), x)
    torch.testing.assert_close(actual, expected, equal_nan=True)


@pytest.mark.parametrize("backend", BACKENDS)
def test_masked_logaddexp(backend: str) -> None:
    x, y = torch.randn(4, 7), torch.randn(4, 7, dtype=torch.float64)
    x[0, :3] = torch.tensor([INF, -INF, NAN])
    x_mask, y_mask = torch.rand(4, 7) < 0.6, torch.rand(7) < 0.5  # y's broadcast along rows

    def fn(x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
        return torch.masked.logaddexp(x, y, input_mask=x_mask, other_mask=y_mask)

    compiled = minicompiler.compile(fn, backend=backend)
    actual, expected = compiled(x, y), fn(x, y)
    assert actual.dtype == expected.dtype == torch.float32  # x's dtype, as torch
    torch.testing.assert_close(actual, expected, equal_nan=True)
    assert_generated(compiled)
