"""What a generated Triton module starts with: imports, then the helpers its kernels call by name
(triton.py keeps only those). Much of it is math the interpreter (TRITON_INTERPRET=1) cannot take
from libdevice, written with core tl ops so one source runs on the GPU and on the CPU alike.
"""

import re

from minicompiler.codegen import orthogonal_polynomials, triton_bessel, triton_special

HEADERS = """
import triton
import triton.language as tl
"""

# Helpers are separated by two blank lines; DEFINITION finds the name each one defines.
DEFINITION = re.compile(r"^def (\w+)\(", re.MULTILINE)
HELPERS = '''
@triton.jit
def _max_nan(a, b):
    # NaN-propagating max (torch.amax); the combine function of tl.reduce
    return tl.where((a > b) | (a != a), a, b)


@triton.jit
def _min_nan(a, b):
    return tl.where((a < b) | (a != a), a, b)


@triton.jit
def _mul(a, b):
    # torch.prod's combine function (Triton has no tl.prod)
    return a * b


@triton.jit
def _arg_pick(a, a_index, b, b_index, a_beats_b):
    # argmax/argmin's combine: (a, a_index) if a beats b, is NaN where b is not (torch counts NaN
    # beyond every number), or ties b (NaNs tie) at an earlier position; else (b, b_index).
    # With the position in the rule the order of combining does not matter: the first wins.
    a_nan = a != a
    tie = (a == b) | (a_nan & (b != b))
    take_a = a_beats_b | (a_nan & (b == b)) | (tie & (a_index < b_index))
    return tl.where(take_a, a, b), tl.where(take_a, a_index, b_index)


@triton.jit
def _argmax_combine(a, a_index, b, b_index):
    return _arg_pick(a, a_index, b, b_index, a > b)


@triton.jit
def _argmin_combine(a, a_index, b, b_index):
    return _arg_pick(a, a_index, b, b_index, a < b)


@triton.jit
def _add(a, b):
    # cumsum's combine function
    return a + b


@triton.jit
def _cum_pick(a, a_index, b, b_index, b_beats_a):
    # cummax/cummin's combine: the greater of (is NaN, value, position), a total order, so that the
    # combine is commutative too, as tl.reduce assumes (it may swap operands): torch's choice, of
    # equal values the last, and the last NaN once one is met. b_beats_a: b strictly better.
    a_nan = a != a
    b_nan = b != b
    same = (a == b) | (a_nan & b_nan)
    take_b = (b_nan & ~a_nan) | (~a_nan & ~b_nan & b_beats_a) | (same & (b_index > a_index))
    return tl.where(take_b, b, a), tl.where(take_b, b_index, a_index)


@triton.jit
def _cummax_combine(a, a_index, b, b_index):
    return _cum_pick(a, a_index, b, b_index, b > a)


@triton.jit
def _cummin_combine(a, a_index, b, b_index):
    return _cum_pick(a, a_index, b, b_index, b < a)


@triton.jit
def _remainder(a, b):
    # Python's %: the sign of the divisor (Triton's % follows the dividend, like C)
    m = a % b
    return tl.where((m != 0) & ((m < 0) != (b < 0)), m + b, m)


@triton.jit
def _sign(x):
    # (nested tl.where on a value loaded from bfloat16 miscompiled in Triton 3.6 on an H100)
    return (x > 0).to(x.dtype) - (x < 0).to(x.dtype)


@triton.jit
def _trunc(x):
    return tl.where(x < 0, tl.ceil(x), tl.floor(x))


@triton.jit
def _any(mask):
    # is any element set? (a 0-d mask, all a kernel of scalars has, is its own answer: Triton's
    # reductions take blocks only; the `if` is decided when the kernel is compiled)
    if len(mask.shape) == 0:
        return mask
    else:
        return tl.max(mask.to(tl.int32)) > 0


@triton.jit
def _tan(x):
    return tl.sin(x) / tl.cos(x)


@triton.jit
def _expm1(x):
    # Kahan: (u - 1) * x / log(u) cancels the rounding error of u = exp(x) for small x
    u = tl.exp(x)
    um1 = u - 1
    r = tl.where(um1 == 0, x, um1 * x / tl.log(u))
    return tl.where((um1 == -1) | (u == float("inf")), um1, r)


@triton.jit
def _log1p(x):
    # Goldberg: log(u) * x / (u - 1) cancels the rounding error of u = 1 + x
    u = 1 + x
    r = tl.where(u == 1, x, tl.log(u) * x / (u - 1))
    return tl.where(u == float("inf"), u, r)


@triton.jit
def _log_add_exp(a, b):
    # logcumsumexp's combine, log(e^a + e^b) as torch's: the larger plus log1p(e^(smaller - larger)),
    # which cannot overflow; two equal infinities stay what they are (inf - inf would be NaN)
    high = _max_nan(a, b)
    low = _min_nan(a, b)
    same_infinity = (low == high) & (tl.abs(low) == float("inf"))
    return tl.where(same_infinity, a, _log1p(tl.exp(low - high)) + high)


@triton.jit
def _tanh(x):
    # expm1(2x) / (expm1(2x) + 2); beyond 20 tanh is 1 and expm1 would overflow
    e = _expm1(2 * x)
    return tl.where(x > 20, 1.0, e / (e + 2))


@triton.jit
def _pow(a, b):
    # a ** b = 2 ** (b * log2|a|), with C's pow signs: odd integer powers of a negative base are
    # negative, non-integer ones are NaN (but -inf's are inf or 0), and anything to the power 0 is
    # 1, as is 1 to any power and -1 to an infinite one
    r = tl.exp2(b * tl.log2(tl.abs(a)))
    a, b = a + tl.zeros_like(r), b + tl.zeros_like(r)  # a constant exponent (x ** 6.0) as a tensor too
    whole = tl.floor(b) == b
    odd = whole & (tl.abs(b % 2) == 1)
    r = tl.where((a < 0) & odd, -r, r)
    r = tl.where((a < 0) & (a > -float("inf")) & ~whole, float("nan"), r)
    r = tl.where((a == -1) & (tl.abs(b) == float("inf")), 1.0, r)
    return tl.where((b == 0) | (a == 1), 1.0, r)


@triton.jit
def _negative(x):
    # the sign bit, for -0.0 too (1 / -0.0 is -inf)
    return (x < 0) | ((x == 0) & (1 / x < 0))


@triton.jit
def _atan(x):
    # Cephes' atanf: reduce |x| to [0, tan(pi/8)] with atan(x) = pi/2 - atan(1/x) (above tan(3pi/8))
    # or pi/4 + atan((x-1)/(x+1)) (above tan(pi/8)), then an odd polynomial. float32-accurate,
    # float64 inputs too: Triton makes a Python float constant a float32
    a = tl.abs(x)
    big = a > 2.414213562373095
    mid = a > 0.4142135623730950
    z = tl.where(big, -1 / a, tl.where(mid, (a - 1) / (a + 1), a))
    base = tl.where(big, 1.5707963267948966, tl.where(mid, 0.7853981633974483, 0.0))
    zz = z * z
    p = (((0.0805374449538 * zz - 0.138776856032) * zz + 0.199777106478) * zz - 0.333329491539) * zz * z + z
    r = base + p
    return tl.where(_negative(x), -r, r)


@triton.jit
def _atan2(y, x):
    # atan(y / x), moved by pi into the half-plane of x < 0; C's atan2 at zeros and infinities
    r = _atan(y / x)
    ones = tl.zeros_like(r) + 1
    y, x = y * ones, x * ones  # a scalar (a 0-d input) as a block too; -0.0 stays -0.0
    y_neg = _negative(y)
    r = tl.where(_negative(x), tl.where(y_neg, r - 3.141592653589793, r + 3.141592653589793), r)
    zeros = (x == 0) & (y == 0)  # atan2(+-0, +0) = +-0, atan2(+-0, -0) = +-pi
    r = tl.where(zeros, tl.where(_negative(x), tl.where(y_neg, -3.141592653589793, 3.141592653589793), y), r)
    infs = (tl.abs(x) == float("inf")) & (tl.abs(y) == float("inf"))  # the diagonals: +-pi/4, +-3pi/4
    corner = tl.where(x < 0, 2.356194490192345, 0.7853981633974483)
    return tl.where(infs, tl.where(y < 0, -corner, corner), r)


@triton.jit
def _asin(x):
    # atan2(x, sqrt(1 - x^2)), with (1 - x)(1 + x) exact near |x| = 1; NaN beyond it
    return _atan2(x, tl.sqrt((1 - x) * (1 + x)))


@triton.jit
def _acos(x):
    return _atan2(tl.sqrt((1 - x) * (1 + x)), x)


@triton.jit
def _asinh(x):
    # log(a + sqrt(a^2 + 1)) = log1p(a + a^2 / (1 + sqrt(a^2 + 1))), odd; past 2^28, log(2a)
    a = tl.abs(x)
    r = tl.where(a > 268435456.0, tl.log(a) + 0.6931471805599453, _log1p(a + a * a / (1 + tl.sqrt(a * a + 1))))
    return tl.where(x < 0, -r, r)


@triton.jit
def _acosh(x):
    # log(x + sqrt(x^2 - 1)) = log1p(t + sqrt(t (t + 2))) with t = x - 1; past 2^28, log(2x)
    t = x - 1
    return tl.where(x > 268435456.0, tl.log(x) + 0.6931471805599453, _log1p(t + tl.sqrt(t * (t + 2))))


@triton.jit
def _atanh(x):
    # log((1 + a) / (1 - a)) / 2 = log1p(2a / (1 - a)) / 2, odd
    a = tl.abs(x)
    r = 0.5 * _log1p(2 * a / (1 - a))
    return tl.where(x < 0, -r, r)


@triton.jit
def _rint(x):
    # to the nearest integer, halves to the even one (x - floor(x) is exact)
    f = tl.floor(x)
    d = x - f
    odd = (f - 2 * tl.floor(f * 0.5)) != 0
    r = tl.where((d > 0.5) | ((d == 0.5) & odd), f + 1, f)
    return tl.where(r == 0, x * 0, r)  # -0.4 rounds to -0.0, as nearbyint does
'''

# The special functions (lgamma's family, erfinv, Bessel I0/I1, ...) come last: they call the helpers
# above (_pow, _trunc, _negative, _log1p)
HELPERS = HELPERS.rstrip() + "\n\n\n" + triton_special.HELPERS.strip() + "\n"
# then the Bessel J, Y, K and Airy functions (which call its Chebyshev series and _i0e, _i1e) and the
# orthogonal polynomials (which call _trunc and _acos)
HELPERS += "\n\n" + triton_bessel.HELPERS.strip() + "\n\n\n" + orthogonal_polynomials.TRITON_HELPERS.strip() + "\n"
