"""Value tests (isnan, isinf, ...), special functions and shrinkers, written as formulas of primitives.

NaN and inf are where these formulas differ from the textbook: each says what torch returns
there and how the formula gets it (`x != x` is the one test that is true exactly for NaN).
"""

from __future__ import annotations

import math
from typing import Any

import torch

from minicompiler.decompose.pointwise import log1p_exp
from minicompiler.decompose.table import GraphOps, register_decomposition
from minicompiler.ir import Node

INF = float("inf")


# --- value tests ---------------------------------------------------------------------------
@register_decomposition("isnan")
def isnan(ops: GraphOps, x: Node) -> Node:
    # NaN is the one value not equal to itself
    return ops.ne(x, x)


@register_decomposition("isinf")
def isinf(ops: GraphOps, x: Node) -> Node:
    return ops.eq(ops.abs(x), INF)


@register_decomposition("isposinf")
def isposinf(ops: GraphOps, x: Node) -> Node:
    return ops.eq(x, INF)


@register_decomposition("isneginf")
def isneginf(ops: GraphOps, x: Node) -> Node:
    return ops.eq(x, -INF)


@register_decomposition("isfinite")
def isfinite(ops: GraphOps, x: Node) -> Node:
    # |x| < inf is false for inf and for NaN (every comparison with NaN is false)
    return ops.lt(ops.abs(x), INF)


@register_decomposition("nan_to_num")
def nan_to_num(ops: GraphOps, x: Node, nan: float | None = 0.0, posinf: float | None = None,
               neginf: float | None = None) -> Node:
    if not x.meta.dtype.is_floating_point:
        return ops.convert(x, x.meta.dtype)  # integers hold no NaN or inf: a copy
    largest = torch.finfo(x.meta.dtype).max  # torch's default replacement for +-inf
    x = ops.where(ops.isnan(x), 0.0 if nan is None else nan, x)
    x = ops.where(ops.isposinf(x), largest if posinf is None else posinf, x)
    return ops.where(ops.isneginf(x), -largest if neginf is None else neginf, x)


# --- special functions ---------------------------------------------------------------------
@register_decomposition("logit", upcast=True)
def logit(ops: GraphOps, x: Node, eps: float | None = None) -> Node:
    # log(x / (1 - x)), x first clamped to [eps, 1 - eps] when eps is given
    if eps is not None:
        x = ops.clamp(x, eps, 1 - eps)
    return ops.log(ops.div(x, ops.sub(1, x)))


@register_decomposition("sinc", upcast=True)
def sinc(ops: GraphOps, x: Node) -> Node:
    # sin(pi x) / (pi x), and 1 at x = 0 (the limit)
    if not x.meta.dtype.is_floating_point:
        x = ops.convert(x, torch.get_default_dtype())
    # at 0 the division runs on 1 instead (a 0/0 there would make the gradient NaN)
    zero = ops.eq(x, 0)
    scaled = ops.mul(ops.where(zero, 1.0, x), math.pi)
    return ops.where(zero, 1.0, ops.div(ops.sin(scaled), scaled))


def _x_times_log(ops: GraphOps, x: Any, y: Any, log: str) -> Node:
    """x * log(y) (or log1p), 0 where x == 0 even if log(y) is -inf, NaN where y is NaN.

    The mask sits on the log, not on the product, and only where the log is not finite: x's
    gradient is then log(y), or 0 where x == 0 and y <= 0 (not 0 * -inf = NaN), and y's is x / y,
    NaN at x == y == 0, as torch's formulas give."""
    log_y = getattr(ops, log)(y)
    finite = ops.lt(ops.abs(log_y), INF)
    product = ops.mul(x, ops.where(ops.eq(x, 0), ops.where(finite, log_y, 0.0), log_y))
    return ops.where(ops.isnan(y), y, product) if isinstance(y, Node) else product


@register_decomposition("xlogy", upcast=True)
def xlogy(ops: GraphOps, x: Any, y: Any) -> Node:
    return _x_times_log(ops, x, y, "log")


@register_decomposition("xlog1py", upcast=True)
def xlog1py(ops: GraphOps, x: Any, y: Any) -> Node:
    return _x_times_log(ops, x, y, "log1p")


@register_decomposition("entr", upcast=True)
def entr(ops: GraphOps, x: Node) -> Node:
    # -x log x for x > 0, 0 at 0, -inf below 0, NaN stays NaN
    negative = ops.where(ops.eq(x, 0), 0.0, ops.where(ops.isnan(x), x, -INF))
    return ops.where(ops.gt(x, 0), ops.neg(ops.mul(x, ops.log(x))), negative)


@register_decomposition("heaviside")
def heaviside(ops: GraphOps, x: Node, values: Node) -> Node:
    # values where x == 0, else 1 for x > 0 and 0 below (and for NaN)
    step = ops.convert(ops.gt(x, 0), x.meta.dtype)
    return ops.where(ops.eq(x, 0), ops.convert(values, x.meta.dtype), step)


def _ignoring_nan(op: str) -> None:
    @register_decomposition(f"f{op[:3]}")
    def decomposition(ops: GraphOps, x: Node, other: Node) -> Node:
        # maximum/minimum, except that a NaN loses to a number (fmax(NaN, 1) = 1)
        both = getattr(ops, op)(x, other)
        return ops.where(ops.isnan(x), other, ops.where(ops.isnan(other), x, both))


_ignoring_nan("maximum")
_ignoring_nan("minimum")


def _log_add_exp(ops: GraphOps, x: Node, other: Node, base: float) -> Node:
    """log_b(b^x + b^y) = max + log_b(1 + b^-|x - y|): never overflows. Equal infinities
    (where x - y is NaN) give that infinity, as torch."""
    larger = ops.maximum(x, other)
    gap = ops.mul(ops.abs(ops.sub(x, other)), -math.log(base))
    formula = ops.add(larger, ops.div(ops.log1p(ops.exp(gap)), math.log(base)))
    return ops.where(ops.logical_and(ops.isinf(x), ops.eq(x, other)), x, formula)


@register_decomposition("logaddexp", upcast=True)
def logaddexp(ops: GraphOps, x: Node, other: Node) -> Node:
    return _log_add_exp(ops, x, other, math.e)


@register_decomposition("logaddexp2", upcast=True)
def logaddexp2(ops: GraphOps, x: Node, other: Node) -> Node:
    return _log_add_exp(ops, x, other, 2.0)


@register_decomposition("float_power")
def float_power(ops: GraphOps, x: Any, exponent: Any) -> Node:
    # pow computed in float64, whatever the inputs' dtypes
    def wide(value: Any) -> Any:
        return ops.convert(value, torch.float64) if isinstance(value, Node) else float(value)

    return ops.pow(wide(x), wide(exponent))


# --- activations and shrinkers --------------------------------------------------------------
@register_decomposition("logsigmoid", upcast=True)
def logsigmoid(ops: GraphOps, x: Node) -> Node:
    # log(1 / (1 + e^-x)) = -log(1 + e^-x)
    return ops.neg(log1p_exp(ops, ops.neg(x)))


@register_decomposition("tanhshrink", upcast=True)
def tanhshrink(ops: GraphOps, x: Node) -> Node:
    return ops.sub(x, ops.tanh(x))


# NaN passes through these three, as in torch's kernels (`|x| <= lambd ? 0 : x`): every test
# below is false for NaN, so NaN takes the branch that returns x (or x -+ lambd)
@register_decomposition("hardshrink")
def hardshrink(ops: GraphOps, x: Node, lambd: float = 0.5) -> Node:
    # 0 inside [-lambd, lambd], else x
    return ops.where(ops.le(ops.abs(x), lambd), 0.0, x)


@register_decomposition("softshrink")
def softshrink(ops: GraphOps, x: Node, lambd: float = 0.5) -> Node:
    # 0 inside [-lambd, lambd], else x moved lambd towards 0
    shrunk = ops.where(ops.gt(x, lambd), ops.sub(x, lambd), ops.add(x, lambd))
    return ops.where(ops.le(ops.abs(x), lambd), 0.0, shrunk)


@register_decomposition("threshold")
def threshold(ops: GraphOps, x: Node, threshold: float, value: float) -> Node:
    # value where x <= threshold, else x
    return ops.where(ops.le(x, threshold), value, x)
