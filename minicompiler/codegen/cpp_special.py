"""The special functions in C++: lgamma's family (digamma, trigamma, Hurwitz zeta), erfinv, the
scaled complementary error function erfcx and log_ndtr, ndtri, and the modified Bessel functions
I0, I1 (scaled or not).

Each follows the algorithm PyTorch's CPU kernel uses (aten/src/ATen/native/Math.h, mostly from
the Cephes library), so a compiled program agrees with eager to rounding, float64 included;
where a function has a <cmath> version (lgamma, erfc, nextafter) the template calls it, as torch
does. Tables of coefficients come from special_coefficients.py. float16/bfloat16 values arrive
as float (codegen computes them in float32, as torch does here too).

The helpers join cpp_prelude.HELPERS: blank lines separate them, so none holds a blank line,
and each may call the prelude's helpers (sign_bit) and the ones above it.
"""

from __future__ import annotations

import textwrap

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

# erfcx(x) = exp(x^2) erfc(x) below this, a continued fraction of this many terms from it on:
# std::erfc is accurate to its last digits until it underflows (x ~ 26), and from 4 on 30 terms
# of the fraction reach float64's precision
ERFCX_FRACTION_FROM = 4.0
ERFCX_FRACTION_TERMS = 30

TEMPLATES = {
    "lgamma": "std::lgamma({0})", "digamma": "digamma({0})", "trigamma": "trigamma({0})",
    "zeta": "hurwitz_zeta({0}, {1})", "erfinv": "erfinv({0})", "erfcx": "erfcx({0})",
    "log_ndtr": "log_ndtr({0})", "ndtri": "ndtri({0})", "nextafter": "std::nextafter({0}, {1})",
    "i0e": "bessel_i0e({0})", "i1e": "bessel_i1e({0})",
    # I0(x) = e^|x| i0e(x), I1(x) = e^|x| i1e(x), as torch computes them
    "i0": "std::exp(std::abs({0})) * bessel_i0e({0})", "i1": "std::exp(std::abs({0})) * bessel_i1e({0})",
}


def _table(name: str, values: tuple[float, ...]) -> str:
    """A coefficient table as a C++ array of doubles (repr: the shortest text that rounds back)."""
    numbers = textwrap.fill(", ".join(repr(v) for v in values), 96, subsequent_indent="    ")
    return f"constexpr double {name}[] = {{\n    {numbers}}};"


HELPERS = "\n\n".join([
    r"""
// Clenshaw's recurrence: the Chebyshev series sum c[k] T_{n-1-k}(y) (Cephes' chbevl, which halves
// the last coefficient), and Horner's rule for a polynomial, both coefficients highest first
template <typename T> inline T chebyshev_series(T y, const double* c, int n) {
    T b0 = c[0], b1 = 0, b2 = 0;
    for (int i = 1; i < n; ++i) {
        b2 = b1;
        b1 = b0;
        b0 = y * b1 - b2 + T(c[i]);
    }
    return T(0.5) * (b0 - b2);
}
template <typename T> inline T polynomial(T z, const double* c, int n) {
    T result = 0;
    for (int i = 0; i < n; ++i) result = result * z + T(c[i]);
    return result;
}""",
    _table("DIGAMMA_SERIES", DIGAMMA_SERIES) + r"""
// digamma (psi, the derivative of lgamma): reflected to x > 0 (psi(x) = psi(1 - x) - pi / tan(pi x),
// tan taken of x's fractional part, in double), pushed up to x >= 10 (psi(x) = psi(x + 1) - 1/x),
// then the asymptotic series. Poles: +-inf at +-0 (from the side of its sign), NaN at -1, -2, ...
template <typename T> inline T digamma(T x) {
    // +-0, told apart by the sign bit: fpclassify, not x == 0, after which -ffast-math (no signed
    // zeros) may take x for +0.0
    if (std::fpclassify(x) == FP_ZERO) return sign_bit(x) ? T(INFINITY) : T(-INFINITY);
    double reflection = 0;
    if (x < 0) {
        if (x == std::trunc(x)) return T(NAN);
        double fraction = double(x) - std::trunc(double(x));
        reflection = M_PI / std::tan(M_PI * fraction);
        x = 1 - x;
    }
    T result = 0;
    while (x < 10) {
        result -= 1 / x;
        x += 1;
    }
    if (x == 10) return result + T(2.25175258906672110764) - T(reflection);  // psi(10), exactly
    T series = 0;
    if (x < T(1e17)) {  // beyond, the series is below the last digit of log(x)
        T z = 1 / (x * x);
        series = z * polynomial(z, DIGAMMA_SERIES, 7);
    }
    return (result + std::log(x) - T(0.5) / x - series) - T(reflection);
}""",
    r"""
// trigamma (polygamma(1, x)): reflected to x >= 1/2 (psi1(x) + psi1(1 - x) = pi^2 / sin^2(pi x)),
// pushed up by 6 (psi1(x) = psi1(x + 1) + 1/x^2), then its asymptotic series
template <typename T> inline T trigamma(T x) {
    T sign = 1, result = 0;
    if (x < T(0.5)) {
        sign = -1;
        T s = std::sin(T(M_PI) * x);
        result -= T(M_PI * M_PI) / (s * s);
        x = 1 - x;
    }
    for (int i = 0; i < 6; ++i) {
        result += 1 / (x * x);
        x += 1;
    }
    T ixx = 1 / (x * x);
    result += (1 + 1 / (2 * x) + ixx * (T(1.0 / 6) - ixx * (T(1.0 / 30) - ixx * T(1.0 / 42)))) / x;
    return sign * result;
}""",
    _table("ZETA_DIVISORS", ZETA_DIVISORS) + r"""
// The Hurwitz zeta function sum_k (k + q)^-x, in double for float too (torch's accumulate type):
// the first terms summed until q + k > 9 (or they stop counting), then the Euler-Maclaurin tail.
// inf at x = 1 and at q = 0, -1, -2, ...; NaN for x < 1, and for q < 0 with x not whole.
template <typename T> inline T hurwitz_zeta(T x_, T q_) {
    const double x = x_, q = q_, epsilon = 1.11022302462515654042e-16;
    if (x == 1) return T(INFINITY);
    if (x < 1) return T(NAN);
    if (q <= 0) {
        if (q == std::floor(q)) return T(INFINITY);
        if (x != std::floor(x)) return T(NAN);
    }
    double s = std::pow(q, -x), a = q, b = 0;
    for (int i = 0; i < 9 || a <= 9; ++i) {
        a += 1;
        b = std::pow(a, -x);
        s += b;
        if (-epsilon * s < b && b < epsilon * s) return T(s);  // (as torch: never while s < 0)
    }
    const double w = a;
    s += b * w / (x - 1) - 0.5 * b;
    double rising = 1, k = 0;  // x (x + 1) ... (x + 2i), a rising factorial
    for (int i = 0; i < 12; ++i) {
        rising *= x + k;
        b /= w;
        double term = rising * b / ZETA_DIVISORS[i];
        s += term;
        if (std::abs(term / s) < epsilon) break;
        k += 1;
        rising *= x + k;
        b /= w;
        k += 1;
    }
    return T(s);
}""",
    "\n".join([_table("ERFINV_CENTRAL_NUM", ERFINV_CENTRAL_NUM), _table("ERFINV_CENTRAL_DEN", ERFINV_CENTRAL_DEN),
               _table("ERFINV_TAIL_NUM", ERFINV_TAIL_NUM), _table("ERFINV_TAIL_DEN", ERFINV_TAIL_DEN)]) + r"""
// The inverse error function: a rational first guess (in y^2 for |y| <= 0.7, else in
// sqrt(-log((1 - |y|) / 2))), then two Newton steps on erf(x) = y; in the tail on |x|, as
// erfc(|x|) = 1 - |y|: near +-1 erf(x) rounds to +-1 and erf(x) - y is rounding noise (float32
// results were 8e-3 off near 0.99999), where 1 - |y| is exact and erfc keeps its digits. +-inf
// at +-1, NaN beyond.
template <typename T> inline T erfinv(T y) {
    T a = std::abs(y);
    if (a > 1) return T(NAN);
    if (a == 1) return y > 0 ? T(INFINITY) : T(-INFINITY);
    const T slope = T(1.12837916709551257390);  // 2 / sqrt(pi): erf'(x) = slope e^(-x^2)
    if (a <= T(0.7)) {
        T z = y * y;
        T x = y * polynomial(z, ERFINV_CENTRAL_NUM, 4) / polynomial(z, ERFINV_CENTRAL_DEN, 5);
        for (int step = 0; step < 2; ++step) x = x - (std::erf(x) - y) / (slope * std::exp(-x * x));
        return x;
    }
    T z = std::sqrt(-std::log((1 - a) / 2));
    T m = polynomial(z, ERFINV_TAIL_NUM, 4) / polynomial(z, ERFINV_TAIL_DEN, 3);  // |x|
    for (int step = 0; step < 2; ++step) m = m - ((1 - a) - std::erfc(m)) / (slope * std::exp(-m * m));
    return std::copysign(m, y);
}""",
    f"""
// erfcx(x) = e^(x^2) erfc(x), which neither overflows nor underflows where the product would:
// below {ERFCX_FRACTION_FROM} the product, with x^2 split into its rounded value and the rounding error (fma)
// so that e^(x^2) loses no digits; from there on Laplace's continued fraction for erfc,
// 1 / sqrt(pi) / (x + (1/2) / (x + 1 / (x + (3/2) / (x + ...)))), summed from its far end
template <typename T> inline T erfcx(T x) {{
    if (x >= T({ERFCX_FRACTION_FROM})) {{
        T f = x;
        for (int k = {ERFCX_FRACTION_TERMS}; k > 0; --k) f = x + T(0.5 * k) / f;
        return T(0.56418958354775628695) / f;  // 1 / sqrt(pi)
    }}
    T square = x * x, error = square < T(INFINITY) ? std::fma(x, x, -square) : T(0);  // (inf - inf: NaN)
    return std::exp(square) * (1 + error) * std::erfc(x);
}}""",
    r"""
// log of the standard normal CDF, log(erfc(-x / sqrt 2) / 2): in the left tail through erfcx (whose
// e^(x^2/2) factor comes out of the log exactly), elsewhere log1p of the small erfc
template <typename T> inline T log_ndtr(T x) {
    T t = x * T(0.70710678118654752440);
    if (x < -1) return std::log(erfcx(-t) / 2) - t * t;
    return std::log1p(-std::erfc(t) / 2);
}""",
    "\n".join(_table(name, values) for name, values in [
        ("NDTRI_P0", NDTRI_P0), ("NDTRI_Q0", NDTRI_Q0), ("NDTRI_P1", NDTRI_P1), ("NDTRI_Q1", NDTRI_Q1),
        ("NDTRI_P2", NDTRI_P2), ("NDTRI_Q2", NDTRI_Q2)]) + r"""
// ndtri, the inverse of the standard normal CDF (Cephes): a rational function of (y - 1/2) in the
// middle, and of 1/z with z = sqrt(-2 log y) in the tails (y or 1 - y below e^-2)
template <typename T> inline T ndtri(T y0) {
    if (y0 == 0) return T(-INFINITY);
    if (y0 == 1) return T(INFINITY);
    if (y0 < 0 || y0 > 1) return T(NAN);
    const T tail = T(0.13533528323661269189);  // e^-2
    bool lower = true;
    T y = y0;
    if (y > 1 - tail) {
        y = 1 - y;
        lower = false;
    }
    if (y > tail) {
        y = y - T(0.5);
        T y2 = y * y;
        return (y + y * (y2 * polynomial(y2, NDTRI_P0, 5) / polynomial(y2, NDTRI_Q0, 9))) * T(2.50662827463100050242);
    }
    T x = std::sqrt(-2 * std::log(y));
    T x0 = x - std::log(x) / x, z = 1 / x;
    T x1 = x < 8 ? z * polynomial(z, NDTRI_P1, 9) / polynomial(z, NDTRI_Q1, 9)
                 : z * polynomial(z, NDTRI_P2, 9) / polynomial(z, NDTRI_Q2, 9);
    return lower ? x1 - x0 : x0 - x1;
}""",
    _table("I0E_A", I0E_A) + "\n" + _table("I0E_B", I0E_B) + r"""
// e^-|x| I0(x), the modified Bessel function of the first kind of order 0 scaled: a Chebyshev
// series in x/2 - 2 on [0, 8], one in 32/x - 2 (over sqrt(x)) beyond; even
template <typename T> inline T bessel_i0e(T x) {
    x = std::abs(x);
    if (x <= 8) return chebyshev_series(x / 2 - 2, I0E_A, 30);
    return chebyshev_series(32 / x - 2, I0E_B, 25) / std::sqrt(x);
}""",
    _table("I1E_A", I1E_A) + "\n" + _table("I1E_B", I1E_B) + r"""
// e^-|x| I1(x), order 1, the same way; odd
template <typename T> inline T bessel_i1e(T x) {
    T a = std::abs(x);
    T r = a <= 8 ? chebyshev_series(a / 2 - 2, I1E_A, 29) * a : chebyshev_series(32 / a - 2, I1E_B, 25) / std::sqrt(a);
    return x < 0 ? -r : r;
}""",
]).strip() + "\n"
