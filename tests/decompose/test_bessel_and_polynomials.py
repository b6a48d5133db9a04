"""torch.special's Bessel functions (J0, J1, Y0, Y1, I0, I1, K0, K1 scaled or not, the spherical j0),
the Airy function Ai and the orthogonal polynomials (Chebyshev T/U/V/W and shifted, Hermite H/He,
Laguerre, Legendre), each compiled to generated kernels only (codegen/cpp_bessel.py,
triton_bessel.py, orthogonal_polynomials.py), vs eager on fresh random inputs with zeros, negatives,
large values, infinities and NaN among them; polynomials with degrees 0, 1, 2, large, negative,
fractional, NaN, inf, as tensors and as numbers. C++ in float32/float64, Triton (TRITON_INTERPRET=1)
in float32. torch has no gradient for any of them: neither does a compiled program."""

from __future__ import annotations

import os

import pytest
import torch

import minicompiler
from minicompiler.ir.ops import BESSEL_FUNCTIONS, ORTHOGONAL_POLYNOMIALS

from .conftest import assert_generated

BACKENDS = ["cpp"] + (["triton"] if os.environ.get("TRITON_INTERPRET") == "1" else [])
COMBOS = [("cpp", torch.float64), ("cpp", torch.float32)] + [(b, torch.float32) for b in BACKENDS[1:]]
INF, NAN = float("inf"), float("nan")
# the branch points of the algorithms (2 for K, 2.09 for Ai, 5 for J and Y, 8 for I), J0's 1e-5,
# Ai's underflow past 103.892, zeros of both signs, infinities, NaN
BESSEL_EDGES = [0.0, -0.0, 1e-6, -1e-6, 0.4, -0.5, 2.0, 2.09, -2.09, 5.0, -5.0, 8.0, 30.0, -30.0, 104.0,
                1e5, -1e5, INF, -INF, NAN]
# x: the ends +-1 of [-1, 1] and one float32 ulp inside them (where V's and W's closed forms divide by
# a rounded 0), 0 and 1/2 (the shifted kinds' ends and middle), beyond [-1, 1], infinities
POLYNOMIAL_EDGES = [1.0, -1.0, 0.0, -0.0, 0.5, 1 - 2.0**-24, -1 + 2.0**-24, 2.0**-30, 1.5, -3.0, INF, -INF]
# n: negative, 0, 1, 2, where the Chebyshev kinds switch to their closed forms (4, 6, 8), fractional
# (truncated), NaN and inf (read as negative: 0)
DEGREES = [-3.0, -1.0, 0.0, 1.0, 2.0, 3.0, 5.0, 7.0, 9.0, 12.0, 30.0, 2.7, -0.5, NAN, INF, -INF]


def _tolerance(dtype: torch.dtype, backend: str) -> dict[str, float]:
    if dtype == torch.float32 or backend == "triton":  # Triton's helpers are float32-accurate
        return {"rtol": 1e-4, "atol": 1e-5}
    return {}


def _bessel_input(name: str, dtype: torch.dtype) -> torch.Tensor:
    x = torch.cat([torch.randn(4, 24, dtype=torch.float64) * 8, torch.randn(1, 24, dtype=torch.float64).abs() * 40])
    x[0, : len(BESSEL_EDGES)] = torch.tensor(BESSEL_EDGES, dtype=torch.float64)
    if name == "airy_ai" and dtype == torch.float32:
        # Ai(x) far left oscillates with the phase 2/3 |x|^(3/2): past -30 one float32 rounding of that
        # phase moves eager's own value by more than the tolerance (vs float64, eager and ours alike)
        x = torch.where(x < -30, -30.0, x)
    return x.to(dtype)


@pytest.mark.parametrize(("backend", "dtype"), COMBOS)
@pytest.mark.parametrize("name", BESSEL_FUNCTIONS)
def test_bessel_matches_eager(name: str, backend: str, dtype: torch.dtype) -> None:
    fn = getattr(torch.special, name)
    x = _bessel_input(name, dtype)
    compiled = minicompiler.compile(fn, backend=backend)
    actual, expected = compiled(x), fn(x)
    assert_generated(compiled)
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual, expected, equal_nan=True, **_tolerance(dtype, backend))


@pytest.mark.parametrize("backend", BACKENDS)
def test_bessel_fused_and_on_integers(backend: str) -> None:
    """Integer inputs become the default float type, as in eager; several functions share one kernel."""
    def fn(x: torch.Tensor) -> torch.Tensor:
        s = torch.special
        return s.bessel_j0(x) * s.modified_bessel_k1(x) + s.airy_ai(x) - s.bessel_y1(x) / (1 + s.modified_bessel_i0(x))

    x = torch.randint(-4, 9, (5, 7), dtype=torch.int32)
    compiled = minicompiler.compile(fn, backend=backend)
    actual, expected = compiled(x), fn(x)
    assert actual.dtype == expected.dtype == torch.float32
    torch.testing.assert_close(actual, expected, equal_nan=True, rtol=1e-4, atol=1e-5)
    assert_generated(compiled)


def _polynomial_inputs(name: str, dtype: torch.dtype, backend: str) -> tuple[torch.Tensor, torch.Tensor]:
    """x down a column, the degrees across a row: every x meets every degree."""
    x = torch.rand(40, dtype=torch.float64) * 2.4 - 1.2  # [-1.2, 1.2]: inside and a little beyond
    edges = POLYNOMIAL_EDGES
    if backend == "triton":  # (there an ulp of acos moves sin(n theta) / sin(theta) by 1e-3 of itself)
        edges = [e for e in edges if abs(e) != 1 - 2.0**-24]
    x = torch.cat([x, torch.tensor(edges, dtype=torch.float64)])
    # large degrees: the Chebyshev closed forms and the recurrences over many steps (Hermite: past
    # its float32 limit of 128). Triton's float32 acos is an ulp off torch's, an error the closed
    # forms multiply by n, so it goes to 30 only. (torch's float32 Legendre at n = 200 near +-1 is
    # itself 2e-4 off at n = 129 and 6e-4 at n = 200 within an ulp of +-1: only float64 goes there.)
    large = [200.0, 513.0] if dtype == torch.float64 else [129.0]
    if dtype == torch.float32 and (backend == "triton" or name == "legendre_polynomial_p"):
        large = []
    n = torch.tensor(DEGREES + large, dtype=torch.float64) + torch.zeros(3, 1, dtype=torch.float64)
    n[1:, : len(DEGREES)] = torch.randint(0, 14, (2, len(DEGREES))).double()  # random ones too
    return x[:, None, None].to(dtype), n.to(dtype)


@pytest.mark.parametrize(("backend", "dtype"), COMBOS)
@pytest.mark.parametrize("name", ORTHOGONAL_POLYNOMIALS)
def test_polynomial_matches_eager(name: str, backend: str, dtype: torch.dtype) -> None:
    fn = getattr(torch.special, name)
    x, n = _polynomial_inputs(name, dtype, backend)
    compiled = minicompiler.compile(fn, backend=backend)
    # On the GPU (tests/triton_on_gpu.py) the reference is eager's CPU kernel, which minicompiler
    # follows: at an infinite degree eager's CUDA kernels give NaN where the CPU's give 0 (torch 2.11)
    actual, expected = compiled(x, n), fn(x.cpu(), n.cpu()).to(x.device)
    assert_generated(compiled)
    assert actual.shape == expected.shape and actual.dtype == expected.dtype
    if backend == "triton":
        # Triton's float32 differs from eager's in the last bits (acos, and sums rounded without fma),
        # which near a root of a large polynomial is much of its value: there the error is measured
        # against the polynomial's size over all x (one column per degree)
        size = expected.nan_to_num(0.0, 0.0, 0.0).abs().amax(dim=0, keepdim=True).clamp_min(1.0)
        actual, expected = actual / size, expected / size
    torch.testing.assert_close(actual, expected, equal_nan=True, **_tolerance(dtype, backend))


@pytest.mark.parametrize("backend", BACKENDS)
def test_polynomial_of_nan(backend: str) -> None:
    """A NaN x is NaN from degree 1 on (torch's recurrence stops before its first step there and returns
    a variable it never set, 0 or NaN as it happens, so degrees from 2 on are compared with NaN)."""
    x = torch.tensor([NAN] * 6)
    n = torch.tensor([-1.0, 0.0, 1.0, 2.0, 7.0, 30.0])
    for name in ORTHOGONAL_POLYNOMIALS:
        fn = getattr(torch.special, name)
        expected = torch.where(n < 2, fn(x, n), NAN)
        expected = torch.where(n < 0, 0.0, expected)
        torch.testing.assert_close(minicompiler.compile(fn, backend=backend)(x, n), expected, equal_nan=True)


@pytest.mark.parametrize("backend", BACKENDS)
@pytest.mark.parametrize("form", ["number_degree", "number_x", "integers", "zero_dim", "fused"])
def test_polynomial_argument_forms(form: str, backend: str) -> None:
    s = torch.special
    x, n = torch.rand(5, 6) * 2.2 - 1.1, torch.randint(-1, 12, (6,))
    cases = {
        "number_degree": (lambda x, n: s.chebyshev_polynomial_u(x, 5) + s.legendre_polynomial_p(x, 12), (x, n)),
        "number_x": (lambda x, n: s.hermite_polynomial_h(0.75, n) - s.laguerre_polynomial_l(-2.0, n), (x, n)),
        "integers": (lambda x, n: s.shifted_chebyshev_polynomial_v(x, n), (torch.randint(-2, 3, (5, 6)), n)),
        "zero_dim": (lambda x, n: s.hermite_polynomial_he(x, n), (torch.tensor(0.3), torch.tensor(4))),
        "fused": (lambda x, n: s.chebyshev_polynomial_t(x.sin(), n) * s.bessel_j1(x) + s.chebyshev_polynomial_w(x, 3),
                  (x, n)),
    }
    fn, args = cases[form]
    compiled = minicompiler.compile(fn, backend=backend)
    actual, expected = compiled(*args), fn(*args)
    assert actual.dtype == expected.dtype
    torch.testing.assert_close(actual, expected, equal_nan=True, rtol=1e-4, atol=1e-5)
    assert_generated(compiled)


@pytest.mark.parametrize("name", ["bessel_j0", "modified_bessel_i0", "airy_ai", "chebyshev_polynomial_t"])
def test_no_gradient_as_in_torch(name: str) -> None:
    """torch has no derivative for them (its result needs no gradient, and backward raises): the
    compiled program runs such a graph in eager, rather than invent one (modified_bessel_i0's would be I1)."""
    fn = getattr(torch.special, name)
    call = (lambda x: fn(x, 3)) if name in ORTHOGONAL_POLYNOMIALS else fn
    x = torch.rand(4, dtype=torch.float64, requires_grad=True)
    expected, actual = call(x), minicompiler.compile(call, backend="cpp")(x)
    torch.testing.assert_close(actual, expected)
    assert actual.requires_grad == expected.requires_grad
    with pytest.raises(RuntimeError) as eager:
        expected.sum().backward()
    with pytest.raises(RuntimeError) as compiled:
        actual.sum().backward()
    assert str(compiled.value) == str(eager.value)
