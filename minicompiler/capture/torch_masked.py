"""torch.masked's reductions and normalisations on ordinary (strided) tensors, written as
torch/masked/_ops.py writes them: the masked-out elements are replaced by the operation's identity
(0 for a sum, -inf for amax, ...) and the plain op runs on the result, so a masked op lowers to a
`where` in front of a lowering we already have. Its gradient is the plain op's, kept where the
mask is true and 0 elsewhere, which is what `where` passes back.

Same conventions as `torch_ops.py`. Only real floating inputs are lowered (torch promotes integer
sums to int64 and rejects integer means); anything else stays a torch call.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from minicompiler.capture.torch_formulas import linalg_vector_norm
from minicompiler.capture.torch_ops import TORCH_FUNCTIONS, Lowering, extern, lowers, reduce_dims
from minicompiler.ir import Graph, Node

INF = float("inf")


def _lowerable(x: Any, mask: Any) -> bool:
    return isinstance(x, Node) and x.meta.dtype.is_floating_point and (mask is None or isinstance(mask, Node))


def _masked(g: Graph, x: Node, mask: Node | None, identity: float) -> Node:
    """x where the mask (broadcast to x's shape, read as bool) is true, else `identity`."""
    if mask is None:  # no mask: every element counts
        return x
    return g.call("where", _canonical_mask(g, x, mask), x, identity)


def _canonical_mask(g: Graph, x: Node, mask: Node) -> Node:
    return g.call("expand", g.call("convert", mask, torch.bool), x.meta.shape)


def _count(g: Graph, x: Node, mask: Node | None, dim: Any, keepdim: bool) -> Any:
    """How many elements each reduction over `dim` keeps: a number without a mask, else a tensor
    (in x's dtype: exact up to 2**24 elements in float32, enough for any count a sum here reads)."""
    if mask is None:
        return math.prod(x.meta.shape[d] for d in reduce_dims(x, dim) if d < x.meta.ndim)  # (a 0-d x has dim 0)
    kept = g.call("convert", _canonical_mask(g, x, mask), x.meta.dtype)
    return g.call("sum", kept, reduce_dims(x, dim), keepdim)


def _reduction(fn: Any, plain: Any, identity: float) -> Lowering:
    """masked.sum / amax / amin / logsumexp: the plain reduction of the masked input. (Another
    `dtype` stays a torch call: sum reads its input in it, the others convert their result.)"""

    def lowering(g: Graph, x: Any, dim: Any = None, *, keepdim: bool = False, dtype: Any = None,
                 mask: Any = None) -> Node:
        if not _lowerable(x, mask) or dtype not in (None, x.meta.dtype):
            return extern(g, fn, x, dim, keepdim=keepdim, dtype=dtype, mask=mask)
        return TORCH_FUNCTIONS[plain](g, _masked(g, x, mask, identity), reduce_dims(x, dim), bool(keepdim))

    return lowering


lowers(torch.masked.sum)(_reduction(torch.masked.sum, torch.sum, 0))
lowers(torch.masked.amax)(_reduction(torch.masked.amax, torch.amax, -INF))
lowers(torch.masked.amin)(_reduction(torch.masked.amin, torch.amin, INF))
lowers(torch.masked.logsumexp)(_reduction(torch.masked.logsumexp, torch.logsumexp, -INF))


@lowers(torch.masked.prod)
def prod(g: Graph, x: Any, dim: Any = None, *, keepdim: bool = False, dtype: Any = None, mask: Any = None) -> Node:
    # 1 where masked out (torch multiplies one dim at a time; one prod over them all is the same product)
    if not _lowerable(x, mask) or dtype not in (None, x.meta.dtype):
        return extern(g, torch.masked.prod, x, dim, keepdim=keepdim, dtype=dtype, mask=mask)
    return g.call("prod", _masked(g, x, mask, 1), reduce_dims(x, dim), bool(keepdim))


def _position(fn: Any, plain: str, identity: float) -> Lowering:
    """masked.argmax / argmin: the position in the masked input, converted to `dtype` (by default
    x's, as torch does). A row with nothing kept gives the first position of an identity."""

    def lowering(g: Graph, x: Any, dim: Any = None, *, keepdim: bool = False, dtype: Any = None,
                 mask: Any = None) -> Node:
        if not _lowerable(x, mask):
            return extern(g, fn, x, dim, keepdim=keepdim, dtype=dtype, mask=mask)
        position = TORCH_FUNCTIONS[plain](g, _masked(g, x, mask, identity), dim, bool(keepdim))
        return g.call("convert", position, x.meta.dtype if dtype is None else dtype)

    return lowering


lowers(torch.masked.argmax)(_position(torch.masked.argmax, torch.argmax, -INF))
lowers(torch.masked.argmin)(_position(torch.masked.argmin, torch.argmin, INF))


def _scan(fn: Any, plain: Any, identity: float) -> Lowering:
    """masked.cumsum (0 where masked out) / cumprod (1): the plain scan of the masked input, in
    `dtype` (by default x's, as torch does)."""

    def lowering(g: Graph, x: Any, dim: int, *, dtype: Any = None, mask: Any = None) -> Node:
        if not _lowerable(x, mask) or dtype not in (None, x.meta.dtype):
            return extern(g, fn, x, dim, dtype=dtype, mask=mask)
        return TORCH_FUNCTIONS[plain](g, _masked(g, x, mask, identity), dim)

    return lowering


lowers(torch.masked.cumsum)(_scan(torch.masked.cumsum, torch.cumsum, 0))
lowers(torch.masked.cumprod)(_scan(torch.masked.cumprod, torch.cumprod, 1))


@lowers(torch.masked.mean)
def mean(g: Graph, x: Any, dim: Any = None, *, keepdim: bool = False, dtype: Any = None, mask: Any = None) -> Node:
    # the masked sum over the count of kept elements: NaN (0 / 0) where the mask keeps none
    if not _lowerable(x, mask) or dtype not in (None, x.meta.dtype):
        return extern(g, torch.masked.mean, x, dim, keepdim=keepdim, dtype=dtype, mask=mask)
    total = g.call("sum", _masked(g, x, mask, 0), reduce_dims(x, dim), bool(keepdim))
    return g.call("div", total, _count(g, x, mask, dim, bool(keepdim)))


def _spread(fn: Any, take_sqrt: bool) -> Lowering:
    """masked.var / std, as torch's _std_var: the mean of the kept elements, then the sum of the
    kept squared deviations over (count - correction), at least 0."""

    def lowering(g: Graph, x: Any, dim: Any = None, unbiased: Any = None, *, correction: Any = None,
                 keepdim: bool = False, dtype: Any = None, mask: Any = None) -> Node:
        if not _lowerable(x, mask) or dtype not in (None, x.meta.dtype):
            return extern(g, fn, x, dim, unbiased, correction=correction, keepdim=keepdim, dtype=dtype, mask=mask)
        if correction is None:
            correction = 0 if unbiased is False else 1
        dims, keepdim = reduce_dims(x, dim), bool(keepdim)
        sample_mean = g.call("div", g.call("sum", _masked(g, x, mask, 0), dims, True), _count(g, x, mask, dim, True))
        deviation = g.call("sub", x, sample_mean)
        total = g.call("sum", _masked(g, g.call("mul", deviation, deviation), mask, 0), dims, keepdim)
        count = _count(g, x, mask, dim, keepdim)
        count = max(count - correction, 0) if isinstance(count, int) else \
            g.call("maximum", g.call("sub", count, correction), 0)
        spread = g.call("div", total, count)
        return g.call("sqrt", spread) if take_sqrt else spread

    return lowering


lowers(torch.masked.var)(_spread(torch.masked.var, take_sqrt=False))
lowers(torch.masked.std)(_spread(torch.masked.std, take_sqrt=True))


@lowers(torch.masked.norm)
def norm(g: Graph, x: Any, ord: Any = 2.0, dim: Any = None, *, keepdim: bool = False, dtype: Any = None,
         mask: Any = None) -> Node:
    # masked-out elements are 0, which no norm counts, except the -inf norm (a minimum): +inf there
    if not _lowerable(x, mask) or not isinstance(ord, (int, float)):
        return extern(g, torch.masked.norm, x, ord, dim, keepdim=keepdim, dtype=dtype, mask=mask)
    masked = _masked(g, x, mask, INF if ord == -INF else 0)
    return linalg_vector_norm(g, masked, ord, reduce_dims(x, dim), bool(keepdim), dtype=dtype)


@lowers(torch.masked.normalize)
def normalize(g: Graph, x: Any, ord: Any, dim: int, *, eps: float = 1e-12, dtype: Any = None,
              mask: Any = None) -> Node:
    # the masked input (0 where masked out) over max(masked norm, eps)
    if not _lowerable(x, mask) or not isinstance(ord, (int, float)) or dtype not in (None, x.meta.dtype):
        return extern(g, torch.masked.normalize, x, ord, dim, eps=eps, dtype=dtype, mask=mask)
    norm_ = norm(g, x, ord, dim, keepdim=True, mask=mask)
    return g.call("div", _masked(g, x, mask, 0), g.call("maximum", norm_, eps))


def _normalisation(fn: Any, plain: Any, identity: float) -> Lowering:
    """masked.softmax / log_softmax (-inf where masked out: e**-inf = 0) and softmin (+inf)."""

    def lowering(g: Graph, x: Any, dim: int, *, dtype: Any = None, mask: Any = None) -> Node:
        if not _lowerable(x, mask):
            return extern(g, fn, x, dim, dtype=dtype, mask=mask)
        return TORCH_FUNCTIONS[plain](g, _masked(g, x, mask, identity), dim, dtype=dtype)

    return lowering


lowers(torch.masked.softmax)(_normalisation(torch.masked.softmax, F.softmax, -INF))
lowers(torch.masked.log_softmax)(_normalisation(torch.masked.log_softmax, F.log_softmax, -INF))
lowers(torch.masked.softmin)(_normalisation(torch.masked.softmin, F.softmin, INF))


@lowers(torch.masked.logaddexp)
def logaddexp(g: Graph, x: Any, other: Any, *, dtype: Any = None, input_mask: Any = None,
              other_mask: Any = None) -> Node:
    # each input -inf where its own mask is false (logaddexp's identity: log(e^x + e^-inf) = x),
    # then the plain logaddexp, converted to `dtype` (by default x's, as torch does)
    if not (_lowerable(x, input_mask) and _lowerable(other, other_mask)):
        return extern(g, torch.masked.logaddexp, x, other, dtype=dtype, input_mask=input_mask,
                      other_mask=other_mask)
    result = TORCH_FUNCTIONS[torch.logaddexp](g, _masked(g, x, input_mask, -INF), _masked(g, other, other_mask, -INF))
    dtype = x.meta.dtype if dtype is None else dtype
    return result if dtype == result.meta.dtype else g.call("convert", result, dtype)
