"""torch.special's orthogonal polynomials P_n(x) -- Chebyshev T, U, V, W (and shifted to [0, 1]),
Hermite H and He, Laguerre L, Legendre P -- in C++ and Triton, both rendered from one table.

torch (aten/src/ATen/native/Math.h) reads the degree n as an int64 and computes each the same way:
0 for n < 0; exact values at the ends of the interval (x = +-1); for the Chebyshev kinds with a
large n inside (-1, 1), a closed form in theta = acos(t) (T_n = cos(n theta), ...); otherwise the
three-term recurrence P_{k+1} = step(P_k, P_{k-1}) from P_0 = 1 and P_1 = `first`, stopped early
once a value is NaN. A family below is that recipe's parts, as expressions valid both as C++ and as
Python/Triton (`cos`/`sin` become std:: or tl. ones). Their variables: x; t, the argument (x, or
2x - 1 for the shifted kinds); n, the degree; sign, (-1)^n; theta = acos(t); k, the step (P_k is q
and P_{k-1} is p). The expressions keep torch's order of operations, so float32 rounds as eager.
"""

from __future__ import annotations

import re
from dataclasses import dataclass


@dataclass(frozen=True)
class Family:
    first: str  # P_1
    step: str  # P_{k+1} from q = P_k, p = P_{k-1}
    edges: tuple[tuple[str, str], ...] = ()  # (condition, value) pairs tried in order, after n < 0
    shifted: bool = False  # t = 2x - 1: the polynomial moved from [-1, 1] to [0, 1]
    # for n > closed_from and |t| < 1: closed, or `fallback` where `fallback_when` holds (there the
    # closed form divides by a rounded 0)
    closed_from: int | None = None
    closed: str = ""
    fallback_when: str = ""
    fallback: str = ""
    limit: bool = False  # Hermite: NaN beyond degree 128 (float) or 512 (double), as torch


def _chebyshev(first: str, at_one: str, at_minus_one: str, closed_from: int, closed: str, shifted: bool,
               fallback_when: str = "", fallback: str = "") -> Family:
    # the ends: t = 1 and t = -1, which torch tests as x == 1 and x == 0 for the shifted kinds
    ends = (("x == 1", at_one), ("x == 0" if shifted else "x == -1", at_minus_one))
    return Family(first, "(t + t) * q - p", ends, shifted, closed_from, closed, fallback_when, fallback)


# (U's closed form divides by sin(theta), which is not 0 for any float |t| < 1: no fallback. V's and
# W's denominators round to 0 within a few ulps of t = -1 and t = 1, where torch returns a value
# of its own.)
_U = "sin((n + 1) * theta) / sin(theta)"
_V, _V_WHEN, _V_END = "cos((n + n + 1) * theta / 2) / cos(theta / 2)", "sin(theta / 2) == 1", "sign * (n + n + 1)"
_W, _W_WHEN = "sin((n + n + 1) * theta / 2) / sin(theta / 2)", "cos(theta / 2) == 1"
FAMILIES = {
    **{f"{prefix}chebyshev_polynomial_{kind}": family for shifted, prefix in [(False, ""), (True, "shifted_")]
       for kind, family in [
        ("t", _chebyshev("t", "1", "sign", 6, "cos(n * theta)", shifted)),
        ("u", _chebyshev("t + t", "n + 1", "sign * (n + 1)", 6 if shifted else 8, _U, shifted)),
        ("v", _chebyshev("t + t - 1", "1", _V_END, 6 if shifted else 8, _V, shifted, _V_WHEN, _V_END)),
        # (W's fallback: torch's is 2n + 1 for x > 0, which is every t that reaches it; shifted, (-1)^n)
        ("w", _chebyshev("t + t + 1", "n + n + 1", "sign", 4 if shifted else 8, _W, shifted, _W_WHEN,
                         "sign" if shifted else "n + n + 1")),
    ]},
    "hermite_polynomial_h": Family("x + x", "(x + x) * q - (k + k) * p", limit=True),
    "hermite_polynomial_he": Family("x", "x * q - k * p", limit=True),
    "laguerre_polynomial_l": Family("1 - x", "(((k + k) + (1 - x)) * q - k * p) / (k + 1)", (("x == 0", "1"),)),
    "legendre_polynomial_p": Family("x", "((k + k + 1) * x * q - k * p) / (k + 1)",
                                    (("x == 1", "1"), ("x == -1", "sign"))),
}


def _in(language: str, expr: str) -> str:
    """An expression of the table in C++ ("std::cos(...)") or Triton ("tl.cos(...)")."""
    return re.sub(r"\b(cos|sin)\(", r"std::\1(" if language == "cpp" else r"tl.\1(", expr)


def _uses_sign(f: Family) -> bool:
    return any("sign" in value for _, value in f.edges) or "sign" in f.fallback


def _cpp_helper(name: str, f: Family) -> str:
    lines = [
        f"template <typename T> inline T {name}(T x, T degree) {{",
        "    // the degree as torch reads it, an int64 (NaN, inf and values beyond int64 read as negative)",
        "    const int64_t n = degree == degree && std::abs(degree) < T(9.2e18) ? int64_t(degree) : -1;",
        "    if (n < 0) return 0;",
        f"    const T t = {'x + x - 1' if f.shifted else 'x'};",
    ]
    if _uses_sign(f):
        lines.append("    const int64_t sign = n % 2 == 0 ? 1 : -1;")
    lines += [f"    if ({cond}) return {value};" for cond, value in f.edges]
    if f.closed_from is not None:
        lines += [f"    if (n > {f.closed_from} && std::abs(t) < 1) {{", "        const T theta = std::acos(t);"]
        if f.fallback_when:
            lines.append(f"        if ({_in('cpp', f.fallback_when)}) return {f.fallback};")
        lines += [f"        return {_in('cpp', f.closed)};", "    }"]
    if f.limit:
        lines.append("    if (n > (sizeof(T) == 8 ? 512 : 128)) return T(NAN);")
    lines += [
        "    if (n == 0) return 1;",
        f"    T p = 1, q = {f.first};",
        "    for (int64_t k = 1; k < n && !std::isnan(q); ++k) {",
        f"        T r = {f.step};",
        "        p = q;",
        "        q = r;",
        "    }",
        "    return q;",
        "}",
    ]
    return "\n".join(lines)


def _triton_helper(name: str, f: Family) -> str:
    # every branch computed, picked with tl.where; the recurrence steps while any element of the
    # block still needs it, with the others (and those done) masked
    lines = [
        "@triton.jit",
        f"def _{name}(x, degree):",
        "    # one shape for both (either may be a 0-d scalar, which tl.broadcast does not take in",
        "    # Triton 3.6): picked from themselves by a mask of the sum's shape, bits and all (-0.0 too)",
        "    same = tl.zeros_like(x + degree) == 0",
        "    x, degree = tl.where(same, x, x), tl.where(same, degree, degree)",
        "    n = tl.where((degree == degree) & (tl.abs(degree) < 9.2e18), _trunc(degree), -1.0)",
        f"    t = {'x + x - 1' if f.shifted else 'x'}",
    ]
    if _uses_sign(f):
        lines.append("    sign = tl.where(n - 2 * tl.floor(n / 2) == 0, 1.0, -1.0)")
    lines.append("    direct = (n < 0) | (n == 0)  # elements whose value needs no recurrence")
    lines += [f"    direct = direct | ({cond})" for cond, _ in f.edges]
    if f.closed_from is not None:
        lines += [f"    closed = (n > {f.closed_from}) & (tl.abs(t) < 1)", "    direct = direct | closed"]
    if f.limit:
        lines += ["    beyond = n > (512 if x.dtype.is_fp64() else 128)", "    direct = direct | beyond"]
    lines += [
        f"    p, q = tl.zeros_like(x) + 1, tl.zeros_like(x) + ({f.first})  # (not x * 0: NaN at inf)",
        "    k = 1",
        "    while _any(~direct & (k < n) & (q == q)):",
        "        steps = ~direct & (k < n) & (q == q)",
        f"        r = {f.step}",
        "        p, q = tl.where(steps, q, p), tl.where(steps, r, q)",
        "        k += 1",
        "    r = tl.where(n == 0, 1.0, q)",
    ]
    if f.limit:
        lines.append("    r = tl.where(beyond, float(\"nan\"), r)")
    if f.closed_from is not None:
        lines += ["    theta = _acos(t)", f"    value = {_in('triton', f.closed)}"]
        if f.fallback_when:
            lines.append(f"    value = tl.where({_in('triton', f.fallback_when)}, {f.fallback}, value)")
        lines.append("    r = tl.where(closed, value, r)")
    lines += [f"    r = tl.where({cond}, {value}, r)" for cond, value in reversed(f.edges)]
    lines.append("    return tl.where(n < 0, 0.0, r)")
    return "\n".join(lines)


CPP_TEMPLATES = {name: f"{name}({{0}}, {{1}})" for name in FAMILIES}
TRITON_TEMPLATES = {name: f"_{name}({{0}}, {{1}})" for name in FAMILIES}
CPP_HELPERS = "\n\n".join(_cpp_helper(name, f) for name, f in FAMILIES.items()) + "\n"
TRITON_HELPERS = "\n\n\n".join(_triton_helper(name, f) for name, f in FAMILIES.items()) + "\n"
