"""VJP rules of the pointwise primitives: the chain rule, one element at a time.

Every rule maps the output gradient `g` to `g * dy/dx` for each input. Where the result `y`
already holds the derivative (exp, sqrt, tanh, ...) the rule reads `y` rather than
recomputing it, as torch's own formulas do. Broadcasting and dtype are undone afterwards
by `differentiate`, so the rules here are written for same-shape inputs.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from minicompiler.autograd.vjp import Grads, GraphOps, vjp
from minicompiler.ir import Node

# --- unary: the gradient of y = f(x) is g * f'(x) ----------------------------------------
UNARY_RULES: dict[str, Callable[[GraphOps, Node, Node, Node], Node]] = {
    # name:     (ops, g, y, x) -> gradient of x
    "neg": lambda ops, g, y, x: ops.neg(g),  # d/dx -x = -1
    "abs": lambda ops, g, y, x: ops.mul(g, ops.sign(x)),  # d/dx |x| = sign(x)
    "exp": lambda ops, g, y, x: ops.mul(g, y),  # d/dx e^x = e^x
    "log": lambda ops, g, y, x: ops.div(g, x),  # d/dx log(x) = 1/x
    "sqrt": lambda ops, g, y, x: ops.div(g, ops.mul(y, 2)),  # d/dx sqrt(x) = 1 / (2 sqrt(x))
    "rsqrt": lambda ops, g, y, x: ops.mul(g, ops.mul(ops.pow(y, 3), -0.5)),  # d/dx x^-1/2 = -1/2 x^-3/2
    "sin": lambda ops, g, y, x: ops.mul(g, ops.cos(x)),  # d/dx sin(x) = cos(x)
    "cos": lambda ops, g, y, x: ops.neg(ops.mul(g, ops.sin(x))),  # d/dx cos(x) = -sin(x)
    "tan": lambda ops, g, y, x: ops.mul(g, ops.add(ops.mul(y, y), 1)),  # d/dx tan(x) = 1 + tan(x)^2
    "tanh": lambda ops, g, y, x: ops.mul(g, ops.sub(1, ops.mul(y, y))),  # d/dx tanh(x) = 1 - tanh(x)^2
    "sigmoid": lambda ops, g, y, x: ops.mul(g, ops.mul(y, ops.sub(1, y))),  # d/dx sigmoid(x) = y (1 - y)
    # d/dx erf(x) = 2/sqrt(pi) e^(-x^2)
    "erf": lambda ops, g, y, x: ops.mul(g, ops.mul(ops.exp(ops.neg(ops.mul(x, x))), 2 / math.sqrt(math.pi))),
    "log1p": lambda ops, g, y, x: ops.div(g, ops.add(x, 1)),  # d/dx log(1 + x) = 1 / (1 + x)
    "expm1": lambda ops, g, y, x: ops.mul(g, ops.add(y, 1)),  # d/dx (e^x - 1) = e^x
    "reciprocal": lambda ops, g, y, x: ops.neg(ops.mul(g, ops.mul(y, y))),  # d/dx 1/x = -1/x^2
    "clone": lambda ops, g, y, x: g,  # a copy
    "asin": lambda ops, g, y, x: ops.mul(g, ops.rsqrt(ops.sub(1, ops.mul(x, x)))),  # 1 / sqrt(1 - x^2)
    "acos": lambda ops, g, y, x: ops.neg(ops.mul(g, ops.rsqrt(ops.sub(1, ops.mul(x, x))))),  # -1 / sqrt(1 - x^2)
    "atan": lambda ops, g, y, x: ops.div(g, ops.add(ops.mul(x, x), 1)),  # 1 / (1 + x^2)
    "asinh": lambda ops, g, y, x: ops.mul(g, ops.rsqrt(ops.add(ops.mul(x, x), 1))),  # 1 / sqrt(x^2 + 1)
    "acosh": lambda ops, g, y, x: ops.mul(g, ops.rsqrt(ops.sub(ops.mul(x, x), 1))),  # 1 / sqrt(x^2 - 1)
    "atanh": lambda ops, g, y, x: ops.div(g, ops.sub(1, ops.mul(x, x))),  # 1 / (1 - x^2)
    # d/dx erfc(x) = -2/sqrt(pi) e^(-x^2)
    "erfc": lambda ops, g, y, x: ops.mul(g, ops.mul(ops.exp(ops.neg(ops.mul(x, x))), -2 / math.sqrt(math.pi))),
}


def _unary(rule: Callable[[GraphOps, Node, Node, Node], Node]) -> Callable[..., Grads]:
    return lambda ops, g, y, x: (rule(ops, g, y, x),)


for _op, _rule in UNARY_RULES.items():
    vjp(_op)(_unary(_rule))


@vjp("convert")  # a cast: the gradient passes through (`differentiate` casts it back to x's dtype)
def vjp_convert(ops: GraphOps, g: Node, y: Node, x: Node, dtype: Any) -> Grads:
    return (g,)


# --- binary: either side may be a Python scalar (its gradient is dropped) ------------------
@vjp("add")  # d(a + b) = da + db
def vjp_add(ops: GraphOps, g: Node, y: Node, a: Any, b: Any) -> Grads:
    return g, g


@vjp("sub")  # d(a - b) = da - db
def vjp_sub(ops: GraphOps, g: Node, y: Node, a: Any, b: Any) -> Grads:
    return g, ops.neg(g)


@vjp("mul")  # d(a b) = b da + a db
def vjp_mul(ops: GraphOps, g: Node, y: Node, a: Any, b: Any) -> Grads:
    return ops.mul(g, b), ops.mul(g, a)


@vjp("div")  # d(a / b) = da / b - (a / b^2) db = da / b - (y / b) db
def vjp_div(ops: GraphOps, g: Node, y: Node, a: Any, b: Any) -> Grads:
    return ops.div(g, b), ops.neg(ops.div(ops.mul(g, y), b))


@vjp("remainder")  # a mod b = a - b floor(a / b): d/da = 1, d/db = -floor(a / b)
def vjp_remainder(ops: GraphOps, g: Node, y: Node, a: Any, b: Any) -> Grads:
    return g, ops.neg(ops.mul(g, ops.floor(ops.div(a, b))))


@vjp("fmod")  # a - b trunc(a / b): d/da = 1, d/db = -trunc(a / b)
def vjp_fmod(ops: GraphOps, g: Node, y: Node, a: Any, b: Any) -> Grads:
    return g, ops.neg(ops.mul(g, ops.trunc(ops.div(a, b))))


@vjp("atan2")  # atan(a / b): d/da = b / (a^2 + b^2), d/db = -a / (a^2 + b^2)
def vjp_atan2(ops: GraphOps, g: Node, y: Node, a: Any, b: Any) -> Grads:
    scale = ops.div(g, ops.add(ops.mul(a, a), ops.mul(b, b)))
    return ops.mul(scale, b), ops.neg(ops.mul(scale, a))


@vjp("pow")  # d(a^b) = b a^(b-1) da + a^b log(a) db
def vjp_pow(ops: GraphOps, g: Node, y: Node, a: Any, b: Any) -> Grads:
    if not isinstance(b, Node):  # a scalar exponent: the common x**2, x**0.5, ...
        base = None if b == 0 else ops.mul(g, ops.mul(ops.pow(a, b - 1), b))
        return base, None
    if not isinstance(a, Node):  # a scalar base: make it a 0-d tensor for the formula below
        a = ops.full((), a, y.meta.dtype, device=str(y.meta.device))
    # torch's conventions: no gradient to `a` where b == 0, none to `b` where a == 0 and b >= 0
    # (the formulas would give 0 * inf = nan there).
    base = ops.where(ops.eq(b, 0), 0.0, ops.mul(g, ops.mul(b, ops.pow(a, ops.sub(b, 1)))))
    zero_base = ops.logical_and(ops.eq(a, 0), ops.ge(b, 0))
    exponent = ops.where(zero_base, 0.0, ops.mul(g, ops.mul(y, ops.log(a))))
    return base, exponent


def _route_to_winner(ops: GraphOps, g: Node, a: Any, b: Any, beats: str, bounds: str) -> Grads:
    """The gradient of maximum/minimum goes to the input that won. On ties torch splits it
    evenly between two tensors, but passes all of it when the other side is a scalar bound
    (then the op is torch.clamp, whose gradient is g where x >= min, or x <= max)."""
    if not isinstance(a, Node):  # maximum(0.0, x) is maximum(x, 0.0)
        return _route_to_winner(ops, g, b, a, beats, bounds)[::-1]
    if not isinstance(b, Node):
        return ops.where(getattr(ops, bounds)(a, b), g, 0.0), None
    tie, half = ops.eq(a, b), ops.mul(g, 0.5)
    grad_a = ops.where(tie, half, ops.where(getattr(ops, beats)(a, b), g, 0.0))
    grad_b = ops.where(tie, half, ops.where(getattr(ops, beats)(b, a), g, 0.0))
    return grad_a, grad_b


@vjp("maximum")  # d max(a, b) = g to the larger input
def vjp_maximum(ops: GraphOps, g: Node, y: Node, a: Any, b: Any) -> Grads:
    return _route_to_winner(ops, g, a, b, beats="gt", bounds="ge")


@vjp("minimum")  # d min(a, b) = g to the smaller input
def vjp_minimum(ops: GraphOps, g: Node, y: Node, a: Any, b: Any) -> Grads:
    return _route_to_winner(ops, g, a, b, beats="lt", bounds="le")


@vjp("where")  # where(c, a, b): g goes to a where c holds, to b elsewhere; none to c
def vjp_where(ops: GraphOps, g: Node, y: Node, cond: Node, a: Any, b: Any) -> Grads:
    if _relu_of_a_product(cond, a, b):
        # y <= 0 exactly where b <= 0 (y is 0 there, b elsewhere; NaN fails both): the backward
        # reads y, which the next layer's weight gradient reads anyway, and not b. Saved neither,
        # b is then the forward's alone, where cuBLASLt applies the ReLU as it writes the product
        # (replace/addmm_relu.py): a kernel, a buffer and a pass over it fewer per layer
        cond = ops.le(y, 0)
    return None, ops.where(cond, g, 0.0), ops.where(cond, 0.0, g)


def _relu_of_a_product(cond: Node, a: Any, b: Any) -> bool:
    """Is where(cond, a, b) the ReLU where(le(b, 0), 0, b) of a matrix product with a bias?"""
    return (isinstance(b, Node) and b.op == "addmm" and not isinstance(a, Node) and a == 0
            and cond.op == "le" and cond.args == (b, 0) and not cond.kwargs)
