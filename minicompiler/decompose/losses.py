"""Loss functions: the loss of each element as a formula, then reduced as `reduction` says.

Every loss here is pointwise followed by one sum, so the whole loss fuses into one reduction
kernel. Formulas follow torch's kernels, including where they clamp (binary_cross_entropy
clamps log to -100 so that log(0) does not give inf).
"""

from __future__ import annotations

import math
from typing import Any

from minicompiler.decompose.pointwise import log1p_exp
from minicompiler.decompose.table import GraphOps, register_decomposition
from minicompiler.ir import Node


def _reduce(ops: GraphOps, loss: Node, reduction: str) -> Node:
    """"none": the elementwise loss; "mean" or "sum" over every element."""
    if reduction == "none":
        return loss
    if reduction == "sum":
        return ops.sum(loss, None, False)
    if reduction == "mean":
        return ops.mean(loss, None, False)
    raise ValueError(f"{reduction!r} is not a valid value for reduction")


@register_decomposition("mse_loss", upcast=True)
def mse_loss(ops: GraphOps, x: Node, y: Node, reduction: str = "mean") -> Node:
    # (x - y)^2
    difference = ops.sub(x, y)
    return _reduce(ops, ops.mul(difference, difference), reduction)


@register_decomposition("l1_loss", upcast=True)
def l1_loss(ops: GraphOps, x: Node, y: Node, reduction: str = "mean") -> Node:
    # |x - y|
    return _reduce(ops, ops.abs(ops.sub(x, y)), reduction)


@register_decomposition("smooth_l1_loss", upcast=True)
def smooth_l1_loss(ops: GraphOps, x: Node, y: Node, reduction: str = "mean", beta: float = 1.0) -> Node:
    # 0.5 d^2 / beta where |d| < beta, else |d| - 0.5 beta
    size = ops.abs(ops.sub(x, y))
    if beta == 0:
        return _reduce(ops, size, reduction)
    quadratic = ops.div(ops.mul(ops.mul(size, size), 0.5), beta)
    return _reduce(ops, ops.where(ops.lt(size, beta), quadratic, ops.sub(size, 0.5 * beta)), reduction)


@register_decomposition("huber_loss", upcast=True)
def huber_loss(ops: GraphOps, x: Node, y: Node, reduction: str = "mean", delta: float = 1.0) -> Node:
    # 0.5 d^2 where |d| < delta, else delta (|d| - 0.5 delta)
    size = ops.abs(ops.sub(x, y))
    linear = ops.mul(ops.sub(size, 0.5 * delta), delta)
    return _reduce(ops, ops.where(ops.lt(size, delta), ops.mul(ops.mul(size, size), 0.5), linear), reduction)


@register_decomposition("soft_margin_loss", upcast=True)
def soft_margin_loss(ops: GraphOps, x: Node, y: Node, reduction: str = "mean") -> Node:
    # log(1 + exp(-y x))
    return _reduce(ops, ops.log1p(ops.exp(ops.neg(ops.mul(x, y)))), reduction)


@register_decomposition("binary_cross_entropy", upcast=True)
def binary_cross_entropy(ops: GraphOps, x: Node, y: Node, weight: Node | None = None,
                         reduction: str = "mean") -> Node:
    # -(y log x + (1 - y) log(1 - x)), each log at least -100 (torch's clamp)
    log_x = ops.maximum(ops.log(x), -100.0)
    log_rest = ops.maximum(ops.log1p(ops.neg(x)), -100.0)
    loss = ops.neg(ops.add(ops.mul(y, log_x), ops.mul(ops.sub(1, y), log_rest)))
    return _reduce(ops, loss if weight is None else ops.mul(loss, weight), reduction)


@register_decomposition("binary_cross_entropy_with_logits", upcast=True)
def binary_cross_entropy_with_logits(ops: GraphOps, x: Node, y: Node, weight: Node | None = None,
                                     reduction: str = "mean", pos_weight: Node | None = None) -> Node:
    # (1 - y) x + (1 + (p - 1) y) log(1 + e^-x), the last written so that it never overflows
    log_sigmoid = log1p_exp(ops, ops.neg(x))
    if pos_weight is not None:
        log_sigmoid = ops.mul(log_sigmoid, ops.add(ops.mul(ops.sub(pos_weight, 1), y), 1))
    loss = ops.add(ops.mul(ops.sub(1, y), x), log_sigmoid)
    return _reduce(ops, loss if weight is None else ops.mul(loss, weight), reduction)


@register_decomposition("kl_div", upcast=True)
def kl_div(ops: GraphOps, x: Node, y: Node, reduction: str = "mean", log_target: bool = False) -> Node:
    # x holds log-probabilities: y (log y - x), 0 where y = 0; or e^y (y - x) with log targets
    if log_target:
        loss = ops.mul(ops.exp(y), ops.sub(y, x))
    else:
        loss = ops.sub(ops.xlogy(y, y), ops.mul(y, x))
    if reduction == "batchmean":  # the sum divided by the batch size
        return ops.div(ops.sum(loss, None, False), x.meta.shape[0] if x.meta.ndim else 1)
    return _reduce(ops, loss, reduction)


@register_decomposition("margin_ranking_loss", upcast=True)
def margin_ranking_loss(ops: GraphOps, x1: Node, x2: Node, y: Node, margin: float = 0.0,
                        reduction: str = "mean") -> Node:
    # max(0, -y (x1 - x2) + margin)
    return _reduce(ops, ops.maximum(ops.add(ops.neg(ops.mul(y, ops.sub(x1, x2))), margin), 0.0), reduction)


@register_decomposition("hinge_embedding_loss", upcast=True)
def hinge_embedding_loss(ops: GraphOps, x: Node, y: Node, margin: float = 1.0, reduction: str = "mean") -> Node:
    # x where y = 1, max(0, margin - x) where y = -1 (torch adds both parts, each masked)
    positive = ops.where(ops.ne(y, -1), x, 0.0)
    negative = ops.where(ops.ne(y, 1), ops.maximum(ops.sub(margin, x), 0.0), 0.0)
    return _reduce(ops, ops.add(positive, negative), reduction)


@register_decomposition("poisson_nll_loss", upcast=True)
def poisson_nll_loss(ops: GraphOps, x: Node, y: Node, log_input: bool = True, full: bool = False,
                     eps: float = 1e-8, reduction: str = "mean") -> Node:
    # e^x - y x with log inputs, else x - y log(x + eps); `full` adds Stirling's approximation of
    # log(y!), y log(y) - y + log(2 pi y) / 2, where y > 1 (torch's masked_fill, as a `where`)
    loss: Any
    if log_input:
        loss = ops.sub(ops.exp(x), ops.mul(y, x))
    else:
        loss = ops.sub(x, ops.mul(y, ops.log(ops.add(x, eps))))
    if full:
        stirling = ops.add(ops.sub(ops.mul(y, ops.log(y)), y), ops.mul(ops.log(ops.mul(y, 2 * math.pi)), 0.5))
        loss = ops.add(loss, ops.where(ops.le(y, 1), 0.0, stirling))
    return _reduce(ops, loss, reduction)
