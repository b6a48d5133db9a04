"""The special functions in Triton: lgamma, digamma, trigamma, the Hurwitz zeta function, erfinv, erfcx,
log_ndtr, ndtri, nextafter and the modified Bessel functions I0, I1 (scaled or not).

Written with core `tl` ops only, as the rest of triton_prelude.py, so that one source runs on the
GPU and under TRITON_INTERPRET=1 (which has no libdevice). They follow the algorithms of
cpp_special.py (torch's), with the same coefficient tables (special_coefficients.py), but a kernel
computes every element of a block in lockstep: where the C++ code branches, these compute each
branch and pick with tl.where, and where it loops until done, they loop a fixed number of times
(or, for zeta, as often as the block's hungriest element needs) with finished elements masked.
Results are float32-accurate, float64 inputs included (Triton makes Python float constants
float32), as the other Triton helpers are.

The helpers join triton_prelude.HELPERS, separated by two blank lines; they call its _trunc,
_negative and _log1p, and the ones above them.
"""

from __future__ import annotations

from minicompiler.codegen.special_coefficients import (
    DIGAMMA_SERIES,
    ERFINV_CENTRAL_DEN,
    ERFINV_CENTRAL_NUM,
    ERFINV_TAIL_DEN,
    ERFINV_TAIL_NUM,
    I0E_A,
    I0E_B,
    I1E_A,
    I1E_B,
    NDTRI_P0,
    NDTRI_P1,
    NDTRI_P2,
    NDTRI_Q0,
    NDTRI_Q1,
    NDTRI_Q2,
    ZETA_DIVISORS,
)

# erfcx(x): e^(x^2) (1 - erf(x)) below 1 (where erfc(x) >= 0.157, so 1 - erf keeps float32's
# digits), Laplace's continued fraction of this many terms from 1 on (relative error ~3e-9 at 1)
ERFCX_FRACTION_TERMS = 60
ZETA_MAX_TERMS = 4096  # the direct sum of zeta(x, q) for q < -4000 stops short (torch's would not)

TEMPLATES = {
    "lgamma": "_lgamma({0})", "digamma": "_digamma({0})", "trigamma": "_trigamma({0})",
    "zeta": "_zeta({0}, {1})", "erfinv": "_erfinv({0})", "erfcx": "_erfcx({0})", "log_ndtr": "_log_ndtr({0})",
    "ndtri": "_ndtri({0})", "nextafter": "_nextafter({0}, {1})", "i0e": "_i0e({0})", "i1e": "_i1e({0})",
    "i0": "tl.exp(tl.abs({0})) * _i0e({0})", "i1": "tl.exp(tl.abs({0})) * _i1e({0})",
}


def horner(table: tuple[float, ...], z: str) -> str:
    """The polynomial with coefficients `table` (highest power first) at `z`, as one expression."""
    text = repr(table[0])
    for c in table[1:]:
        text = f"({text}) * {z} + {c!r}"
    return text


def clenshaw(name: str, table: tuple[float, ...]) -> str:
    """A helper summing the Chebyshev series `table` at y (Cephes' chbevl), one line per coefficient."""
    lines = ["@triton.jit", f"def {name}(y):", "    # Clenshaw's recurrence, unrolled: b0 <- y b0 - b1 + c",
             f"    b0, b1, b2 = y * 0 + {table[0]!r}, y * 0, y * 0"]
    lines += [f"    b0, b1, b2 = y * b0 - b1 + {c!r}, b0, b1" for c in table[1:]]
    lines.append("    return 0.5 * (b0 - b2)")
    return "\n".join(lines)


def _zeta_tail() -> str:
    """The Euler-Maclaurin tail of zeta, unrolled: its k-th term divides by the k-th of ZETA_DIVISORS."""
    lines = []
    for divisor in ZETA_DIVISORS:
        lines += ["    rising, b = rising * (x + k), b / w",
                  f"    term = rising * b / {divisor!r}",
                  "    s = tl.where(done, s, s + term)",
                  "    done = done | (tl.abs(term / s) < 1.11022302462515654042e-16)",
                  "    rising, b, k = rising * (x + k + 1), b / w, k + 2"]
    return "\n".join(lines)


HELPERS = "\n\n\n".join([
    '''
@triton.jit
def _lgamma(x):
    # Reflected to z >= 1/2 (lgamma(x) = log(pi / |sin(pi x)|) - lgamma(1 - x), sin taken of x's distance
    # to the nearest integer), pushed up to z >= 8 (lgamma(z) = lgamma(z + 1) - log(z)), then
    # Stirling's series. +inf at the poles 0, -1, -2, ... and at +-inf
    reflect = x < 0.5
    z = tl.where(reflect, 1 - x, x)
    product = z * 0 + 1
    for _ in tl.static_range(8):
        small = z < 8
        product = tl.where(small, product * z, product)
        z = tl.where(small, z + 1, z)
    r = (z - 0.5) * tl.log(z) - z + 0.91893853320467274178
    zz = 1 / (z * z)
    r = r + (0.083333333333333333 - zz * (0.0027777777777777778 - zz * 0.00079365079365079365)) / z
    r = r - tl.log(product)
    distance = x - tl.floor(x + 0.5)
    r = tl.where(reflect, tl.log(3.141592653589793 / tl.abs(tl.sin(3.141592653589793 * distance))) - r, r)
    return tl.where(tl.abs(x) == float("inf"), float("inf"), r)''',
    f'''
@triton.jit
def _digamma(x):
    # psi(x) = psi(1 - x) - pi / tan(pi x) for x < 0 (tan of x's fractional part), pushed up to
    # z >= 10 (psi(z) = psi(z + 1) - 1/z), then the asymptotic series; +-inf at +-0, NaN at -1, -2, ...
    negative = x < 0
    fraction = (x - _trunc(x)) * 3.141592653589793
    reflection = tl.where(negative, 3.141592653589793 * tl.cos(fraction) / tl.sin(fraction), 0.0)
    z = tl.where(negative, 1 - x, x)
    r = tl.zeros_like(z)
    for _ in tl.static_range(10):
        small = z < 10
        r = tl.where(small, r - 1 / z, r)
        z = tl.where(small, z + 1, z)
    zz = 1 / (z * z)
    r = r + tl.log(z) - 0.5 / z - zz * ({horner(DIGAMMA_SERIES, "zz")}) - reflection
    r = tl.where(negative & (x == tl.floor(x)), float("nan"), r)
    return tl.where(x == 0, tl.where(_negative(x), float("inf"), -float("inf")), r)''',
    '''
@triton.jit
def _trigamma(x):
    # psi1(x) = pi^2 / sin^2(pi x) - psi1(1 - x) for x < 1/2, pushed up by 6 (psi1(z) = psi1(z + 1)
    # + 1/z^2), then its asymptotic series. (sin(pi x) as torch computes it: at the poles, where
    # pi x is not quite a multiple of pi, a large finite value, not inf)
    reflect = x < 0.5
    s = tl.sin(3.141592653589793 * x)
    r = tl.where(reflect, -9.869604401089358 / (s * s), 0.0)
    z = tl.where(reflect, 1 - x, x)
    for _ in tl.static_range(6):
        r = r + 1 / (z * z)
        z = z + 1
    zz = 1 / (z * z)
    r = r + (1 + 1 / (2 * z) + zz * (0.16666666666666667 - zz * (0.033333333333333333 - zz * 0.023809523809523810))) / z
    return tl.where(reflect, -r, r)''',
    f'''
@triton.jit
def _zeta(x, q):
    # The Hurwitz zeta function sum_k (k + q)^-x as Cephes sums it (cpp_special.py): the first terms
    # until q + k > 9 (at least 9), then the Euler-Maclaurin tail; an element whose terms stop
    # counting (below 1e-16 of the sum) is done, and keeps its sum. In float64, as torch sums float32's
    # too: for q < 0 the terms change sign, and the sum may be much smaller than its first terms
    dtype = x.dtype
    x, q = tl.broadcast(x.to(tl.float64), q.to(tl.float64))  # both blocks of one shape (either may be a scalar)
    s = _pow(q, -x)  # (a negative q needs a whole x, and gives the sign (-1)^x)
    terms = tl.minimum(tl.maximum(tl.where(q == q, tl.floor(9 - q) + 1, 0.0), 9.0), {ZETA_MAX_TERMS}.0).to(tl.int32)
    a, b = q, q * 0
    done = q != q
    for i in range(0, tl.max(terms)):
        step = (i < terms) & ~done
        a = tl.where(step, a + 1, a)
        b = tl.where(step, _pow(a, -x), b)
        s = tl.where(step, s + b, s)
        done = done | (step & (-1.11022302462515654042e-16 * s < b) & (b < 1.11022302462515654042e-16 * s))
    w = a
    s = tl.where(done, s, s + b * w / (x - 1) - 0.5 * b)
    rising, k = x * 0 + 1, x * 0
{_zeta_tail()}
    s = tl.where((q <= 0) & (x != tl.floor(x)), float("nan"), s)
    s = tl.where((q <= 0) & (q == tl.floor(q)), float("inf"), s)
    return tl.where(x == 1, float("inf"), tl.where(x < 1, float("nan"), s)).to(dtype)''',
    f'''
@triton.jit
def _erfcx(x):
    # e^(x^2) erfc(x): below 1 the product, x^2 split into its rounded value and the rounding error
    # (fma) so that e^(x^2) loses no digits; from 1 on Laplace's continued fraction
    # 1 / sqrt(pi) / (x + (1/2) / (x + 1 / (x + (3/2) / (x + ...)))), summed from its far end
    square = x * x
    error = tl.where(square < float("inf"), tl.fma(x, x, -square), 0.0)
    near = tl.exp(square) * (1 + error) * (1 - tl.erf(x))
    f = x
    for k in range({ERFCX_FRACTION_TERMS}, 0, -1):
        f = x + (0.5 * k) / f
    return tl.where(x >= 1, 0.5641895835477563 / f, near)''',
    f'''
@triton.jit
def _erfinv(y):
    # a rational first guess (in y^2 for |y| <= 0.7, else in z = sqrt(-log((1 - |y|) / 2))), then two
    # Newton steps on erf(x) = y; in the tail on |x|, as erfc(|x|) = 1 - |y| (near +-1 erf(x) rounds
    # to +-1: cpp_special.py); +-inf at +-1, NaN beyond
    a = tl.abs(y)
    yy = y * y
    x = y * ({horner(ERFINV_CENTRAL_NUM, "yy")}) / ({horner(ERFINV_CENTRAL_DEN, "yy")})
    z = tl.sqrt(-tl.log((1 - a) / 2))
    m = tl.abs({horner(ERFINV_TAIL_NUM, "z")}) / ({horner(ERFINV_TAIL_DEN, "z")})
    for _ in tl.static_range(2):
        x = x - (tl.erf(x) - y) / (1.1283791670955126 * tl.exp(-x * x))
        m = m - ((1 - a) - _erfcx(m) * tl.exp(-m * m)) / (1.1283791670955126 * tl.exp(-m * m))
    x = tl.where(a <= 0.7, x, tl.where(y < 0, -m, m))
    x = tl.where(a == 1, tl.where(y > 0, float("inf"), -float("inf")), x)
    return tl.where(a > 1, float("nan"), x)''',
    '''
@triton.jit
def _log_ndtr(x):
    # log(erfc(-x / sqrt 2) / 2): through erfcx in the left tail (its e^(t^2) comes out of the log
    # exactly), elsewhere log1p(-erfc(t) / 2) with erfc(t) = e^(-t^2) erfcx(t), exact in relative terms
    t = x * 0.7071067811865476
    left = tl.log(_erfcx(-t) / 2) - t * t
    right = _log1p(-tl.exp(-t * t) * _erfcx(t) / 2)
    return tl.where(x < -1, left, right)''',
    f'''
@triton.jit
def _ndtri(y0):
    # the inverse of the standard normal CDF (Cephes): rational in (y - 1/2) in the middle, and in
    # 1/z with z = sqrt(-2 log y) in the tails (y or 1 - y below e^-2)
    upper = y0 > 0.8646647167633873
    y = tl.where(upper, 1 - y0, y0)
    u = y0 - 0.5
    uu = u * u
    middle = (u + u * (uu * ({horner(NDTRI_P0, "uu")}) / ({horner(NDTRI_Q0, "uu")}))) * 2.5066282746310002
    t = tl.sqrt(-2 * tl.log(y))
    x0 = t - tl.log(t) / t
    z = 1 / t
    near = z * ({horner(NDTRI_P1, "z")}) / ({horner(NDTRI_Q1, "z")})
    far = z * ({horner(NDTRI_P2, "z")}) / ({horner(NDTRI_Q2, "z")})
    x1 = tl.where(t < 8, near, far)
    r = tl.where(y > 0.1353352832366127, middle, tl.where(upper, x0 - x1, x1 - x0))
    r = tl.where(y0 == 0, -float("inf"), tl.where(y0 == 1, float("inf"), r))
    return tl.where((y0 < 0) | (y0 > 1), float("nan"), r)''',
    '''
@triton.jit
def _nextafter(x, y):
    # the neighbour of x towards y: x's bits as an integer, one step away from or towards 0
    x, y = tl.broadcast(x, y)  # (either may be a scalar, a 0-d input)
    if x.dtype.is_fp64():
        bits = x.to(tl.int64, bitcast=True)
        smallest = (bits * 0 + 1).to(tl.float64, bitcast=True)
    else:
        bits = x.to(tl.int32, bitcast=True)
        smallest = (bits * 0 + 1).to(tl.float32, bitcast=True)
    away = (y > x) == (x > 0)
    r = tl.where(away, bits + 1, bits - 1).to(x.dtype, bitcast=True)
    r = tl.where(x == 0, tl.where(y > 0, smallest, -smallest), r)
    r = tl.where(x == y, y, r)
    return tl.where((x != x) | (y != y), x + y, r)''',
    clenshaw("_chebyshev_i0e_a", I0E_A),
    clenshaw("_chebyshev_i0e_b", I0E_B),
    clenshaw("_chebyshev_i1e_a", I1E_A),
    clenshaw("_chebyshev_i1e_b", I1E_B),
    '''
@triton.jit
def _i0e(x):
    # e^-|x| I0(x): a Chebyshev series in x/2 - 2 on [0, 8], one in 32/x - 2 (over sqrt(x)) beyond
    a = tl.abs(x)
    return tl.where(a <= 8, _chebyshev_i0e_a(a / 2 - 2), _chebyshev_i0e_b(32 / a - 2) / tl.sqrt(a))''',
    '''
@triton.jit
def _i1e(x):
    # e^-|x| I1(x), the same way; odd
    a = tl.abs(x)
    r = tl.where(a <= 8, _chebyshev_i1e_a(a / 2 - 2) * a, _chebyshev_i1e_b(32 / a - 2) / tl.sqrt(a))
    return tl.where(x < 0, -r, r)''',
]).strip() + "\n"
