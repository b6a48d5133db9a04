"""torch.special's Bessel functions J0, J1, Y0, Y1, K0, K1 (scaled or not), I0, I1, the spherical
j0 and the Airy function Ai in Triton: the algorithms of cpp_bessel.py (torch's), with the tables of
bessel_coefficients.py, written with core `tl` ops (see triton_special.py): each branch computed
for the whole block and picked with tl.where, a series summed a fixed number of times.

The helpers join triton_prelude.HELPERS after triton_special.py's, whose _i0e and _i1e they call.
"""

from __future__ import annotations

from minicompiler.codegen import bessel_coefficients as c
from minicompiler.codegen.triton_special import clenshaw, horner

AIRY_SERIES_TERMS = 12  # for |x| < 2.09 the 12th terms of Ai's two series are below 1e-20 of the sum

TEMPLATES = {
    "bessel_j0": "_bessel_j0({0})", "bessel_j1": "_bessel_j1({0})",
    "bessel_y0": "_bessel_y0({0})", "bessel_y1": "_bessel_y1({0})",
    "modified_bessel_i0": "tl.exp(tl.abs({0})) * _i0e({0})",
    "modified_bessel_i1": "tl.exp(tl.abs({0})) * _i1e({0})",
    "modified_bessel_k0": "_bessel_k({0}, False, False)", "modified_bessel_k1": "_bessel_k({0}, True, False)",
    "scaled_modified_bessel_k0": "_bessel_k({0}, False, True)",
    "scaled_modified_bessel_k1": "_bessel_k({0}, True, True)",
    "spherical_bessel_j0": "_spherical_bessel_j0({0})", "airy_ai": "_airy_ai({0})",
}


def _far(order: int) -> str:
    """J and Y of this order for x > 5: the Hankel asymptotic form's P and Q, and the angle."""
    pp, pq, qp, qq = (getattr(c, f"J{order}_{part}") for part in ("PP", "PQ", "QP", "QQ"))
    phase = ["0.7853981633974483", "2.356194490192345"][order]  # pi/4, 3 pi/4
    return f'''
@triton.jit
def _bessel_far{order}(x):
    # sqrt(2 / (pi x)) (P cos(angle) - Q sin(angle)) is J{order}, (P sin + Q cos) is Y{order}; this returns
    # P and Q times sqrt(2 / (pi x)), and the angle x - phase
    z = 25 / (x * x)
    p = ({horner(pp, "z")}) / ({horner(pq, "z")})
    q = 5 / x * (({horner(qp, "z")}) / ({horner(qq, "z")}))
    scale = 0.7978845608028654 / tl.sqrt(x)
    return p * scale, q * scale, x - {phase}'''


HELPERS = "\n\n\n".join([
    _far(0),
    _far(1),
    f'''
@triton.jit
def _bessel_j0(x):
    # even: a rational function of x^2 with J0's first two zeros factored out up to 5 (1 - x^2/4
    # below 1e-5), the asymptotic form beyond
    a = tl.abs(x)
    z = a * a
    zeros = (z - {c.J0_ZEROS_SQUARED[0]!r}) * (z - {c.J0_ZEROS_SQUARED[1]!r})
    near = zeros * ({horner(c.J0_RP, "z")}) / ({horner(c.J0_RQ, "z")})
    near = tl.where(a < 1e-5, 1 - z / 4, near)
    p, q, angle = _bessel_far0(a)
    return tl.where(a <= 5, near, p * tl.cos(angle) - q * tl.sin(angle))''',
    f'''
@triton.jit
def _bessel_j1(x):
    # odd, the same way
    a = tl.abs(x)
    z = a * a
    rational = ({horner(c.J1_RP, "z")}) / ({horner(c.J1_RQ, "z")})
    near = rational * a * (z - {c.J1_ZEROS_SQUARED[0]!r}) * (z - {c.J1_ZEROS_SQUARED[1]!r})
    p, q, angle = _bessel_far1(a)
    r = tl.where(a <= 5, near, p * tl.cos(angle) - q * tl.sin(angle))
    return tl.where(x < 0, -r, r)''',
    f'''
@triton.jit
def _bessel_y0(x):
    # for x > 0: up to 5 a rational function of x^2 plus (2/pi) log(x) J0(x); the asymptotic form beyond
    z = x * x
    near = ({horner(c.Y0_YP, "z")}) / ({horner(c.Y0_YQ, "z")}) + 0.6366197723675814 * tl.log(x) * _bessel_j0(x)
    p, q, angle = _bessel_far0(x)
    r = tl.where(x <= 5, near, p * tl.sin(angle) + q * tl.cos(angle))
    return tl.where(x == 0, -float("inf"), tl.where(x < 0, float("nan"), r))''',
    f'''
@triton.jit
def _bessel_y1(x):
    # for x > 0: up to 5 x times a rational function of x^2 plus (2/pi) (log(x) J1(x) - 1/x)
    z = x * x
    rational = ({horner(c.Y1_YP, "z")}) / ({horner(c.Y1_YQ, "z")})
    near = x * rational + 0.6366197723675814 * (_bessel_j1(x) * tl.log(x) - 1 / x)
    p, q, angle = _bessel_far1(x)
    r = tl.where(x <= 5, near, p * tl.sin(angle) + q * tl.cos(angle))
    return tl.where(x == 0, -float("inf"), tl.where(x < 0, float("nan"), r))''',
    clenshaw("_chebyshev_k0_a", c.K0_A),
    clenshaw("_chebyshev_k0_b", c.K0_B),
    clenshaw("_chebyshev_k1_a", c.K1_A),
    clenshaw("_chebyshev_k1_b", c.K1_B),
    '''
@triton.jit
def _bessel_k(x, order1: tl.constexpr, scaled: tl.constexpr):
    # K0 or K1 (times e^x if scaled), for x > 0: up to 2 a Chebyshev series in x^2 - 2 plus the
    # logarithmic part -log(x/2) I0(x) or log(x/2) I1(x); beyond, e^-x / sqrt(x) times one in 8/x - 2
    log_half = tl.log(0.5 * x)
    if order1:
        near = log_half * (tl.exp(x) * _i1e(x)) + _chebyshev_k1_a(x * x - 2) / x
        far = _chebyshev_k1_b(8 / x - 2) / tl.sqrt(x)
    else:
        near = _chebyshev_k0_a(x * x - 2) - log_half * (tl.exp(x) * _i0e(x))
        far = _chebyshev_k0_b(8 / x - 2) / tl.sqrt(x)
    if scaled:
        near = near * tl.exp(x)
    else:
        far = tl.exp(-x) * far
    r = tl.where(x <= 2, near, far)
    return tl.where(x == 0, float("inf"), tl.where(x < 0, float("nan"), r))''',
    f'''
@triton.jit
def _spherical_bessel_j0(x):
    # sin(x) / x: its Maclaurin series below 1/2, 0 at +-inf
    z = x * x
    r = tl.where(tl.abs(x) < 0.5, {horner(c.SINC_SERIES, "z")}, tl.sin(x) / x)
    return tl.where(tl.abs(x) == float("inf"), 0.0, r)''',
    f'''
@triton.jit
def _airy_ai(x):
    # below -2.09 an oscillating asymptotic form in zeta = 2/3 |x|^(3/2), from 2.09 on e^-zeta times a
    # rational function of 1/zeta, between them c1 f - c2 g, the power series of y'' = x y's solutions
    a = tl.abs(x)
    zeta = 2 * a * tl.sqrt(a) / 3
    w = 1 / zeta
    ww = w * w
    sin_part = 1 + ww * ({horner(c.AIRY_AFN, "ww")}) / ({horner(c.AIRY_AFD, "ww")})
    cos_part = w * ({horner(c.AIRY_AGN, "ww")}) / ({horner(c.AIRY_AGD, "ww")})
    t = zeta + 0.7853981633974483
    left = 0.5641895835477563 / tl.sqrt(tl.sqrt(a)) * (tl.sin(t) * sin_part - tl.cos(t) * cos_part)
    rational = ({horner(c.AIRY_AN, "w")}) / ({horner(c.AIRY_AD, "w")})
    right = 0.5641895835477563 * rational / (2 * tl.sqrt(tl.sqrt(a)) * tl.exp(zeta))
    # f = 1 + z/(2 3) + z^2/(2 3 5 6) + ..., g = x (1 + z/(3 4) + z^2/(3 4 6 7) + ...), z = x^3
    z = x * x * x
    m, n = tl.zeros_like(x) + 1, x
    f, g = m, n
    for j in tl.static_range({AIRY_SERIES_TERMS}):
        m = m * z / (3 * j + 2) / (3 * j + 3)
        n = n * z / (3 * j + 3) / (3 * j + 4)
        f, g = f + m, g + n
    r = tl.where(x < -2.09, left, tl.where(x >= 2.09, right, {c.AIRY_C1!r} * f - {c.AIRY_C2!r} * g))
    r = tl.where(x > 103.892, 0.0, r)
    return tl.where(a == float("inf"), float("nan"), r)''',
]).strip() + "\n"
