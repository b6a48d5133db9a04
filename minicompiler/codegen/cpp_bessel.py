"""torch.special's Bessel functions J0, J1, Y0, Y1, K0, K1 (scaled or not), I0, I1, the spherical
j0 and the Airy function Ai in C++, by the algorithms of torch's CPU kernels (aten/src/ATen/native/
Math.h, from Cephes) with the coefficient tables of bessel_coefficients.py.

The helpers join cpp_prelude.HELPERS after cpp_special.py's, whose `polynomial` (Horner's rule),
`chebyshev_series` (chbevl), `bessel_i0e` and `bessel_i1e` they call; none holds a blank line.
"""

from __future__ import annotations

from minicompiler.codegen import bessel_coefficients as c
from minicompiler.codegen.cpp_special import _table

TEMPLATES = {
    "bessel_j0": "bessel_j0({0})", "bessel_j1": "bessel_j1({0})",
    "bessel_y0": "bessel_y0({0})", "bessel_y1": "bessel_y1({0})",
    # torch's I0 and I1 of torch.special are e^|x| times the scaled ones, as torch.i0 and special.i1
    "modified_bessel_i0": "std::exp(std::abs({0})) * bessel_i0e({0})",
    "modified_bessel_i1": "std::exp(std::abs({0})) * bessel_i1e({0})",
    "modified_bessel_k0": "bessel_k({0}, false, false)", "modified_bessel_k1": "bessel_k({0}, true, false)",
    "scaled_modified_bessel_k0": "bessel_k({0}, false, true)",
    "scaled_modified_bessel_k1": "bessel_k({0}, true, true)",
    "spherical_bessel_j0": "spherical_bessel_j0({0})", "airy_ai": "airy_ai({0})",
}


def _tables(*names: str) -> str:
    return "\n".join(_table(name, getattr(c, name)) for name in names)


HELPERS = "\n\n".join([
    _tables("J0_PP", "J0_PQ", "J0_QP", "J0_QQ", "J1_PP", "J1_PQ", "J1_QP", "J1_QQ") + r"""
// J (first kind) or Y (second kind) of order 0 or 1 for x > 5, from the Hankel asymptotic form:
// sqrt(2 / (pi x)) (P cos(x - phase) - Q sin(x - phase)) for J, (P sin + Q cos) for Y, where P and
// Q are rational functions of z = 25 / x^2 (`order1` picks order 1's tables and phase 3 pi/4)
template <typename T> inline T bessel_far(T x, bool order1, bool second_kind) {
    const double *pp = order1 ? J1_PP : J0_PP, *pq = order1 ? J1_PQ : J0_PQ;
    const double *qp = order1 ? J1_QP : J0_QP, *qq = order1 ? J1_QQ : J0_QQ;
    T z = T(25) / (x * x);
    T p = polynomial(z, pp, 7) / polynomial(z, pq, 7);
    T q = T(5) / x * (polynomial(z, qp, 8) / polynomial(z, qq, 7));
    T angle = x - (order1 ? T(2.356194490192344928846982537459627163) : T(0.785398163397448309615660845819875721));
    T wave = second_kind ? p * std::sin(angle) + q * std::cos(angle) : p * std::cos(angle) - q * std::sin(angle);
    return wave * T(0.797884560802865355879892119868763737) / std::sqrt(x);  // sqrt(2 / pi)
}""",
    _tables("J0_RP", "J0_RQ", "J0_ZEROS_SQUARED", "J1_RP", "J1_RQ", "J1_ZEROS_SQUARED") + r"""
// J0, even: near 0 a rational function of x^2 with J0's first two zeros factored out (and 1 - x^2/4
// below 1e-5), beyond 5 the asymptotic form. NaN at +-inf, as torch (cos(inf))
template <typename T> inline T bessel_j0(T x) {
    x = std::abs(x);
    if (x <= 5) {
        if (x < T(1e-5)) return 1 - x * x / 4;
        T z = x * x;
        T zeros = (z - T(J0_ZEROS_SQUARED[0])) * (z - T(J0_ZEROS_SQUARED[1]));
        return zeros * polynomial(z, J0_RP, 4) / polynomial(z, J0_RQ, 8);
    }
    return bessel_far(x, false, false);
}
// J1, odd, the same way
template <typename T> inline T bessel_j1(T x) {
    if (x < 0) return -bessel_j1(-x);
    if (x <= 5) {
        T z = x * x;
        T rational = polynomial(z, J1_RP, 4) / polynomial(z, J1_RQ, 8);
        return rational * x * (z - T(J1_ZEROS_SQUARED[0])) * (z - T(J1_ZEROS_SQUARED[1]));
    }
    return bessel_far(x, true, false);
}""",
    _tables("Y0_YP", "Y0_YQ", "Y1_YP", "Y1_YQ") + r"""
// Y0 and Y1, defined for x > 0 (-inf at 0, NaN below): up to 5 a rational function of x^2 plus
// J's logarithmic part, (2/pi) log(x) J0(x) and (2/pi) (log(x) J1(x) - 1/x); beyond, the asymptotic form
template <typename T> inline T bessel_y0(T x) {
    if (x <= 5) {
        if (x == 0) return T(-INFINITY);
        if (x < 0) return T(NAN);
        T z = x * x;
        return polynomial(z, Y0_YP, 8) / polynomial(z, Y0_YQ, 7) + T(M_2_PI) * std::log(x) * bessel_j0(x);
    }
    return bessel_far(x, false, true);
}
template <typename T> inline T bessel_y1(T x) {
    if (x <= 5) {
        if (x == 0) return T(-INFINITY);
        if (x < 0) return T(NAN);
        T z = x * x;
        T rational = polynomial(z, Y1_YP, 6) / polynomial(z, Y1_YQ, 8);
        return x * rational + T(M_2_PI) * (bessel_j1(x) * std::log(x) - 1 / x);  // (M_2_PI: 2 / pi)
    }
    return bessel_far(x, true, true);
}""",
    _tables("K0_A", "K0_B", "K1_A", "K1_B") + r"""
// K0 and K1 (`order1`), e^x times them when `scaled`: defined for x > 0 (inf at 0, NaN below). Up
// to 2 a Chebyshev series in x^2 - 2 plus I's logarithmic part, -log(x/2) I0(x) or log(x/2) I1(x);
// beyond, e^-x / sqrt(x) times a Chebyshev series in 8/x - 2
template <typename T> inline T bessel_k(T x, bool order1, bool scaled) {
    if (x == 0) return T(INFINITY);
    if (x < 0) return T(NAN);
    if (x <= 2) {
        T log_half = std::log(T(0.5) * x), r;
        if (order1) r = log_half * (std::exp(x) * bessel_i1e(x)) + chebyshev_series(x * x - 2, K1_A, 11) / x;
        else r = chebyshev_series(x * x - 2, K0_A, 10) - log_half * (std::exp(x) * bessel_i0e(x));
        return scaled ? r * std::exp(x) : r;
    }
    T r = chebyshev_series(T(8) / x - 2, order1 ? K1_B : K0_B, 25) / std::sqrt(x);
    return scaled ? r : std::exp(-x) * r;
}""",
    _table("SINC_SERIES", c.SINC_SERIES) + r"""
// the spherical Bessel function j0(x) = sin(x) / x: its Maclaurin series below 1/2, 0 at +-inf
template <typename T> inline T spherical_bessel_j0(T x) {
    if (std::isinf(x)) return 0;
    if (std::abs(x) < T(0.5)) return polynomial(x * x, SINC_SERIES, 7);
    return std::sin(x) / x;
}""",
    _tables("AIRY_AN", "AIRY_AD", "AIRY_AFN", "AIRY_AFD", "AIRY_AGN", "AIRY_AGD") + f"""
// The Airy function Ai, the solution of y'' = x y that decays as x grows: NaN at +-inf, 0 beyond
// 103.892 (it underflows); from 2.09 on a rational function of 1 / zeta times e^-zeta
// (zeta = 2/3 x^(3/2)), below -2.09 an oscillating asymptotic form, between them c1 f - c2 g with
// f, g the power series of the equation's two solutions summed until a term is below epsilon
template <typename T> inline T airy_ai(T x) {{
    const T inv_sqrt_pi = T(5.64189583547756286948e-01);
    if (std::isinf(x)) return T(NAN);
    if (x > T(103.892)) return 0;
    if (x < T(-2.09)) {{
        T zeta = T(-2) * x * std::sqrt(-x) / T(3), z = 1 / zeta, zz = z * z;
        T f = 1 + zz * polynomial(zz, AIRY_AFN, 9) / polynomial(zz, AIRY_AFD, 9);
        T g = z * polynomial(zz, AIRY_AGN, 11) / polynomial(zz, AIRY_AGD, 10);
        T t = zeta + T(0.25) * T(M_PI);
        return inv_sqrt_pi / std::sqrt(std::sqrt(-x)) * (std::sin(t) * f - std::cos(t) * g);
    }}
    if (x >= T(2.09)) {{
        T zeta = T(2) * x * std::sqrt(x) / T(3), w = 1 / zeta;
        T rational = polynomial(w, AIRY_AN, 8) / polynomial(w, AIRY_AD, 8);
        return inv_sqrt_pi * rational / (T(2) * std::sqrt(std::sqrt(x)) * std::exp(zeta));
    }}
    // f = 1 + z/(2 3) + z^2/(2 3 5 6) + ..., g = x (1 + z/(3 4) + z^2/(3 4 6 7) + ...), z = x^3
    T z = x * x * x, f = 1, g = x, m = 1, n = x, t = 1;
    for (T k = 1; t > std::numeric_limits<T>::epsilon(); k += 3) {{
        m = m * z / (k + 1) / (k + 2);
        n = n * z / (k + 2) / (k + 3);
        f += m;
        g += n;
        t = std::abs(m / f);
    }}
    return T({c.AIRY_C1!r}) * f - T({c.AIRY_C2!r}) * g;
}}""",
]).strip() + "\n"
