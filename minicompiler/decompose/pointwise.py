"""Activations and other element-wise composites, written as the formulas they are."""

from __future__ import annotations

import math
from typing import Any

import torch

from minicompiler.decompose.table import GraphOps, register_decomposition
from minicompiler.ir import Node


# Autograd differentiates these formulas (it runs after decompose), so a formula must have
# torch's gradient too: at a kink (relu's at 0 is 0; maximum(x, 0) would pass g, as clamp does)
# and where a part of it overflows (0 * inf is NaN). Comparisons and `where` say which side of a
# kink a point belongs to; NaN fails every comparison, so it takes the branch that returns x.
@register_decomposition("relu")
def relu(ops: GraphOps, x: Node) -> Node:
    # 0 where x <= 0, else x
    return ops.where(ops.le(x, 0), 0, x)


def log1p_exp(ops: GraphOps, z: Node) -> Node:
    """log(1 + e^z), finite with a finite gradient for every z: z + log1p(e^-z) for z > 0, else
    log1p(e^z). Each branch reads z clamped to its own side, so the branch `where` drops cannot
    overflow either (its zero gradient times inf would be NaN)."""
    above = ops.add(z, ops.log1p(ops.exp(ops.neg(ops.maximum(z, 0)))))
    return ops.where(ops.gt(z, 0), above, ops.log1p(ops.exp(ops.minimum(z, 0))))


@register_decomposition("gelu", upcast=True)
def gelu(ops: GraphOps, x: Node, approximate: str = "none") -> Node:
    if approximate == "tanh":
        # x/2 * (1 + tanh(sqrt(2/pi) * (x + 0.044715 * x^3)))
        cube = ops.mul(ops.mul(x, x), x)
        inner = ops.mul(ops.add(x, ops.mul(cube, 0.044715)), math.sqrt(2 / math.pi))
        return ops.mul(ops.mul(x, 0.5), ops.add(ops.tanh(inner), 1))
    # x/2 * (1 + erf(x / sqrt(2)))
    return ops.mul(ops.mul(x, 0.5), ops.add(ops.erf(ops.mul(x, 1 / math.sqrt(2))), 1))


@register_decomposition("silu", upcast=True)
def silu(ops: GraphOps, x: Node) -> Node:
    # x * sigmoid(x)
    return ops.mul(x, ops.sigmoid(x))


@register_decomposition("softplus", upcast=True)
def softplus(ops: GraphOps, x: Node, beta: float = 1.0, threshold: float = 20.0) -> Node:
    # log(1 + exp(beta*x)) / beta, or just x where beta*x > threshold (softplus(x) == x to
    # working precision)
    scaled = ops.mul(x, beta)
    return ops.where(ops.gt(scaled, threshold), x, ops.div(log1p_exp(ops, scaled), beta))


@register_decomposition("leaky_relu")
def leaky_relu(ops: GraphOps, x: Node, negative_slope: float = 0.01) -> Node:
    # x if x > 0 else slope * x
    return ops.where(ops.gt(x, 0), x, ops.mul(x, negative_slope))


@register_decomposition("clamp")
def clamp(ops: GraphOps, x: Node, min: Any = None, max: Any = None) -> Node:
    # min(max(x, lo), hi); either bound may be missing
    if min is not None:
        x = ops.maximum(x, min)
    if max is not None:
        x = ops.minimum(x, max)
    return x


@register_decomposition("hardtanh")
def hardtanh(ops: GraphOps, x: Node, min_val: float = -1.0, max_val: float = 1.0) -> Node:
    # clamp(x, min_val, max_val), with no gradient at the bounds themselves (clamp passes it)
    if not x.meta.dtype.is_floating_point:
        return ops.clamp(x, min_val, max_val)
    return ops.where(ops.le(x, min_val), min_val, ops.where(ops.ge(x, max_val), max_val, x))


@register_decomposition("square")
def square(ops: GraphOps, x: Node) -> Node:
    # x * x  (torch squares booleans as int64: True*True would stay bool)
    if x.meta.dtype == torch.bool:
        x = ops.convert(x, torch.int64)
    return ops.mul(x, x)


@register_decomposition("addcmul", upcast=True)
def addcmul(ops: GraphOps, x: Node, a: Node, b: Node, value: float = 1) -> Node:
    # x + value * a * b   (in torch's order of operations, so rounding matches)
    return ops.add(x, ops.mul(ops.mul(a, value), b))


@register_decomposition("lerp", upcast=True)
def lerp(ops: GraphOps, start: Node, end: Node, weight: Any) -> Node:
    # start + weight * (end - start). Like torch, for |weight| >= 0.5 compute it from the
    # other end, end - (1 - weight) * (end - start), which is exact at weight == 1.
    delta = ops.sub(end, start)

    def from_start() -> Node:
        return ops.add(start, ops.mul(delta, weight))

    def from_end() -> Node:
        rest = ops.sub(1, weight) if isinstance(weight, Node) else 1 - weight
        return ops.sub(end, ops.mul(delta, rest))

    if not isinstance(weight, Node):  # a Python number: pick the formula now
        return from_start() if abs(weight) < 0.5 else from_end()
    return ops.where(ops.lt(ops.abs(weight), 0.5), from_start(), from_end())


# --- special functions written with the primitives codegen already has --------------------
@register_decomposition("sinh", upcast=True)
def sinh(ops: GraphOps, x: Node) -> Node:
    # (e^x - e^-x) / 2, through expm1 so that small x keeps its digits
    return ops.mul(ops.sub(ops.expm1(x), ops.expm1(ops.neg(x))), 0.5)


@register_decomposition("cosh", upcast=True)
def cosh(ops: GraphOps, x: Node) -> Node:
    # (e^x + e^-x) / 2
    return ops.mul(ops.add(ops.exp(x), ops.exp(ops.neg(x))), 0.5)


@register_decomposition("exp2", upcast=True)
def exp2(ops: GraphOps, x: Node) -> Node:
    # 2^x = e^(x ln 2)
    return ops.exp(ops.mul(x, math.log(2)))


@register_decomposition("log2", upcast=True)
def log2(ops: GraphOps, x: Node) -> Node:
    # ln x / ln 2
    return ops.mul(ops.log(x), 1 / math.log(2))


@register_decomposition("log10", upcast=True)
def log10(ops: GraphOps, x: Node) -> Node:
    # ln x / ln 10
    return ops.mul(ops.log(x), 1 / math.log(10))


@register_decomposition("frac")
def frac(ops: GraphOps, x: Node) -> Node:
    # x - trunc(x): the fraction keeps the sign of x
    return ops.sub(x, ops.trunc(x))


@register_decomposition("hypot", upcast=True)
def hypot(ops: GraphOps, x: Node, other: Node) -> Node:
    # sqrt(x^2 + y^2)
    return ops.sqrt(ops.add(ops.mul(x, x), ops.mul(other, other)))


@register_decomposition("logical_xor")
def logical_xor(ops: GraphOps, x: Node, other: Node) -> Node:
    # (x != 0) != (y != 0)
    return ops.ne(ops.ne(x, 0), ops.ne(other, 0))


@register_decomposition("deg2rad")
def deg2rad(ops: GraphOps, x: Node) -> Node:
    return ops.mul(x, math.pi / 180)


@register_decomposition("rad2deg")
def rad2deg(ops: GraphOps, x: Node) -> Node:
    return ops.mul(x, 180 / math.pi)


# --- more activations --------------------------------------------------------------------
@register_decomposition("softsign", upcast=True)
def softsign(ops: GraphOps, x: Node) -> Node:
    # x / (1 + |x|)
    return ops.div(x, ops.add(ops.abs(x), 1))


@register_decomposition("hardsigmoid", upcast=True)
def hardsigmoid(ops: GraphOps, x: Node) -> Node:
    # clamp(x/6 + 1/2, 0, 1), with no gradient at x = -3 and 3
    return ops.hardtanh(ops.add(ops.div(x, 6), 0.5), 0.0, 1.0)


@register_decomposition("hardswish", upcast=True)
def hardswish(ops: GraphOps, x: Node) -> Node:
    # x * clamp(x + 3, 0, 6) / 6: 0 up to x = -3, x from x = 3 on (gradients 0 and 1 there)
    cubic = ops.div(ops.mul(x, ops.add(x, 3)), 6)
    return ops.where(ops.le(x, -3), 0.0, ops.where(ops.ge(x, 3), x, cubic))


@register_decomposition("mish", upcast=True)
def mish(ops: GraphOps, x: Node) -> Node:
    # x * tanh(softplus(x))
    return ops.mul(x, ops.tanh(ops.softplus(x)))


@register_decomposition("elu", upcast=True)
def elu(ops: GraphOps, x: Node, alpha: float = 1.0) -> Node:
    # x if x > 0 else alpha * (e^x - 1)
    return ops.where(ops.gt(x, 0), x, ops.mul(ops.expm1(x), alpha))


@register_decomposition("celu", upcast=True)
def celu(ops: GraphOps, x: Node, alpha: float = 1.0) -> Node:
    # x if x > 0 else alpha * (e^(x/alpha) - 1)
    return ops.where(ops.gt(x, 0), x, ops.mul(ops.expm1(ops.div(x, alpha)), alpha))


@register_decomposition("selu", upcast=True)
def selu(ops: GraphOps, x: Node) -> Node:
    # scale * elu(x, alpha) with the self-normalising constants of Klambauer et al. (2017)
    alpha, scale = 1.6732632423543772848170429916717, 1.0507009873554804934193349852946
    return ops.mul(ops.elu(x, alpha), scale)
