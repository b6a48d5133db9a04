"""Special functions written with the special-function primitives (lgamma, digamma, trigamma, zeta):
polygamma and the multivariate lgamma. The primitives themselves have no formula in simpler ops;
codegen computes them by torch's algorithms (codegen/cpp_special.py, codegen/triton_special.py).
"""

from __future__ import annotations

import math

from minicompiler.decompose.table import GraphOps, register_decomposition
from minicompiler.ir import Node


@register_decomposition("polygamma", upcast=True)
def polygamma(ops: GraphOps, n: int, x: Node) -> Node:
    # the n-th derivative of digamma: digamma itself, trigamma, and from n = 2 on, as torch computes
    # it, (-1)^(n+1) n! zeta(n + 1, x) (the Hurwitz zeta function, whose derivative in x is the next one)
    if n == 0:
        return ops.digamma(x)
    if n == 1:
        return ops.trigamma(x)
    return ops.mul(ops.zeta(float(n + 1), x), (-1) ** (n + 1) * float(math.factorial(n)))


@register_decomposition("mvlgamma", upcast=True)
def mvlgamma(ops: GraphOps, x: Node, p: int) -> Node:
    # log of the multivariate gamma function: p (p - 1)/4 log(pi) + sum_{i<p} lgamma(x - i/2), summed
    # from the smallest argument up, as torch does. (torch raises unless x > (p - 1)/2 everywhere;
    # a kernel cannot raise, so there it returns what the formula gives: inf or NaN at the poles.)
    total = ops.lgamma(ops.sub(x, (p - 1) / 2)) if p > 1 else ops.lgamma(x)
    for i in reversed(range(p - 1)):
        total = ops.add(total, ops.lgamma(ops.sub(x, i / 2)) if i else ops.lgamma(x))
    return ops.add(total, p * (p - 1) / 4 * math.log(math.pi))
