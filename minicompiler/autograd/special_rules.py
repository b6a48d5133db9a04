"""VJP rules of the special-function primitives (lgamma, digamma, erfinv, Bessel I0/I1, ...).

Each is torch's own derivative formula (tools/autograd/derivatives.yaml), written with the
primitives, so gradients agree with eager where the formulas are singular too (i1 at 0).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from minicompiler.autograd.vjp import NOT_DIFFERENTIABLE, Grads, GraphOps, vjp
from minicompiler.ir import Node
from minicompiler.ir.ops import BESSEL_FUNCTIONS, ORTHOGONAL_POLYNOMIALS


def _safe_i1_over_x(ops: GraphOps, x: Node, y: Node, scaled: bool) -> Node:
    """d/dx I1(x) = I0(x) - I1(x) / x (scaled: i0e(x) - i1e(x) (sign(x) + 1/x)); at |x| <= eps the
    division is 0/0, and torch uses the limit 1/2 there (reading x as eps so that no NaN passes)."""
    eps = torch.finfo(x.meta.dtype).eps
    tiny = ops.le(ops.abs(x), eps)
    safe = ops.where(tiny, eps, x)
    if scaled:
        slope = ops.sub(ops.i0e(safe), ops.mul(y, ops.add(ops.sign(safe), ops.reciprocal(safe))))
    else:
        slope = ops.sub(ops.i0(safe), ops.div(y, safe))
    return ops.where(tiny, 0.5, slope)


SPECIAL_RULES = {
    # name:      (ops, g, y, x) -> gradient of x
    "lgamma": lambda ops, g, y, x: ops.mul(g, ops.digamma(x)),  # d lgamma = digamma
    "digamma": lambda ops, g, y, x: ops.mul(g, ops.trigamma(x)),  # d digamma = polygamma(1, .)
    # d trigamma = polygamma(2, x) = -2 zeta(3, x)
    "trigamma": lambda ops, g, y, x: ops.mul(g, ops.mul(ops.zeta(3.0, x), -2.0)),
    # d erfinv(x) = sqrt(pi)/2 e^(erfinv(x)^2)
    "erfinv": lambda ops, g, y, x: ops.mul(g, ops.mul(ops.exp(ops.mul(y, y)), math.sqrt(math.pi) / 2)),
    # d ndtri(x) = sqrt(2 pi) e^(ndtri(x)^2 / 2)
    "ndtri": lambda ops, g, y, x: ops.mul(g, ops.mul(ops.exp(ops.mul(ops.mul(y, y), 0.5)), math.sqrt(2 * math.pi))),
    # d erfcx(x) = 2 x erfcx(x) - 2/sqrt(pi)
    "erfcx": lambda ops, g, y, x: ops.mul(g, ops.sub(ops.mul(ops.mul(x, y), 2.0), 2 / math.sqrt(math.pi))),
    # d log_ndtr(x) = e^(-x^2/2) / sqrt(2 pi) / ndtr(x) = e^-(log_ndtr(x) + x^2/2) / sqrt(2 pi)
    "log_ndtr": lambda ops, g, y, x: ops.mul(
        g, ops.div(ops.exp(ops.neg(ops.add(y, ops.mul(ops.mul(x, x), 0.5)))), math.sqrt(2 * math.pi))),
    "i0": lambda ops, g, y, x: ops.mul(g, ops.i1(x)),  # d I0 = I1
    # d i0e(x) = i1e(x) - sign(x) i0e(x)
    "i0e": lambda ops, g, y, x: ops.mul(g, ops.sub(ops.i1e(x), ops.mul(ops.sign(x), y))),
    "i1": lambda ops, g, y, x: ops.mul(g, _safe_i1_over_x(ops, x, y, scaled=False)),
    "i1e": lambda ops, g, y, x: ops.mul(g, _safe_i1_over_x(ops, x, y, scaled=True)),
}

for _op, _rule in SPECIAL_RULES.items():
    vjp(_op)(lambda ops, g, y, x, rule=_rule: (rule(ops, g, y, x),))


@vjp("zeta")  # d/dq zeta(x, q) = -x zeta(x + 1, q); torch has no derivative in x (none here either)
def vjp_zeta(ops: GraphOps, g: Node, y: Node, x: Any, q: Any) -> Grads:
    if not isinstance(x, Node):  # polygamma's zeta(n + 1, x): a number
        return None, ops.mul(g, ops.mul(ops.zeta(x + 1.0, q), -x))
    return None, ops.mul(g, ops.mul(ops.zeta(ops.add(x, 1.0), q), ops.neg(x)))


@vjp("nextafter")  # a step to the neighbouring float: torch passes the gradient to a as is, none to b
def vjp_nextafter(ops: GraphOps, g: Node, y: Node, a: Node, b: Node) -> Grads:
    return g, ops.mul(g, 0.0)


# torch.special's Bessel J, Y, K (and its own I0, I1), Airy Ai and orthogonal polynomials: torch's
# backward raises "not implemented" for each, so a graph that needs their gradient must not invent
# one. It runs in eager instead, and raises as torch does.
NOT_DIFFERENTIABLE.update(dict.fromkeys(BESSEL_FUNCTIONS + ORTHOGONAL_POLYNOMIALS, "torch has no derivative for it"))
