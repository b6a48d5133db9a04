"""torch functions lowered to ops that decompose writes as formulas: value tests (isnan, ...),
special functions (xlogy, logaddexp, ...), shrinkers, reductions (logsumexp, norms, any/all) and
losses. Same conventions as `torch_ops.py`; the formulas are in decompose/special.py,
decompose/reductions.py and decompose/losses.py.

A form these lowerings do not cover (a scalar where a tensor is expected, a legacy argument, a
matrix norm) stays whole: an extern call, run by torch.
"""

from __future__ import annotations

import inspect
import math
from typing import Any

import torch
import torch.nn.functional as F

from minicompiler.capture.errors import Unsupported
from minicompiler.capture.torch_ops import TORCH_FUNCTIONS, Lowering, extern, lowers, reduce_dims
from minicompiler.ir import Graph, Node, infer_meta


def _same_signature(op: str, fn: Any) -> Lowering:
    """op(*args) with torch's own positional and keyword arguments; tensors must be tensors
    where the formula needs one (else torch runs the call whole)."""
    def lowering(g: Graph, x: Any, *args: Any, **kwargs: Any) -> Node:
        if not isinstance(x, Node) or (args and op in TENSOR_PAIRS and not isinstance(args[0], Node)):
            return extern(g, fn, x, *args, **kwargs)
        return g.call(op, x, *args, **kwargs)

    return lowering


TENSOR_PAIRS = {"xlogy", "xlog1py", "heaviside", "fmax", "fmin", "logaddexp", "logaddexp2", "atan2"}
for _name in ["isnan", "isinf", "isposinf", "isneginf", "isfinite", "sinc", "xlogy", "heaviside", "fmax", "fmin",
              "logaddexp", "logaddexp2", "float_power", "nan_to_num", "logit"]:
    _fn = getattr(torch, _name)
    _special = [getattr(torch.special, _name)] if hasattr(torch.special, _name) else []
    lowers(_fn, *_special, methods=[_name])(_same_signature(_name, _fn))
for _name in ["xlog1py", "entr"]:
    lowers(getattr(torch.special, _name))(_same_signature(_name, getattr(torch.special, _name)))
for _name in ["logsigmoid", "tanhshrink", "hardshrink", "softshrink"]:
    lowers(getattr(F, _name), methods=[_name] if hasattr(torch.Tensor, _name) else [])(
        _same_signature(_name, getattr(F, _name)))
lowers(torch.positive, methods=["positive"])(lambda g, x: x)  # +x is x itself
lowers(torch.sgn, methods=["sgn"])(  # sign for real numbers
    lambda g, x: g.call("sign", x) if not x.meta.dtype.is_complex else extern(g, torch.sgn, x))


# a real tensor is its own conjugate (conj and the resolve_* views give x itself, conj_physical a copy)
for _fn in (torch.conj, torch.resolve_conj, torch.resolve_neg):
    lowers(_fn, methods=[_fn.__name__])(
        lambda g, x, _fn=_fn: x if not x.meta.dtype.is_complex else extern(g, _fn, x))
lowers(torch.conj_physical, methods=["conj_physical"])(
    lambda g, x: g.call("clone", x) if not x.meta.dtype.is_complex else extern(g, torch.conj_physical, x))
# a real tensor is its own real part, and real everywhere (NaN included); complex ones stay whole
lowers(torch.real)(lambda g, x: x if not x.meta.dtype.is_complex else extern(g, torch.real, x))
lowers(torch.isreal, methods=["isreal"])(lambda g, x: extern(g, torch.isreal, x) if x.meta.dtype.is_complex else
                                         g.call("full", x.meta.shape, True, torch.bool, device=x.meta.device))



@lowers(torch.angle, methods=["angle"])
def angle(g: Graph, x: Any) -> Node:
    # pi for a negative number, NaN for NaN, else 0; its gradient is 0 everywhere, as torch's: the
    # NaN comes from x * 0, which passes back 0
    if not x.meta.dtype.is_floating_point:  # complex, or an integer whose angle is a float
        return extern(g, torch.angle, x)
    return g.call("where", g.call("lt", x, 0), math.pi, g.call("where", g.call("isnan", x), g.call("mul", x, 0), 0))

@lowers(torch.isclose, methods=["isclose"])
def isclose(g: Graph, a: Any, b: Any, rtol: float = 1e-05, atol: float = 1e-08, equal_nan: bool = False) -> Node:
    # a == b, or |a - b| <= atol + |rtol * b| with |a - b| finite (inf == inf is close, inf vs 1e38 is not)
    if not (isinstance(a, Node) and isinstance(b, Node) and a.meta.dtype == b.meta.dtype
            and a.meta.dtype.is_floating_point):
        return extern(g, torch.isclose, a, b, rtol, atol, equal_nan)
    close = g.call("eq", a, b)
    if equal_nan:
        close = g.call("logical_or", close, g.call("logical_and", g.call("isnan", a), g.call("isnan", b)))
    if rtol == 0 and atol == 0:
        return close
    allowed = g.call("add", g.call("abs", g.call("mul", b, rtol)), atol)
    error = g.call("abs", g.call("sub", a, b))
    within = g.call("logical_and", g.call("isfinite", error), g.call("le", error, allowed))
    return g.call("logical_or", close, within)


# inverse trigonometry, erfc, signbit: primitives; atan2 and fmod too (tensor first)
for _name, _aliases in {"asin": ["arcsin"], "acos": ["arccos"], "atan": ["arctan"], "asinh": ["arcsinh"],
                        "acosh": ["arccosh"], "atanh": ["arctanh"], "erfc": [], "signbit": []}.items():
    _fns = [getattr(torch, n) for n in (_name, *_aliases)]
    _fns += [getattr(torch.special, _name)] if hasattr(torch.special, _name) else []
    lowers(*_fns, methods=[_name, *_aliases])(_same_signature(_name, getattr(torch, _name)))
lowers(torch.atan2, torch.arctan2, methods=["atan2", "arctan2"])(_same_signature("atan2", torch.atan2))
lowers(torch.fmod, methods=["fmod"])(_same_signature("fmod", torch.fmod))
lowers(torch.copysign, methods=["copysign"])(_same_signature("copysign", torch.copysign))


@lowers(torch.round, methods=["round"])
def round_(g: Graph, x: Any, *, decimals: int = 0) -> Node:
    if not isinstance(x, Node) or (decimals != 0 and not x.meta.dtype.is_floating_point):
        return extern(g, torch.round, x, decimals=decimals)
    return g.call("round", x) if decimals == 0 else g.call("round_decimals", x, decimals)


@lowers(torch.div, torch.divide, torch.true_divide, methods=["div", "divide", "true_divide"])
def div(g: Graph, x: Any, other: Any, *, rounding_mode: str | None = None) -> Node:
    if rounding_mode is None:
        return g.call("div", x, other)
    # "floor" / "trunc": a formula for floating results (decompose/rounding.py); integer
    # division (and a Python number divided by a tensor) is kept whole
    if isinstance(x, Node) and infer_meta("div_rounded", (x, other, rounding_mode), {}).dtype.is_floating_point:
        return g.call("div_rounded", x, other, rounding_mode)
    return extern(g, torch.div, x, other, rounding_mode=rounding_mode)


lowers(torch.floor_divide, methods=["floor_divide"])(lambda g, x, other: div(g, x, other, rounding_mode="floor"))


# --- a few more written with the ops above ------------------------------------------------
@lowers(F.softmin)
def softmin(g: Graph, x: Node, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Node:
    return TORCH_FUNCTIONS[F.softmax](g, g.call("neg", x), dim, _stacklevel, dtype)  # softmax(-x)


@lowers(torch.addcdiv, methods=["addcdiv"])
def addcdiv(g: Graph, x: Node, tensor1: Node, tensor2: Node, *, value: Any = 1) -> Node:
    # x + value * tensor1 / tensor2, in torch's order
    scaled = tensor1 if value == 1 else g.call("mul", tensor1, value)
    return g.call("add", x, g.call("div", scaled, tensor2))


@lowers(torch.ldexp, methods=["ldexp"])
def ldexp(g: Graph, x: Node, other: Node) -> Node:
    return g.call("mul", x, g.call("pow", 2.0, other))  # x * 2^other, as torch computes it


@lowers(torch.special.ndtr)
def ndtr(g: Graph, x: Node) -> Node:
    # the standard normal's CDF: erfc(-x / sqrt 2) / 2 (erfc keeps the digits of the left tail)
    return g.call("mul", g.call("erfc", g.call("mul", x, -0.5**0.5)), 0.5)


@lowers(torch.nanmean, methods=["nanmean"])
def nanmean(g: Graph, x: Node, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Node:
    if dtype is not None or not x.meta.dtype.is_floating_point:
        return extern(g, torch.nanmean, x, dim, keepdim, dtype=dtype)
    dims = reduce_dims(x, dim)
    # the sum of the numbers over how many there are (0 / 0 = NaN where all are NaN, as torch)
    count = g.call("sum", g.call("logical_not", g.call("isnan", x)), dims, keepdim)
    return g.call("div", g.call("nansum", x, dims, keepdim), count)


def _triangle(op: str) -> Lowering:
    fn = getattr(torch, op)

    def lowering(g: Graph, x: Any, diagonal: int = 0) -> Node:
        # a formula of coordinates (decompose/rounding.py) for matrices of sizes known now
        if not isinstance(x, Node) or x.meta.ndim < 2 or not all(isinstance(s, int) for s in x.meta.shape):
            return extern(g, fn, x, diagonal)
        return g.call(op, x, diagonal)

    return lowering


lowers(torch.tril, methods=["tril"])(_triangle("tril"))
lowers(torch.triu, methods=["triu"])(_triangle("triu"))


@lowers(torch.rsub)
def rsub(g: Graph, x: Node, other: Any, alpha: float = 1) -> Node:
    # other - alpha * x
    return g.call("add", g.call("mul", x, -alpha), other)


# Reflected operators: Python calls x.__rsub__(1) for `1 - x`; each is written as torch writes it
# (torch/_tensor.py), so `__rdiv__` is reciprocal(x) * other, rounding included.
def _reflected(fn: Any) -> Lowering:
    return lambda g, x, other: TORCH_FUNCTIONS[fn](g, other, x)


lowers(methods=["__radd__"])(lambda g, x, other: g.call("add", x, other))
lowers(methods=["__rmul__"])(lambda g, x, other: g.call("mul", x, other))
lowers(methods=["__rsub__"])(lambda g, x, other: rsub(g, x, other))
lowers(methods=["__rdiv__", "__rtruediv__"])(lambda g, x, other: g.call("mul", g.call("reciprocal", x), other))
lowers(methods=["__rpow__"])(_reflected(torch.pow))
lowers(methods=["__rmod__"])(_reflected(torch.remainder))
lowers(methods=["__rmatmul__"])(_reflected(torch.matmul))


@lowers(F.threshold)
def threshold(g: Graph, x: Node, threshold: float, value: float, inplace: bool = False) -> Node:
    if inplace:
        return extern(g, F.threshold, x, threshold, value, inplace)
    return g.call("threshold", x, threshold, value)


# --- reductions ------------------------------------------------------------------------------
@lowers(torch.logsumexp, torch.special.logsumexp, methods=["logsumexp"])
def logsumexp(g: Graph, x: Node, dim: Any = (), keepdim: bool = False) -> Node:
    return g.call("logsumexp", x, reduce_dims(x, dim), keepdim)


def _any_or_all(op: str) -> Lowering:
    def lowering(g: Graph, x: Node, dim: Any = None, keepdim: bool = False) -> Node:
        return g.call(op, x, reduce_dims(x, dim), keepdim)

    return lowering


lowers(torch.any, methods=["any"])(_any_or_all("any"))
lowers(torch.all, methods=["all"])(_any_or_all("all"))
lowers(torch.count_nonzero, methods=["count_nonzero"])(
    lambda g, x, dim=None: g.call("count_nonzero", x, reduce_dims(x, dim)))


@lowers(torch.nansum, methods=["nansum"])
def nansum(g: Graph, x: Node, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Node:
    if dtype is not None:
        x = g.call("convert", x, dtype)
    return g.call("nansum", x, reduce_dims(x, dim), keepdim)


def vector_norm(g: Graph, x: Node, ord: Any = 2, dim: Any = None, keepdim: bool = False) -> Node:
    if not x.meta.dtype.is_floating_point or not isinstance(ord, (int, float)):
        raise Unsupported(f"a norm of ord {ord!r} over {x.meta.dtype}")
    return g.call("vector_norm", x, float(ord), reduce_dims(x, dim), keepdim)


@lowers(torch.linalg.vector_norm)
def linalg_vector_norm(g: Graph, x: Node, ord: Any = 2, dim: Any = None, keepdim: bool = False, *,
                       dtype: Any = None) -> Node:
    if dtype is not None:
        x = g.call("convert", x, dtype)
    return vector_norm(g, x, ord, dim, keepdim)


@lowers(torch.norm, methods=["norm"])
def norm(g: Graph, x: Node, p: Any = "fro", dim: Any = None, keepdim: bool = False, out: Any = None,
         dtype: Any = None) -> Node:
    # the Frobenius norm over any dims is the 2-norm of their elements; a number p is a vector norm
    if p == "fro" or p is None:
        p = 2
    if out is not None or dtype is not None or isinstance(p, str):
        return extern(g, torch.norm, x, p, dim, keepdim, dtype=dtype)
    return vector_norm(g, x, p, dim, keepdim)


@lowers(torch.linalg.norm)
def linalg_norm(g: Graph, x: Node, ord: Any = None, dim: Any = None, keepdim: bool = False, *,
                dtype: Any = None) -> Node:
    dims = reduce_dims(x, dim)
    vector = ord is None or (len(dims) == 1 and isinstance(ord, (int, float)))
    if not vector or dtype is not None:  # matrix norms (nuc, 2 = largest singular value, ...)
        return extern(g, torch.linalg.norm, x, ord, dim, keepdim, dtype=dtype)
    return vector_norm(g, x, 2 if ord is None else ord, dims, keepdim)


@lowers(torch.dist, methods=["dist"])
def dist(g: Graph, x: Node, other: Node, p: float = 2) -> Node:
    return vector_norm(g, g.call("sub", x, other), p)


@lowers(F.normalize)
def normalize(g: Graph, x: Node, p: float = 2.0, dim: int = 1, eps: float = 1e-12, out: Any = None) -> Node:
    # x / max(||x||, eps) along dim
    if out is not None:
        return extern(g, F.normalize, x, p, dim, eps, out)
    return g.call("div", x, g.call("maximum", vector_norm(g, x, p, dim, True), eps))


@lowers(torch.renorm, methods=["renorm"])
def renorm(g: Graph, x: Any, p: Any, dim: int, maxnorm: Any) -> Node:
    # each slice along dim whose p-norm (over the other dims) exceeds maxnorm, times
    # maxnorm / (norm + 1e-7), as torch's kernel scales it; the others as they are
    if not (isinstance(x, Node) and x.meta.dtype.is_floating_point and x.meta.ndim >= 2):
        return extern(g, torch.renorm, x, p, dim, maxnorm)  # (a 1-d x: slices of one number each)
    others = tuple(d for d in range(x.meta.ndim) if d != dim % x.meta.ndim)
    norm = vector_norm(g, x, p, others, True)
    scale = g.call("where", g.call("gt", norm, maxnorm), g.call("div", maxnorm, g.call("add", norm, 1e-7)), 1)
    return g.call("mul", x, scale)


@lowers(F.pairwise_distance, torch.pairwise_distance)
def pairwise_distance(g: Graph, x1: Node, x2: Node, p: float = 2.0, eps: float = 1e-6, keepdim: bool = False) -> Node:
    # ||x1 - x2 + eps|| over the last dim
    ndim = max(x1.meta.ndim, x2.meta.ndim)
    return vector_norm(g, g.call("add", g.call("sub", x1, x2), eps), p, max(ndim - 1, 0), keepdim)


# --- losses ----------------------------------------------------------------------------------
WEIGHTLESS = {"mse_loss", "l1_loss", "huber_loss"}  # torch has added a `weight` the formulas lack
TENSORS = ("input", "target", "input1", "input2")  # passed by position, the rest by name


def _loss(op: str, fn: Any) -> Lowering:
    """F.<loss>(...) bound to its own signature; legacy size_average/reduce become `reduction`.
    What the formula does not cover (a weight it lacks) keeps the call whole."""
    signature = inspect.signature(fn)

    def lowering(g: Graph, *args: Any, **kwargs: Any) -> Node:
        bound = signature.bind(*args, **kwargs)
        bound.apply_defaults()
        given = dict(bound.arguments)
        given["reduction"] = _reduction(given.pop("size_average", None), given.pop("reduce", None),
                                        given["reduction"])
        whole = op in WEIGHTLESS and given.pop("weight", None) is not None
        tensors = [given.pop(name) for name in list(given) if name in TENSORS]  # in the signature's order
        if whole or not all(isinstance(t, Node) for t in tensors):
            return extern(g, fn, *args, **kwargs)
        return g.call(op, *tensors, **given)

    return lowering


def _reduction(size_average: Any, reduce: Any, reduction: str) -> str:
    if size_average is None and reduce is None:
        return reduction
    from torch.nn import _reduction

    return _reduction.legacy_get_string(size_average, reduce, emit_warning=False)


for _name in ["mse_loss", "l1_loss", "smooth_l1_loss", "huber_loss", "soft_margin_loss", "binary_cross_entropy",
              "binary_cross_entropy_with_logits", "kl_div", "margin_ranking_loss", "hinge_embedding_loss",
              "poisson_nll_loss"]:
    lowers(getattr(F, _name))(_loss(_name, getattr(F, _name)))


# --- gates and normalisations written with views and element-wise ops ----------------------
@lowers(F.prelu)
def prelu(g: Graph, x: Any, weight: Any) -> Node:
    # x where x > 0, else weight * x, with one weight for all or one per channel (dim 1)
    one_per_channel = isinstance(weight, Node) and weight.meta.ndim == 1 and x.meta.ndim >= 2 and \
        weight.meta.shape[0] == x.meta.shape[1]
    if not (isinstance(weight, Node) and x.meta.dtype.is_floating_point and weight.meta.ndim <= 1
            and (weight.meta.numel == 1 or one_per_channel)):
        return extern(g, F.prelu, x, weight)  # (torch raises on a weight of the wrong size)
    shape = (1, x.meta.shape[1]) + (1,) * (x.meta.ndim - 2) if one_per_channel else ()
    return g.call("where", g.call("gt", x, 0), x, g.call("mul", x, g.call("reshape", weight, shape)))


@lowers(F.glu)
def glu(g: Graph, x: Any, dim: int = -1) -> Node:
    # the first half of `dim` gated by the sigmoid of the second
    if not isinstance(x, Node) or not x.meta.dtype.is_floating_point or not isinstance(x.meta.shape[dim], int) \
            or x.meta.shape[dim] % 2:
        return extern(g, F.glu, x, dim)
    dim, half = dim % x.meta.ndim, x.meta.shape[dim] // 2
    first, second = g.call("slice", x, dim, 0, half), g.call("slice", x, dim, half, 2 * half)
    return g.call("mul", first, g.call("sigmoid", second))


@lowers(F.rms_norm)
def rms_norm(g: Graph, x: Any, normalized_shape: Any, weight: Any = None, eps: float | None = None) -> Node:
    # x / sqrt(mean(x^2) + eps) over the last dims, times the weight; eps defaults to the dtype's
    # machine epsilon, and float16/bfloat16 are computed in float32, as torch's
    shape = tuple(normalized_shape) if isinstance(normalized_shape, list | tuple) else (normalized_shape,)
    if not isinstance(x, Node) or not x.meta.dtype.is_floating_point or \
            (weight is not None and not (isinstance(weight, Node) and tuple(weight.meta.shape) == shape)):
        return extern(g, F.rms_norm, x, normalized_shape, weight, eps)  # (torch raises on a wrong weight)
    count = len(shape)
    dims = tuple(range(x.meta.ndim - count, x.meta.ndim))
    eps = torch.finfo(x.meta.dtype).eps if eps is None else eps
    wide = x if x.meta.dtype == torch.float64 else g.call("convert", x, torch.float32)
    scale = g.call("rsqrt", g.call("add", g.call("mean", g.call("mul", wide, wide), dims, True), eps))
    normed = g.call("convert", g.call("mul", wide, scale), x.meta.dtype)
    return normed if weight is None else g.call("mul", normed, weight)
