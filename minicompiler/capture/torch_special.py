"""torch's special functions (lgamma, digamma, polygamma, erfinv, Bessel I0/I1, zeta, ...) lowered to
the special-function primitives, which codegen computes by torch's own algorithms, and to formulas
of them (decompose/special_functions.py). Same conventions as `torch_ops.py`.

A form these lowerings do not cover (a Python number where a tensor is expected, complex numbers,
nextafter in half precision) stays whole: an extern call, run by torch.
"""

from __future__ import annotations

from typing import Any

import torch

from minicompiler.capture.torch_ops import Lowering, extern, lowers
from minicompiler.ir import Graph, Node
from minicompiler.ir.ops import BESSEL_FUNCTIONS, ORTHOGONAL_POLYNOMIALS


def _real(x: Any) -> bool:
    return isinstance(x, Node) and not x.meta.dtype.is_complex


def _unary(op: str, fn: Any) -> Lowering:
    return lambda g, x: g.call(op, x) if _real(x) else extern(g, fn, x)


# op -> the torch functions that compute it, and the tensor methods
UNARY: dict[str, tuple[list[Any], list[str]]] = {
    "lgamma": ([torch.lgamma, torch.special.gammaln], ["lgamma"]),
    "digamma": ([torch.digamma, torch.special.digamma, torch.special.psi], ["digamma"]),
    "erfinv": ([torch.erfinv, torch.special.erfinv], ["erfinv"]),
    "i0": ([torch.i0, torch.special.i0], ["i0"]),
    "i0e": ([torch.special.i0e], []),
    "i1": ([torch.special.i1], []),
    "i1e": ([torch.special.i1e], []),
    "erfcx": ([torch.special.erfcx], []),
    "log_ndtr": ([torch.special.log_ndtr], []),
    "ndtri": ([torch.special.ndtri], []),
}
for _op, (_fns, _methods) in UNARY.items():
    lowers(*_fns, methods=_methods)(_unary(_op, _fns[0]))


@lowers(torch.polygamma, torch.special.polygamma)
def polygamma(g: Graph, n: Any, x: Any) -> Node:
    # n is a Python int (torch's signature); a negative one is torch's error to raise
    if not (isinstance(n, int) and n >= 0 and _real(x)):
        return extern(g, torch.polygamma, n, x)
    return g.call("polygamma", n, x)


lowers(methods=["polygamma"])(lambda g, x, n: polygamma(g, n, x))  # x.polygamma(n): the tensor first


@lowers(torch.mvlgamma, torch.special.multigammaln, methods=["mvlgamma"])
def mvlgamma(g: Graph, x: Any, p: Any) -> Node:
    if not (isinstance(p, int) and p >= 1 and isinstance(x, Node) and x.meta.dtype.is_floating_point):
        return extern(g, torch.mvlgamma, x, p)
    return g.call("mvlgamma", x, p)


@lowers(torch.special.zeta)
def zeta(g: Graph, x: Any, q: Any) -> Node:
    # the Hurwitz zeta function; either argument may be a Python number, not both
    if not (_real(x) or _real(q)) or any(isinstance(a, Node) and a.meta.dtype.is_complex for a in (x, q)):
        return extern(g, torch.special.zeta, x, q)
    return g.call("zeta", x, q)


@lowers(torch.nextafter, methods=["nextafter"])
def nextafter(g: Graph, x: Any, other: Any) -> Node:
    # the step to the next float of the dtype itself: float16/bfloat16 cannot be computed in
    # float32 as other ops are (the next float32 rounds back to x), so those stay torch calls
    precise = (torch.float32, torch.float64)
    if not (isinstance(x, Node) and isinstance(other, Node) and x.meta.dtype in precise
            and other.meta.dtype == x.meta.dtype):
        return extern(g, torch.nextafter, x, other)
    return g.call("nextafter", x, other)


# torch.special's Bessel and Airy functions (a tensor x) and orthogonal polynomials (x and a degree n,
# either a tensor or a number): primitives of their own. Eager has no float16/bfloat16 kernel for them
# (it raises), and integers and bools become the default float type, as torch.special.i0's do.
def _exact_kernel(*args: Any) -> bool:
    tensors = [a for a in args if isinstance(a, Node)]
    return bool(tensors) and all(isinstance(a, Node | int | float) and not isinstance(a, bool) for a in args) and all(
        not t.meta.dtype.is_complex and t.meta.dtype not in (torch.float16, torch.bfloat16) for t in tensors)


def _bessel(op: str) -> Lowering:
    fn = getattr(torch.special, op)
    return lambda g, x: g.call(op, x) if _exact_kernel(x) else extern(g, fn, x)


def _polynomial(op: str) -> Lowering:
    fn = getattr(torch.special, op)
    return lambda g, x, n: g.call(op, x, n) if _exact_kernel(x, n) else extern(g, fn, x, n)


for _op in BESSEL_FUNCTIONS:
    lowers(getattr(torch.special, _op))(_bessel(_op))
for _op in ORTHOGONAL_POLYNOMIALS:
    lowers(getattr(torch.special, _op))(_polynomial(_op))
