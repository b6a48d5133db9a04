"""Losses built on a per-sample reduction (a cosine, a distance, a sum over classes), written at
capture with the ops torch's own kernels use, in the same order: cosine_embedding_loss,
triplet_margin_loss and multilabel_soft_margin_loss; and gaussian_nll_loss, whose Python in torch
reads its input's values. The per-element losses of `torch_formulas.py` (mse_loss, ...) are
single decompositions instead (decompose/losses.py). (triplet_margin_with_distance_loss is read
as Python, its distance function inlined: see TRACED_TORCH_FUNCTIONS in objects.py.)

Same conventions as `torch_ops.py`: real floating inputs (of any target) are lowered, anything
else (and a legacy `size_average`/`reduce`) stays a torch call.
"""

from __future__ import annotations

import math
from typing import Any

import torch.nn.functional as F

from minicompiler.capture.errors import Unsupported
from minicompiler.capture.torch_formulas import pairwise_distance
from minicompiler.capture.torch_ops import extern, lowers
from minicompiler.ir import Graph, Node

EPSILON = 1e-12  # torch's, added to each squared magnitude of cosine_embedding_loss


def _real_floats(*values: Any) -> bool:
    return all(isinstance(v, Node) and v.meta.dtype.is_floating_point for v in values)


def _reduce(g: Graph, loss: Node, reduction: str) -> Node:
    """"none": each sample's loss; "mean" or "sum" over all of them."""
    if reduction == "none":
        return loss
    dims = tuple(range(loss.meta.ndim))
    if reduction in ("mean", "sum"):
        return g.call(reduction, loss, dims, False)
    raise ValueError(f"{reduction!r} is not a valid value for reduction")


@lowers(F.cosine_embedding_loss)
def cosine_embedding_loss(g: Graph, x1: Any, x2: Any, target: Any, margin: float = 0, size_average: Any = None,
                          reduce: Any = None, reduction: str = "mean") -> Node:
    # 1 - cos where target is 1, max(0, cos - margin) where it is -1, 0 elsewhere; the cosine
    # over the last dim is x1.x2 / sqrt((|x1|^2 + eps)(|x2|^2 + eps))
    if not (_real_floats(x1, x2) and isinstance(target, Node) and size_average is None and reduce is None
            and x1.meta.ndim == x2.meta.ndim == target.meta.ndim + 1 <= 2):  # (torch raises otherwise)
        return extern(g, F.cosine_embedding_loss, x1, x2, target, margin, size_average, reduce, reduction)
    dim = (target.meta.ndim,)

    def sum_of_products(a: Node, b: Node) -> Node:
        return g.call("sum", g.call("mul", a, b), dim, False)

    squares = g.call("mul", g.call("add", sum_of_products(x1, x1), EPSILON), g.call("add", sum_of_products(x2, x2),
                                                                                     EPSILON))
    cos = g.call("div", sum_of_products(x1, x2), g.call("sqrt", squares))
    positive = g.call("where", g.call("eq", target, 1), g.call("sub", 1, cos), 0)
    negative = g.call("where", g.call("eq", target, -1), g.call("clamp", g.call("sub", cos, margin), 0, None), 0)
    return _reduce(g, g.call("add", positive, negative), reduction)


@lowers(F.triplet_margin_loss)
def triplet_margin_loss(g: Graph, anchor: Any, positive: Any, negative: Any, margin: float = 1.0, p: float = 2,
                        eps: float = 1e-6, swap: bool = False, size_average: Any = None, reduce: Any = None,
                        reduction: str = "mean") -> Node:
    # max(0, margin + d(anchor, positive) - d(anchor, negative)), each d a pairwise distance; with
    # `swap`, the negative's distance is the smaller of its distances to anchor and positive
    if not (_real_floats(anchor, positive, negative) and size_average is None and reduce is None
            and anchor.meta.ndim == positive.meta.ndim == negative.meta.ndim):  # (torch raises otherwise)
        return extern(g, F.triplet_margin_loss, anchor, positive, negative, margin, p, eps, swap, size_average,
                      reduce, reduction)
    to_positive = pairwise_distance(g, anchor, positive, p, eps)
    to_negative = pairwise_distance(g, anchor, negative, p, eps)
    if swap:
        to_negative = g.call("minimum", to_negative, pairwise_distance(g, positive, negative, p, eps))
    loss = g.call("clamp", g.call("sub", g.call("add", to_positive, margin), to_negative), 0, None)
    return _reduce(g, loss, reduction)


@lowers(F.multilabel_soft_margin_loss)
def multilabel_soft_margin_loss(g: Graph, x: Any, target: Any, weight: Any = None, size_average: Any = None,
                                reduce: Any = None, reduction: str = "mean") -> Node:
    # -(y logsigmoid(x) + (1 - y) logsigmoid(-x)), times the weight, averaged over the classes
    # (the last dim), as torch/nn/functional.py writes it
    if not (_real_floats(x) and isinstance(target, Node) and (weight is None or _real_floats(weight))
            and size_average is None and reduce is None and x.meta.ndim >= 1):
        return extern(g, F.multilabel_soft_margin_loss, x, target, weight, size_average, reduce, reduction)
    log_p, log_not_p = g.call("logsigmoid", x), g.call("logsigmoid", g.call("neg", x))
    loss = g.call("neg", g.call("add", g.call("mul", target, log_p), g.call("mul", g.call("sub", 1, target),
                                                                               log_not_p)))
    if weight is not None:
        loss = g.call("mul", loss, weight)
    classes = x.meta.ndim - 1
    loss = g.call("div", g.call("sum", loss, (classes,), False), x.meta.shape[classes])
    return _reduce(g, loss, reduction)


@lowers(F.gaussian_nll_loss)
def gaussian_nll_loss(g: Graph, x: Any, target: Any, var: Any, full: bool = False, eps: float = 1e-6,
                      reduction: str = "mean") -> Node:
    """0.5 (log v + (x - target)^2 / v), v the variance clamped to at least eps, as torch's Python
    (torch/nn/functional.py) computes it, with its size checks. Its check that no variance is
    negative reads the values (`if torch.any(var < 0): raise`): decided here for a Python float;
    a tensor's values exist only once the graph runs, so there a negative entry is clamped to eps
    like any small one, where eager raises ValueError."""
    if not (_real_floats(x, target) and (isinstance(var, float) or _real_floats(var))):
        raise Unsupported("gaussian_nll_loss of tensors that are not real floating point")
    if isinstance(var, float):
        if var < 0:
            raise ValueError("var has negative entry/entries")
        var = g.call("full", x.meta.shape, var, x.meta.dtype, device=x.meta.device)  # var * ones_like(x)
    shape, var_shape = x.meta.shape, var.meta.shape
    if var_shape != shape:
        if shape[:-1] == var_shape:  # one variance per row of x: broadcast along its last dim
            var = g.call("unsqueeze", var, var.meta.ndim)
        elif len(shape) != len(var_shape) or sum(v for s, v in zip(shape, var_shape, strict=True) if s != v) != 1:
            raise ValueError("var is of incorrect size")  # (else: size 1 in the one dim where x's differs)
    if reduction not in ("none", "mean", "sum"):
        raise ValueError(reduction + " is not valid")
    # torch clamps a clone of var in place under no_grad: the clamped value, with the gradient of
    # var itself. Where var < eps that is eps plus (var - detach(var)), zero with var's gradient.
    straight_through = g.call("add", g.call("sub", var, g.call("detach", var)), eps)
    var = g.call("where", g.call("lt", var, eps), straight_through, var)
    difference = g.call("sub", x, target)
    loss = g.call("add", g.call("log", var), g.call("div", g.call("mul", difference, difference), var))
    loss = g.call("mul", loss, 0.5)
    if full:
        loss = g.call("add", loss, 0.5 * math.log(2 * math.pi))
    return _reduce(g, loss, reduction)
