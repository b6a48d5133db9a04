"""The mapping table from torch callables to graph ops: arithmetic, reductions, nn.functional.

Each lowering is a plain Python function with the torch function's own signature, so Python
itself binds the user's positional and keyword arguments; the body normalises them (dims to
sorted non-negative tuples, defaults made explicit) and adds nodes with `g.call`. Arguments
arrive already unwrapped: a tensor is the graph `Node` that will hold it (its `.meta` says
its shape and dtype), anything else is a plain Python value.

    @lowers(torch.mean, methods=["mean"])
    def mean(g, x, dim=None, keepdim=False, *, dtype=None): ...

registers `torch.mean(x, ...)` and `x.mean(...)` at once. Shape, view and indexing
lowerings live in `torch_views.py`, new tensors in `torch_factories.py`, formulas in
`torch_formulas.py` and products in `torch_products.py`; they all fill the two tables here.
"""

from __future__ import annotations

import inspect
import math
import types
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

import torch
import torch.nn.functional as F

from minicompiler.capture.errors import Unsupported
from minicompiler.ir import Graph, Node

Lowering = Callable[..., Any]
TORCH_FUNCTIONS: dict[Callable[..., Any], Lowering] = {}  # torch.cos -> lowering
TENSOR_METHODS: dict[str, Lowering] = {}  # "cos" (as in x.cos()) -> lowering


def lowers(*functions: Callable[..., Any], methods: Iterable[str] = ()) -> Callable[[Lowering], Lowering]:
    def register(lowering: Lowering) -> Lowering:
        for fn in functions:
            TORCH_FUNCTIONS[fn] = lowering
        for name in methods:
            TENSOR_METHODS[name] = lowering
        return lowering

    return register


@dataclass
class InPlace:
    """A lowering's answer for an in-place op: `node` is the new value of its first argument."""

    node: Node


@dataclass
class Updates:
    """A lowering's answer for an op that also changes some of its tensor arguments in place (as
    training-mode batch_norm changes its running statistics): `result`, and for each changed
    argument (by the Node it was given as) its new value."""

    result: Node
    new_values: dict[Node, Node]


def maybe_inplace(node: Node, inplace: bool) -> Node | InPlace:
    return InPlace(node) if inplace else node


def extern(g: Graph, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Node:
    """Keep a torch function whole: a `torch_call` node, run by torch itself. A tensor given by
    keyword goes to its place among the positional arguments where the function's signature puts
    it next: autograd's rules give gradients to positional arguments, and a keyword can need one
    (Swin's attention mask holds a learned relative position bias)."""
    names = _parameter_names(fn) if any(isinstance(v, Node) for v in kwargs.values()) else []
    args, kwargs = list(args), dict(kwargs)
    while len(args) < len(names) and isinstance(kwargs.get(names[len(args)]), Node):
        args.append(kwargs.pop(names[len(args)]))
    return g.call("torch_call", fn, *args, **kwargs)


def _parameter_names(fn: Callable[..., Any]) -> list[str]:
    """The names of fn's positional parameters, in order: from its Python signature, or for a
    builtin from the schema of the aten op of its name; [] where neither is known."""
    if isinstance(fn, types.FunctionType):
        return [p.name for p in inspect.signature(fn).parameters.values()
                if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)]
    op = getattr(getattr(torch.ops.aten, getattr(fn, "__name__", ""), None), "default", None)
    return [] if op is None else [a.name for a in op._schema.arguments if not a.kwarg_only]


# --- dim helpers -------------------------------------------------------------------------
def norm_dim(dim: int, ndim: int) -> int:
    """-1 -> ndim-1. A 0-d tensor accepts dim 0 and -1, as in torch."""
    size = max(ndim, 1)
    if not -size <= dim < size:
        raise Unsupported(f"dim {dim} is out of range for a {ndim}-d tensor")
    return dim % size


def reduce_dims(x: Node, dim: Any) -> tuple[int, ...]:
    """A reduction's `dim` argument as a sorted tuple of non-negative ints (None/() = all)."""
    if dim is None or (isinstance(dim, (tuple, list)) and len(dim) == 0):
        return tuple(range(x.meta.ndim))
    dims = (dim,) if isinstance(dim, int) else tuple(dim)
    return tuple(sorted({norm_dim(d, x.meta.ndim) for d in dims}))


# --- pointwise ---------------------------------------------------------------------------
def _unary(op: str) -> Lowering:
    return lambda g, x: g.call(op, x)


def _binary(op: str) -> Lowering:
    return lambda g, x, other: g.call(op, x, other)


_UNARY = [
    "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tan", "tanh", "erf", "log1p",
    "expm1", "reciprocal", "floor", "ceil", "trunc", "sign", "logical_not", "sigmoid", "relu",
    "square",
]
for _name in _UNARY:
    lowers(getattr(torch, _name), methods=[_name])(_unary(_name))
# ops written as formulas of the above (decompose/pointwise.py)
for _name in ["sinh", "cosh", "exp2", "log2", "log10", "frac", "deg2rad", "rad2deg"]:
    lowers(getattr(torch, _name), methods=[_name])(_unary(_name))
for _name in ["hypot", "logical_xor"]:
    lowers(getattr(torch, _name), methods=[_name])(_binary(_name))
lowers(torch.negative, methods=["negative"])(TORCH_FUNCTIONS[torch.neg])
lowers(torch.absolute, methods=["absolute"])(TORCH_FUNCTIONS[torch.abs])
lowers(F.sigmoid)(TORCH_FUNCTIONS[torch.sigmoid])
lowers(F.tanh)(TORCH_FUNCTIONS[torch.tanh])


def _with_alpha(op: str) -> Lowering:
    """add / sub: x + alpha * other."""
    return lambda g, x, other, *, alpha=1: g.call(op, x, other if alpha == 1 else g.call("mul", other, alpha))


lowers(torch.add, methods=["add"])(_with_alpha("add"))
lowers(torch.sub, torch.subtract, methods=["sub", "subtract"])(_with_alpha("sub"))


_BINARY = {
    "mul": [torch.mul, torch.multiply], "pow": [torch.pow], "maximum": [torch.maximum],
    "minimum": [torch.minimum], "eq": [torch.eq], "ne": [torch.ne, torch.not_equal],
    "lt": [torch.lt, torch.less], "le": [torch.le, torch.less_equal], "gt": [torch.gt, torch.greater],
    "ge": [torch.ge, torch.greater_equal], "logical_and": [torch.logical_and],
    "logical_or": [torch.logical_or], "remainder": [torch.remainder],
}
for _name, _fns in _BINARY.items():
    _method_names = [_name] + [f.__name__ for f in _fns if f.__name__ != _name]
    lowers(*_fns, methods=_method_names)(_binary(_name))


@lowers(torch.where, methods=["where"])
def where(g: Graph, condition: Any, x: Any = None, other: Any = None) -> Node:
    if x is None:  # torch.where(cond) lists the indices: its size depends on the data
        raise Unsupported("torch.where(condition) with one argument has a data-dependent shape")
    return g.call("where", condition, x, other)


@lowers(torch.clamp, torch.clip, methods=["clamp", "clip"])
def clamp(g: Graph, x: Node, min: Any = None, max: Any = None) -> Node:
    return g.call("clamp", x, min, max)


lowers(torch.clamp_min, methods=["clamp_min"])(lambda g, x, min: g.call("clamp", x, min, None))
lowers(torch.clamp_max, methods=["clamp_max"])(lambda g, x, max: g.call("clamp", x, None, max))
lowers(torch.lerp, methods=["lerp"])(lambda g, x, end, weight: g.call("lerp", x, end, weight))


@lowers(torch.addcmul, methods=["addcmul"])
def addcmul(g: Graph, x: Node, tensor1: Node, tensor2: Node, *, value: Any = 1) -> Node:
    return g.call("addcmul", x, tensor1, tensor2, value=value)


# --- activations (torch.nn.functional) ---------------------------------------------------
def _activation(op: str) -> Lowering:
    """F.relu / F.silu, whose `inplace=True` overwrites the input."""
    return lambda g, x, inplace=False: maybe_inplace(g.call(op, x), inplace)


lowers(F.relu)(_activation("relu"))
lowers(F.silu)(_activation("silu"))


for _name in ["softsign", "hardsigmoid", "hardswish", "mish", "selu"]:
    lowers(getattr(F, _name))(_activation(_name) if _name != "softsign" else _unary(_name))
lowers(F.elu)(lambda g, x, alpha=1.0, inplace=False: maybe_inplace(g.call("elu", x, alpha), inplace))
lowers(F.celu)(lambda g, x, alpha=1.0, inplace=False: maybe_inplace(g.call("celu", x, alpha), inplace))


@lowers(F.gelu, methods=["gelu"])
def gelu(g: Graph, x: Node, approximate: str = "none") -> Node:
    return g.call("gelu", x, approximate=approximate)


@lowers(F.leaky_relu)
def leaky_relu(g: Graph, x: Node, negative_slope: float = 0.01, inplace: bool = False) -> Node | InPlace:
    return maybe_inplace(g.call("leaky_relu", x, negative_slope), inplace)


@lowers(F.hardtanh)
def hardtanh(g: Graph, x: Node, min_val: float = -1.0, max_val: float = 1.0, inplace: bool = False) -> Any:
    return maybe_inplace(g.call("hardtanh", x, min_val, max_val), inplace)


lowers(F.relu6)(lambda g, x, inplace=False: hardtanh(g, x, 0.0, 6.0, inplace))


@lowers(F.softplus)
def softplus(g: Graph, x: Node, beta: float = 1.0, threshold: float = 20.0) -> Node:
    if (beta, threshold) != (1.0, 20.0):
        return g.call("softplus", x, beta, threshold)
    return g.call("softplus", x)


@lowers(F.dropout)
def dropout(g: Graph, x: Node, p: float = 0.5, training: bool = True, inplace: bool = False) -> Any:
    if not training or p == 0:
        return x  # dropout is the identity in eval mode
    return maybe_inplace(extern(g, F.dropout, x, p, True), inplace)


# --- reductions --------------------------------------------------------------------------
@lowers(torch.sum, methods=["sum"])
def sum_(g: Graph, x: Node, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Node:
    if dtype is not None:
        x = g.call("convert", x, dtype)
    return g.call("sum", x, reduce_dims(x, dim), keepdim)


@lowers(torch.mean, methods=["mean"])
def mean(g: Graph, x: Node, dim: Any = None, keepdim: bool = False, *, dtype: Any = None) -> Node:
    if dtype is not None:
        return g.call("mean", x, reduce_dims(x, dim), keepdim, dtype=dtype)
    return g.call("mean", x, reduce_dims(x, dim), keepdim)


def _extremum(op: str) -> Lowering:
    """amax / amin: `dim=()` means every dim, as in torch."""
    return lambda g, x, dim=(), keepdim=False: g.call(op, x, reduce_dims(x, dim), keepdim)


lowers(torch.amax, methods=["amax"])(_extremum("amax"))
lowers(torch.amin, methods=["amin"])(_extremum("amin"))
# prod, argmax/argmin, max/min along a dim and aminmax: torch_reductions.py


def _spread(op: str, with_mean: bool = False) -> Lowering:
    """var / std (and var_mean / std_mean), with torch's two spellings of the correction."""

    def lowering(g: Graph, x: Node, dim: Any = None, unbiased: Any = None, keepdim: bool = False, *,
                 correction: Any = None) -> Any:
        if isinstance(dim, bool):  # the old torch.var(x, unbiased) overload
            dim, unbiased = None, dim
        if correction is None:
            correction = 0 if unbiased is False else 1
        spread = g.call(op, x, reduce_dims(x, dim), correction, keepdim)
        return (spread, mean(g, x, dim, keepdim)) if with_mean else spread

    return lowering


lowers(torch.var, methods=["var"])(_spread("var"))
lowers(torch.std, methods=["std"])(_spread("std"))
lowers(torch.var_mean)(_spread("var", with_mean=True))
lowers(torch.std_mean)(_spread("std", with_mean=True))


# --- softmax, normalisation, linear algebra ----------------------------------------------
def _softmax(op: str) -> Lowering:
    def lowering(g: Graph, x: Node, dim: int, dtype: Any = None) -> Node:
        if dtype is not None:
            return g.call(op, x, norm_dim(dim, x.meta.ndim), dtype)
        return g.call(op, x, norm_dim(dim, x.meta.ndim))

    return lowering


def _functional_softmax(op: str) -> Lowering:
    """F.softmax(input, dim=None, _stacklevel=3, dtype=None): same op, its own signature."""

    def lowering(g: Graph, x: Node, dim: int | None = None, _stacklevel: int = 3, dtype: Any = None) -> Node:
        if dim is None:
            raise Unsupported(f"F.{op} without dim (an implicit dim is deprecated in torch)")
        return _softmax(op)(g, x, dim, dtype)

    return lowering


for _name in ("softmax", "log_softmax"):
    lowers(getattr(torch, _name), methods=[_name])(_softmax(_name))
    lowers(getattr(F, _name))(_functional_softmax(_name))


@lowers(F.layer_norm)
def layer_norm(g: Graph, x: Node, normalized_shape: Any, weight: Any = None, bias: Any = None,
               eps: float = 1e-5) -> Node:
    shape = (normalized_shape,) if isinstance(normalized_shape, int) else tuple(normalized_shape)
    return g.call("layer_norm", x, shape, weight, bias, eps)


@lowers(F.batch_norm)
def batch_norm(g: Graph, x: Node, running_mean: Node | None, running_var: Node | None, weight: Node | None = None,
               bias: Node | None = None, training: bool = False, momentum: Any = 0.1, eps: float = 1e-5) -> Any:
    """Eval mode reads the running statistics: one pure torch_call. Training mode normalises with
    the batch's statistics, in primitive-friendly ops, and updates the running statistics as torch
    does; `momentum` may be a tensor (BatchNorm's cumulative average, 1 / num_batches_tracked)."""
    if not training:
        return extern(g, F.batch_norm, x, running_mean, running_var, weight, bias, False, momentum, eps)
    return batch_norm_training(g, x, running_mean, running_var, weight, bias, momentum, eps)[0]


def batch_norm_training(g: Graph, x: Node, running_mean: Node | None, running_var: Node | None,
                        weight: Node | None, bias: Node | None, momentum: Any,
                        eps: float) -> tuple[Updates, Node, Node]:
    """Training-mode batch_norm (above), and the batch's mean and biased variance, (C,) each and
    detached: what torch.native_batch_norm also returns (capture/torch_norms.py)."""
    if x.meta.ndim < 2:
        raise Unsupported(f"batch_norm of a {x.meta.ndim}-d tensor")
    channels = x.meta.shape[1]
    dims = tuple(d for d in range(x.meta.ndim) if d != 1)  # statistics per channel (dim 1)
    per_channel = (1, channels) + (1,) * (x.meta.ndim - 2)  # [C] -> broadcastable against x
    mean = g.call("mean", x, dims, False)  # (C,)
    var = g.call("var", x, dims, 0, False)  # (C,), biased: what the normalisation divides by
    y = g.call("mul", g.call("sub", x, g.call("reshape", mean, per_channel)),
               g.call("rsqrt", g.call("add", g.call("reshape", var, per_channel), eps)))
    y = _per_channel_affine(g, y, weight, bias)
    n = x.meta.numel // channels
    if n <= 1 and running_var is not None:
        raise Unsupported("batch_norm in training mode needs more than one value per channel")
    updates = {}
    # Running statistics are bookkeeping, not part of what a loss depends on: no gradient flows.
    mean, var = g.call("detach", mean), g.call("detach", var)
    if running_mean is not None:  # (1 - momentum) * running + momentum * batch statistic
        updates[running_mean] = g.call("lerp", running_mean, mean, momentum)
    if running_var is not None:  # the running variance is the unbiased one
        updates[running_var] = g.call("lerp", running_var, g.call("mul", var, n / (n - 1)), momentum)
    return Updates(y, updates), mean, var


def _per_channel_affine(g: Graph, y: Node, weight: Node | None, bias: Node | None) -> Node:
    """y * weight + bias, one weight and one bias per channel (dim 1 of y)."""
    per_channel = (1, y.meta.shape[1]) + (1,) * (y.meta.ndim - 2)  # [C] -> broadcastable against y
    if weight is not None:
        y = g.call("mul", y, g.call("reshape", weight, per_channel))
    if bias is not None:
        y = g.call("add", y, g.call("reshape", bias, per_channel))
    return y


@lowers(F.group_norm)
def group_norm(g: Graph, x: Node, num_groups: int, weight: Any = None, bias: Any = None, eps: float = 1e-5) -> Node:
    # each sample's channels split into groups, each group normalised over its channels and
    # positions (a layer_norm of (N, groups, rest)), then one weight and bias per channel
    sizes_known = x.meta.ndim >= 2 and all(isinstance(s, int) for s in x.meta.shape)
    if not sizes_known or x.meta.shape[1] % num_groups:
        return extern(g, F.group_norm, x, num_groups, weight, bias, eps)  # (torch raises on groups that do not divide)
    n, channels, *positions = x.meta.shape
    groups = g.call("reshape", x, (n, num_groups, channels // num_groups * math.prod(positions)))
    normed = g.call("layer_norm", groups, (groups.meta.shape[2],), None, None, eps)
    return _per_channel_affine(g, g.call("reshape", normed, x.meta.shape), weight, bias)


@lowers(F.instance_norm)
def instance_norm(g: Graph, x: Node, running_mean: Any = None, running_var: Any = None, weight: Any = None,
                  bias: Any = None, use_input_stats: bool = True, momentum: Any = 0.1, eps: float = 1e-5) -> Any:
    """Each sample's channel normalised over its positions; each running statistic (if given)
    updated with the batch's average of the samples' statistics, as torch does."""
    count = x.meta.numel // max(1, math.prod(x.meta.shape[:2])) if x.meta.ndim >= 3 else 0
    if not use_input_stats or count <= 1:  # (torch raises on one value per channel; none is empty)
        return extern(g, F.instance_norm, x, running_mean, running_var, weight, bias, use_input_stats,
                      momentum, eps)
    dims = tuple(range(2, x.meta.ndim))
    mean, var = g.call("mean", x, dims, True), g.call("var", x, dims, 0, True)  # (N, C, 1, ...), var biased
    y = _per_channel_affine(g, g.call("mul", g.call("sub", x, mean), g.call("rsqrt", g.call("add", var, eps))),
                            weight, bias)

    def batch_average(statistic: Node) -> Node:  # (N, C, 1, ...) -> (C,); bookkeeping, so no gradient
        return g.call("mean", g.call("detach", g.call("reshape", statistic, x.meta.shape[:2])), (0,), False)

    updates = {}
    if running_mean is not None:
        updates[running_mean] = g.call("lerp", running_mean, batch_average(mean), momentum)
    if running_var is not None:  # the running variance is the unbiased one
        updates[running_var] = g.call("lerp", running_var, g.call("mul", batch_average(var), count / (count - 1)),
                                      momentum)
    return Updates(y, updates)


lowers(F.linear)(lambda g, x, weight, bias=None: g.call("linear", x, weight, bias))
lowers(torch.matmul, torch.mm, methods=["matmul", "mm"])(lambda g, x, other: g.call("matmul", x, other))
lowers(torch.bmm, methods=["bmm"])(lambda g, x, mat2: g.call("bmm", x, mat2))


@lowers(torch.addmm, methods=["addmm"])
def addmm(g: Graph, x: Node, mat1: Node, mat2: Node, *, beta: Any = 1, alpha: Any = 1) -> Node:
    if (beta, alpha) != (1, 1):
        return extern(g, torch.addmm, x, mat1, mat2, beta=beta, alpha=alpha)
    return g.call("addmm", x, mat1, mat2)
