"""Losses that read each sample's score at its target class: nll_loss, cross_entropy (class indices
or class probabilities, label smoothing), multi_margin_loss and multilabel_margin_loss. The score
at the target is a `gather` (one load_at kernel, decompose/gathers.py); the rest is pointwise and
sums, written in the order torch's kernels (aten/native/LossNLL.cpp, LossMultiMargin.cpp) use.

Same conventions as `torch_ops.py`: real floating scores with integer targets are lowered;
anything else (a legacy `size_average`/`reduce`) stays a torch call.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from minicompiler.capture.torch_losses import _reduce
from minicompiler.capture.torch_ops import extern, lowers
from minicompiler.ir import Graph, Node


def _lowerable(scores: Any, target: Any, legacy: tuple[Any, ...]) -> bool:
    return (isinstance(scores, Node) and scores.meta.dtype.is_floating_point and isinstance(target, Node)
            and all(a is None for a in legacy))


def _batched(g: Graph, scores: Node, target: Node) -> tuple[Node, Node, bool]:
    """A single sample (C,) (or a 0-d score: one class) with a 0-d target as a batch of one."""
    if scores.meta.ndim <= 1:
        return g.call("reshape", scores, (1, scores.meta.numel)), g.call("reshape", target, (1,)), True
    return scores, target, False


def _at_target(g: Graph, scores: Node, target: Node) -> Node:
    """scores[n, target[n], ...]: each sample's score at its class (dim 1)."""
    return g.call("squeeze", g.call("gather", scores, 1, g.call("unsqueeze", target, 1)), 1)


def _class_weights(g: Graph, weight: Node | None, target: Node, dtype: torch.dtype) -> Node:
    """weight[target] (1 without a weight), of the target's shape."""
    if weight is None:
        return g.call("full", target.meta.shape, 1.0, dtype, device=target.meta.device)
    return g.call("take", weight, target)


def nll(g: Graph, log_probs: Node, target: Node, weight: Node | None, ignore_index: int, reduction: str) -> Node:
    # -weight[t] * log_probs[n, t], 0 where t is ignore_index; "mean" divides by the weights counted
    log_probs, target, single = _batched(g, log_probs, target)
    kept = g.call("ne", target, ignore_index)
    safe = g.call("where", kept, target, 0)  # an ignored target reads class 0, then counts 0
    weights = g.call("where", kept, _class_weights(g, weight, safe, log_probs.meta.dtype), 0.0)
    loss = g.call("neg", g.call("mul", _at_target(g, log_probs, safe), weights))
    if reduction == "none":
        return g.call("squeeze", loss, 0) if single else loss
    total = _reduce(g, loss, "sum")
    if reduction == "sum":
        return total
    return g.call("div", total, _reduce(g, weights, "sum"))


@lowers(F.nll_loss)
def nll_loss(g: Graph, scores: Any, target: Any, weight: Node | None = None, size_average: Any = None,
             ignore_index: int = -100, reduce: Any = None, reduction: str = "mean") -> Node:
    if (not _lowerable(scores, target, (size_average, reduce)) or target.meta.dtype.is_floating_point
            or scores.meta.ndim == 0):
        return extern(g, F.nll_loss, scores, target, weight, size_average, ignore_index, reduce, reduction)
    return nll(g, scores, target, weight, ignore_index, reduction)


@lowers(F.cross_entropy)
def cross_entropy(g: Graph, scores: Any, target: Any, weight: Node | None = None, size_average: Any = None,
                  ignore_index: int = -100, reduce: Any = None, reduction: str = "mean",
                  label_smoothing: float = 0.0) -> Node:
    if not _lowerable(scores, target, (size_average, reduce)) or scores.meta.ndim == 0:
        return extern(g, F.cross_entropy, scores, target, weight, size_average, ignore_index, reduce, reduction,
                      label_smoothing)
    class_dim = 0 if scores.meta.ndim == 1 else 1
    log_probs = g.call("log_softmax", scores, class_dim)
    classes = scores.meta.shape[class_dim]
    # (C,) weights broadcast along the class dim of the scores
    along_classes = None if weight is None else g.call(
        "reshape", weight, tuple(classes if d == class_dim else 1 for d in range(scores.meta.ndim)))
    if target.meta.dtype.is_floating_point:  # class probabilities
        return _soft_cross_entropy(g, log_probs, target, along_classes, class_dim, reduction, label_smoothing)
    loss = nll(g, log_probs, target, weight, ignore_index, reduction)
    if label_smoothing == 0.0:
        return loss
    # label smoothing: the mean over classes of -log p (weighted), 0 where the target is ignored
    weighted = log_probs if along_classes is None else g.call("mul", log_probs, along_classes)
    kept = g.call("ne", target, ignore_index)
    smooth = g.call("where", kept, g.call("neg", g.call("sum", weighted, (class_dim,), False)), 0.0)
    if reduction == "mean":
        safe = g.call("where", kept, target, 0)
        counted = g.call("where", kept, _class_weights(g, weight, safe, scores.meta.dtype), 0.0)
        smooth = g.call("div", _reduce(g, smooth, "sum"), _reduce(g, counted, "sum"))
    else:
        smooth = _reduce(g, smooth, reduction)
    return g.call("add", g.call("mul", loss, 1 - label_smoothing), g.call("mul", smooth, label_smoothing / classes))


def _soft_cross_entropy(g: Graph, log_probs: Node, target: Node, weight: Node | None, class_dim: int,
                        reduction: str, label_smoothing: float) -> Node:
    # -sum over classes of weight * target * log p; "mean" divides by the number of samples
    classes = log_probs.meta.shape[class_dim]
    if label_smoothing > 0:
        target = g.call("add", g.call("mul", target, 1 - label_smoothing), label_smoothing / classes)
    product = g.call("mul", log_probs, target)
    if weight is not None:
        product = g.call("mul", product, weight)
    loss = g.call("neg", g.call("sum", product, (class_dim,), False))
    if reduction != "mean":
        return _reduce(g, loss, reduction)
    samples = log_probs.meta.numel // classes if classes else 0
    return g.call("div", _reduce(g, loss, "sum"), samples)


@lowers(F.multi_margin_loss)
def multi_margin_loss(g: Graph, scores: Any, target: Any, p: int = 1, margin: float = 1.0,
                      weight: Node | None = None, size_average: Any = None, reduce: Any = None,
                      reduction: str = "mean") -> Node:
    # per sample: sum over classes c != t of weight[t] * max(0, margin - x[t] + x[c])^p, over C
    if not _lowerable(scores, target, (size_average, reduce)) or p not in (1, 2) or scores.meta.ndim > 2:
        return extern(g, F.multi_margin_loss, scores, target, p, margin, weight, size_average, reduce, reduction)
    scores, target, single = _batched(g, scores, target)
    classes = scores.meta.shape[1]
    at_target = g.call("unsqueeze", _at_target(g, scores, target), 1)
    hinge = g.call("relu", g.call("add", g.call("sub", scores, at_target), margin))
    if p == 2:
        hinge = g.call("mul", hinge, hinge)
    if weight is not None:
        hinge = g.call("mul", hinge, g.call("unsqueeze", g.call("take", weight, target), 1))
    column = g.call("iota", (1, classes), 1, torch.int64, scores.meta.device)
    hinge = g.call("where", g.call("eq", column, g.call("unsqueeze", target, 1)), 0.0, hinge)  # not c == t
    loss = g.call("div", g.call("sum", hinge, (1,), False), classes)
    if reduction == "none" and single:
        return g.call("squeeze", loss, 0)
    return _reduce(g, loss, reduction)


@lowers(F.multilabel_margin_loss)
def multilabel_margin_loss(g: Graph, scores: Any, target: Any, size_average: Any = None, reduce: Any = None,
                           reduction: str = "mean") -> Node:
    # target: each sample's classes, up to the first -1. Per sample, over target classes j and
    # non-target classes c: sum of max(0, 1 - x[j] + x[c]), over C
    if not _lowerable(scores, target, (size_average, reduce)) or scores.meta.ndim > 2:
        return extern(g, F.multilabel_margin_loss, scores, target, size_average, reduce, reduction)
    single = scores.meta.ndim <= 1  # one sample: a batch of one
    if single:
        scores, target = g.call("reshape", scores, (1, -1)), g.call("reshape", target, (1, -1))
    classes = scores.meta.shape[1]
    position = g.call("iota", (1, classes), 1, torch.int64, scores.meta.device)
    # a target slot counts while no -1 came before it (a running "all" along the slots)
    ended = g.call("lt", target, 0)
    before = g.call("ge", g.call("unsqueeze", position, 2), g.call("unsqueeze", position, 1))  # (1, j, k): k <= j
    valid = g.call("logical_not", g.call("any", g.call("logical_and", g.call("unsqueeze", ended, 1), before), (2,)))
    safe = g.call("where", valid, target, 0)
    is_target = g.call("any", g.call("logical_and", g.call("eq", g.call("unsqueeze", safe, 2),
                                                              g.call("unsqueeze", position, 1)),
                                     g.call("unsqueeze", valid, 2)), (1,))  # (N, C): c is one of the targets
    at_target = g.call("gather", scores, 1, safe)  # (N, slots)
    hinge = g.call("relu", g.call("add", g.call("sub", g.call("unsqueeze", scores, 1),
                                                      g.call("unsqueeze", at_target, 2)), 1.0))  # (N, j, c)
    counted = g.call("logical_and", g.call("unsqueeze", valid, 2),
                     g.call("logical_not", g.call("unsqueeze", is_target, 1)))
    loss = g.call("div", g.call("sum", g.call("where", counted, hinge, 0.0), (1, 2), False), classes)
    if reduction == "none" and single:
        return g.call("squeeze", loss, 0)
    return _reduce(g, loss, reduction)
