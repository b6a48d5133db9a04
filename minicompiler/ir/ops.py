"""The op table: every op a Graph node may apply, with its kind and its meaning in torch.

Kinds (they decide how the scheduler treats a node):
  pointwise  element by element, with broadcasting and PyTorch's type promotion
  reduction  folds the dims in `dims` (a tuple of ints) of its first argument (prod, argmax,
             argmin: ir/reductions.py)
  scan       a running reduction along one dim: the same shape as its input (ir/scans.py)
  scatter    writes values at computed positions into a copy of a base tensor (ir/scatter.py)
  view       a new shape or stride over the same elements (no arithmetic)
  extern     a library call kept whole (matmul, conv, ...): never fused, run by torch
  composite  a torch-level op that `decompose` rewrites into the kinds above

`impl` is the op's meaning: the reference interpreter runs it, and shape/dtype inference
runs it on data-less `meta` tensors, so inference and execution can never disagree.
The primitive signatures (what `decompose` produces and `fuse`/`codegen` consume) are
documented on each entry.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal

import torch
import torch.nn.functional as F

from minicompiler.ir import windows
from minicompiler.ir.extern_layouts import result_strides
from minicompiler.ir.gather import check_indices, load_at
from minicompiler.ir.graph import Node, TensorMeta, flatten, map_structure
from minicompiler.ir.symbolic import SymSize
from minicompiler.ir.symbolic_shapes import (
    broadcast,
    has_symbols,
    hinted,
    reduced,
    specialize,
    symbolic_shape,
    view_strides,
)

OpKind = Literal["pointwise", "reduction", "scan", "scatter", "view", "extern", "composite"]


@dataclass(frozen=True)
class OpDef:
    name: str
    kind: OpKind
    impl: Callable[..., torch.Tensor]
    doc: str = ""

    @property
    def is_primitive(self) -> bool:
        return self.kind != "composite"


OPS: dict[str, OpDef] = {}


def register(name: str, kind: OpKind, impl: Callable[..., torch.Tensor], doc: str = "") -> None:
    OPS[name] = OpDef(name, kind, impl, doc)


# --- primitives: pointwise ---------------------------------------------------------------
# Unary: op(x)
for _name, _fn in {
    "neg": torch.neg, "abs": torch.abs, "exp": torch.exp, "log": torch.log,
    "sqrt": torch.sqrt, "rsqrt": torch.rsqrt, "sin": torch.sin, "cos": torch.cos,
    "tan": torch.tan, "tanh": torch.tanh, "erf": torch.erf, "log1p": torch.log1p,
    "expm1": torch.expm1, "reciprocal": torch.reciprocal, "floor": torch.floor,
    "ceil": torch.ceil, "trunc": torch.trunc, "sign": torch.sign,
    "logical_not": torch.logical_not, "asin": torch.asin, "acos": torch.acos, "atan": torch.atan,
    "asinh": torch.asinh, "acosh": torch.acosh, "atanh": torch.atanh, "erfc": torch.erfc,
    "round": torch.round,  # to the nearest integer, halves to the even one
    "signbit": torch.signbit,  # bool: the sign bit is set (true for -0.0)
    # 1 / (1 + e^-x), a primitive so that its gradient is y (1 - y) as torch's: differentiated
    # as a formula, it is 0 * inf = NaN where e^-x overflows (x < -88 in float32)
    "sigmoid": torch.sigmoid,
}.items():
    register(_name, "pointwise", _fn, f"{_name}(x)")

COMPARISONS = frozenset({"eq", "ne", "lt", "le", "gt", "ge"})  # their results are bool
# ops whose result is bool though their operands are numbers (they keep their own dtype)
PREDICATES = COMPARISONS | {"signbit"}

# Binary: op(a, b), either may be a Python scalar; broadcasting and type promotion as torch.
for _name, _fn in {
    "add": torch.add, "sub": torch.sub, "mul": torch.mul, "div": torch.div,
    "pow": torch.pow, "maximum": torch.maximum, "minimum": torch.minimum,
    "eq": torch.eq, "ne": torch.ne, "lt": torch.lt, "le": torch.le, "gt": torch.gt,
    "ge": torch.ge, "logical_and": torch.logical_and, "logical_or": torch.logical_or,
    "remainder": torch.remainder, "atan2": torch.atan2,
    "fmod": torch.fmod,  # C's remainder: the sign of the dividend
}.items():
    register(_name, "pointwise", _fn, f"{_name}(a, b)")


def _maximum(a: Any, b: Any) -> torch.Tensor:
    # torch.maximum wants two tensors; allow a Python scalar on either side.
    if not isinstance(a, torch.Tensor):
        a, b = b, a
    if not isinstance(b, torch.Tensor):
        return torch.clamp_min(a, b).to(torch.result_type(a, b))
    return torch.maximum(a, b)


def _minimum(a: Any, b: Any) -> torch.Tensor:
    if not isinstance(a, torch.Tensor):
        a, b = b, a
    if not isinstance(b, torch.Tensor):
        return torch.clamp_max(a, b).to(torch.result_type(a, b))
    return torch.minimum(a, b)


OPS["maximum"] = OpDef("maximum", "pointwise", _maximum, "maximum(a, b)")
OPS["minimum"] = OpDef("minimum", "pointwise", _minimum, "minimum(a, b)")

# Special functions with no closed formula in the ops above: each backend computes them with a
# helper of its prelude (codegen/cpp_special.py, codegen/triton_special.py), by torch's algorithm.
for _name, _fn in {
    "lgamma": torch.lgamma, "digamma": torch.digamma, "trigamma": lambda x: torch.polygamma(1, x),
    "erfinv": torch.erfinv, "erfcx": torch.special.erfcx, "log_ndtr": torch.special.log_ndtr,
    "ndtri": torch.special.ndtri, "i0": torch.i0, "i0e": torch.special.i0e, "i1": torch.special.i1,
    "i1e": torch.special.i1e,
}.items():
    register(_name, "pointwise", _fn, f"{_name}(x)")
register("zeta", "pointwise", torch.special.zeta, "zeta(x, q): the Hurwitz zeta function sum_k (k + q)^-x")
register("nextafter", "pointwise", torch.nextafter, "nextafter(a, b): the float after a in the direction of b")
# torch.special's Bessel and Airy functions, and its orthogonal polynomials of x and a degree n (read
# as an integer), computed by torch's algorithms too (codegen/cpp_bessel.py, triton_bessel.py,
# orthogonal_polynomials.py). torch has no derivative for any of them (autograd/special_rules.py).
BESSEL_FUNCTIONS = (
    "bessel_j0", "bessel_j1", "bessel_y0", "bessel_y1", "modified_bessel_i0", "modified_bessel_i1",
    "modified_bessel_k0", "modified_bessel_k1", "scaled_modified_bessel_k0", "scaled_modified_bessel_k1",
    "spherical_bessel_j0", "airy_ai",
)
ORTHOGONAL_POLYNOMIALS = tuple(f"{kind}_polynomial_{letter}" for kind, letters in [
    ("chebyshev", "tuvw"), ("shifted_chebyshev", "tuvw"), ("hermite", ["h", "he"]), ("laguerre", "l"),
    ("legendre", "p")] for letter in letters)
for _name in BESSEL_FUNCTIONS:
    register(_name, "pointwise", getattr(torch.special, _name), f"{_name}(x)")
for _name in ORTHOGONAL_POLYNOMIALS:
    register(_name, "pointwise", getattr(torch.special, _name), f"{_name}(x, n)")
# ... and formulas of them (decompose/special_functions.py)
register("polygamma", "composite", lambda n, x: torch.polygamma(n, x), "polygamma(n, x): digamma's n-th derivative")
register("mvlgamma", "composite", lambda x, p: torch.mvlgamma(x, p), "mvlgamma(x, p): the multivariate lgamma")

register("where", "pointwise", torch.where, "where(cond, a, b)")
# a copy into new contiguous memory: in a kernel, the value stored once more
register("clone", "pointwise", lambda x: x.clone(memory_format=torch.contiguous_format), "clone(x)")
register("convert", "pointwise", lambda x, dtype: x.to(dtype), "convert(x, dtype): cast")
register(
    "full", "pointwise",
    lambda shape, value, dtype, device="cpu": torch.full(shape, value, dtype=dtype, device=device),
    "full(shape, value, dtype, device): a constant tensor",
)
register(
    "iota", "pointwise",
    lambda shape, dim, dtype, device="cpu": torch.arange(shape[dim], dtype=dtype, device=device).reshape(shape),
    "iota(shape, dim, dtype, device): 0, 1, 2, ... along `dim`, the only dim of `shape` that is not 1",
)
# ops without tensor inputs: a kernel that reads one computes it where it reads it (no buffer)
INLINE = frozenset({"full", "iota"})


# The one op that reads a buffer anywhere but at the element the loop is at. flip, roll, pad,
# cat, repeat, gather, embedding, ... are each a formula of coordinates (iota) that says where to
# read, then one load_at. Its indices are in range: the decompositions clamp or check them.
register(
    "load_at", "pointwise", load_at,
    "load_at(x, indices): out[p] = x[indices[0][p], indices[1][p], ...], one integer tensor (or int) "
    "per dim of x, broadcast together to out's shape; x must be in memory",
)

# --- primitives: reductions --------------------------------------------------------------
# op(x, dims: tuple[int, ...], keepdim: bool). Non-negative dims, sorted.
register("sum", "reduction", lambda x, dims, keepdim=False: torch.sum(x, dims, keepdim), "sum(x, dims, keepdim)")
register("amax", "reduction", lambda x, dims, keepdim=False: torch.amax(x, dims, keepdim), "amax(x, dims, keepdim)")
register("amin", "reduction", lambda x, dims, keepdim=False: torch.amin(x, dims, keepdim), "amin(x, dims, keepdim)")

# prod, argmax and argmin: ir/reductions.py

# --- primitives: views -------------------------------------------------------------------
register("reshape", "view", lambda x, shape: x.reshape(shape), "reshape(x, shape)")
register("permute", "view", lambda x, dims: x.permute(dims), "permute(x, dims)")
register("expand", "view", lambda x, shape: x.expand(shape), "expand(x, shape)")
register(
    "slice", "view",
    lambda x, dim, start, end, step=1: x[(slice(None),) * dim + (slice(start, end, step),)],
    "slice(x, dim, start, end, step)",
)
register("detach", "view", lambda x: x.detach(), "detach(x): the same tensor, through which no gradient flows")

# --- primitives: extern calls (kept whole, run by torch / a vendor library) ---------------
register("matmul", "extern", torch.matmul, "matmul(a, b)")
register("addmm", "extern", torch.addmm, "addmm(bias, a, b) = bias + a @ b")
register("bmm", "extern", torch.bmm, "bmm(a, b)")
register("cat", "extern", lambda tensors, dim=0: torch.cat(tensors, dim), "cat(tensors, dim)")


register(
    "check_indices", "extern", check_indices,
    "check_indices(index, low, high): index itself, once every element is in [low, high) (else "
    "IndexError, as eager's): guards a load_at of indices a user gave",
)
register(
    "torch_call", "extern",
    lambda fn, *args, **kwargs: fn(*args, **kwargs),
    "torch_call(fn, *args): any torch function the compiler does not know, run as is",
)


def _torch_call_vjp(fn: Callable[..., torch.Tensor], argnum: int, grad: torch.Tensor, *args: Any,
                    **kwargs: Any) -> torch.Tensor:
    if args[argnum].device.type == "meta":  # shape inference: the gradient looks like the input
        return torch.empty_like(args[argnum])
    return torch_call_vjps(fn, (argnum,), grad, *args, **kwargs)[0]


def torch_call_vjps(fn: Callable[..., torch.Tensor], argnums: tuple[int, ...], grad: torch.Tensor, *args: Any,
                    **kwargs: Any) -> tuple[torch.Tensor, ...]:
    """The gradients of fn(*args) w.r.t. each of args[argnums]: the call recomputed once under torch
    autograd, one backward for all of them (the wrapper gathers a call's `torch_call_vjp`s into one:
    three of them for attention's q, k and v ran its forward and backward three times)."""
    with torch.enable_grad():
        primals = {i: args[i].detach().requires_grad_() for i in argnums}
        output = fn(*(primals.get(i, arg) for i, arg in enumerate(args)), **kwargs)
        if not output.requires_grad:  # x.new_tensor(...), x.new_zeros(...): made from x, not of it
            return tuple(torch.zeros_like(primals[i]) for i in argnums)
        grads = torch.autograd.grad(output, [primals[i] for i in argnums], grad, allow_unused=True)
    return tuple(torch.zeros_like(primals[i]) if g is None else g for i, g in zip(argnums, grads, strict=True))


register(
    "torch_call_vjp", "extern", _torch_call_vjp,
    "torch_call_vjp(fn, argnum, grad, *args): the gradient of fn(*args) w.r.t. args[argnum] "
    "(the backward of a torch_call, computed by torch autograd)",
)

# --- composites: torch-level ops that `decompose` rewrites into primitives ---------------
_COMPOSITES: dict[str, Callable[..., torch.Tensor]] = {
    "relu": torch.relu,
    "gelu": lambda x, approximate="none": F.gelu(x, approximate=approximate),
    "silu": F.silu,
    "clamp": lambda x, min=None, max=None: torch.clamp(x, min, max),
    "mean": lambda x, dims=None, keepdim=False, dtype=None: torch.mean(x, dims, keepdim, dtype=dtype),
    "var": lambda x, dims=None, correction=1, keepdim=False: torch.var(x, dims, correction=correction, keepdim=keepdim),
    "std": lambda x, dims=None, correction=1, keepdim=False: torch.std(x, dims, correction=correction, keepdim=keepdim),
    "softmax": lambda x, dim, dtype=None: torch.softmax(x, dim, dtype=dtype),
    "log_softmax": lambda x, dim, dtype=None: torch.log_softmax(x, dim, dtype=dtype),
    "layer_norm": lambda x, normalized_shape, weight=None, bias=None, eps=1e-5: F.layer_norm(
        x, normalized_shape, weight, bias, eps
    ),
    "linear": lambda x, weight, bias=None: F.linear(x, weight, bias),
    "square": torch.square,
    "transpose": lambda x, dim0, dim1: x.transpose(dim0, dim1),
    "unsqueeze": lambda x, dim: x.unsqueeze(dim),
    "squeeze": lambda x, dims=None: x.squeeze() if dims is None else x.squeeze(dims),
    "select": lambda x, dim, index: x.select(dim, index),
    "contiguous": lambda x: x.contiguous(),
    "softplus": F.softplus,
    "leaky_relu": lambda x, negative_slope=0.01: F.leaky_relu(x, negative_slope),
    "hardtanh": lambda x, min_val=-1.0, max_val=1.0: F.hardtanh(x, min_val, max_val),
    "addcmul": lambda x, a, b, value=1: torch.addcmul(x, a, b, value=value),
    "lerp": torch.lerp,
    # pointwise ops with a known formula in primitives (decompose/pointwise.py)
    "sinh": torch.sinh, "cosh": torch.cosh, "exp2": torch.exp2, "log2": torch.log2, "log10": torch.log10,
    "frac": torch.frac, "hypot": torch.hypot, "logical_xor": torch.logical_xor,
    "deg2rad": torch.deg2rad, "rad2deg": torch.rad2deg,
    "softsign": F.softsign, "hardsigmoid": F.hardsigmoid, "hardswish": F.hardswish, "mish": F.mish,
    "elu": lambda x, alpha=1.0: F.elu(x, alpha), "selu": F.selu, "celu": lambda x, alpha=1.0: F.celu(x, alpha),
    # more formulas: value tests, special functions, shrinkers (decompose/special.py)
    "isnan": torch.isnan, "isinf": torch.isinf, "isposinf": torch.isposinf, "isneginf": torch.isneginf,
    "isfinite": torch.isfinite, "sinc": torch.sinc, "xlogy": torch.xlogy, "xlog1py": torch.special.xlog1py,
    "entr": torch.special.entr, "heaviside": torch.heaviside, "fmax": torch.fmax, "fmin": torch.fmin,
    "logaddexp": torch.logaddexp, "logaddexp2": torch.logaddexp2, "logsigmoid": F.logsigmoid,
    "tanhshrink": F.tanhshrink, "float_power": torch.float_power,
    "nan_to_num": lambda x, nan=0.0, posinf=None, neginf=None: torch.nan_to_num(x, nan, posinf, neginf),
    "logit": lambda x, eps=None: torch.logit(x, eps),
    "hardshrink": lambda x, lambd=0.5: F.hardshrink(x, lambd),
    "softshrink": lambda x, lambd=0.5: F.softshrink(x, lambd),
    "threshold": lambda x, threshold, value: F.threshold(x, threshold, value),
    "copysign": torch.copysign,
    "tril": lambda x, diagonal=0: torch.tril(x, diagonal), "triu": lambda x, diagonal=0: torch.triu(x, diagonal),
    "round_decimals": lambda x, decimals: torch.round(x, decimals=decimals),
    "div_rounded": lambda a, b, rounding_mode: torch.div(a, b, rounding_mode=rounding_mode),  # floating only
    # gathers: one load_at each, at a formula of the output's coordinates (decompose/gathers.py)
    "flip": lambda x, dims: torch.flip(x, dims), "roll": lambda x, shifts, dims: torch.roll(x, shifts, dims),
    "repeat": lambda x, repeats: x.repeat(repeats),
    "pad": lambda x, pad, mode="constant", value=None: F.pad(x, pad, mode, value),
    "gather": lambda x, dim, index: torch.gather(x, dim, index),
    "index_select": lambda x, dim, index: torch.index_select(x, dim, index), "take": torch.take,
    "embedding": lambda ids, weight, padding_idx=None: F.embedding(ids, weight, padding_idx),
    "diag_embed": lambda x, offset=0, dim1=-2, dim2=-1: torch.diag_embed(x, offset, dim1, dim2),
    "diagonal_copy": lambda x, offset=0, dim1=0, dim2=1: torch.diagonal_copy(x, offset, dim1, dim2),
    "slice_scatter": lambda x, src, dim=0, start=None, end=None, step=1: torch.slice_scatter(
        x, src, dim, start, end, step),
    "diagonal_scatter": lambda x, src, offset=0, dim1=0, dim2=1: torch.diagonal_scatter(x, src, offset, dim1, dim2),
    "block_diag": torch.block_diag, "cartesian_prod": torch.cartesian_prod,
    "index_fill": lambda x, dim, index, value: torch.index_fill(x, dim, index, value),
    # windows: pools, resizing, sliding copies, each a load_at over (*out, *window) then a reduction
    # or a weighted sum (decompose/pooling.py, decompose/resizing.py; meanings in ir/windows.py)
    "avg_pool": windows.avg_pool, "max_pool": windows.max_pool, "max_pool_indices": windows.max_pool_indices,
    "adaptive_avg_pool": windows.adaptive_avg_pool, "adaptive_max_pool": windows.adaptive_max_pool,
    "adaptive_max_pool_indices": windows.adaptive_max_pool_indices, "upsample": windows.upsample,
    "unfold_copy": torch.unfold_copy, "im2col": windows.im2col,
    # reductions written with sum/amax/amin (decompose/reductions.py); dims as in torch
    "logsumexp": lambda x, dims, keepdim=False: torch.logsumexp(x, dims, keepdim),
    "vector_norm": lambda x, ord=2, dims=None, keepdim=False: torch.linalg.vector_norm(x, ord, dims, keepdim),
    "any": lambda x, dims=None, keepdim=False: torch.any(x, dims, keepdim),
    "all": lambda x, dims=None, keepdim=False: torch.all(x, dims, keepdim),
    "count_nonzero": lambda x, dims=None: torch.count_nonzero(x, dims),
    "nansum": lambda x, dims=None, keepdim=False: torch.nansum(x, dims, keepdim),
    # losses (decompose/losses.py): the elementwise loss, then reduced ("none" | "mean" | "sum")
    "mse_loss": lambda x, y, reduction="mean": F.mse_loss(x, y, reduction=reduction),
    "l1_loss": lambda x, y, reduction="mean": F.l1_loss(x, y, reduction=reduction),
    "smooth_l1_loss": lambda x, y, reduction="mean", beta=1.0: F.smooth_l1_loss(x, y, reduction=reduction, beta=beta),
    "huber_loss": lambda x, y, reduction="mean", delta=1.0: F.huber_loss(x, y, reduction=reduction, delta=delta),
    "soft_margin_loss": lambda x, y, reduction="mean": F.soft_margin_loss(x, y, reduction=reduction),
    "binary_cross_entropy": lambda x, y, weight=None, reduction="mean": F.binary_cross_entropy(
        x, y, weight, reduction=reduction),
    "binary_cross_entropy_with_logits": lambda x, y, weight=None, reduction="mean", pos_weight=None:
        F.binary_cross_entropy_with_logits(x, y, weight, reduction=reduction, pos_weight=pos_weight),
    "kl_div": lambda x, y, reduction="mean", log_target=False: F.kl_div(
        x, y, reduction=reduction, log_target=log_target),
    "margin_ranking_loss": lambda x1, x2, y, margin=0.0, reduction="mean": F.margin_ranking_loss(
        x1, x2, y, margin, reduction=reduction),
    "hinge_embedding_loss": lambda x, y, margin=1.0, reduction="mean": F.hinge_embedding_loss(
        x, y, margin, reduction=reduction),
    "poisson_nll_loss": lambda x, y, log_input=True, full=False, eps=1e-8, reduction="mean": F.poisson_nll_loss(
        x, y, log_input, full, eps=eps, reduction=reduction),
}
for _name, _fn in _COMPOSITES.items():
    register(_name, "composite", _fn)


def is_primitive(op: str) -> bool:
    return op in OPS and OPS[op].is_primitive


def _device_of(op: str, args: Any, kwargs: dict[str, Any]) -> torch.device:
    """Where the result lives: with its tensor inputs, else where a factory (full, iota) is told,
    by keyword or by position, else the CPU (as torch's factories)."""
    for value in flatten((args, kwargs)):
        if isinstance(value, Node) and value.meta is not None:
            return value.meta.device
    device = kwargs.get("device")
    if device is None:  # full(shape, value, dtype, device), iota(...): by position
        device = inspect.signature(OPS[op].impl).bind(*args, **kwargs).arguments.get("device")
    return torch.device(device) if device is not None else torch.device("cpu")


def _to_fake(value: Any) -> Any:
    return value.meta.fake() if isinstance(value, Node) else value


def _run_on_one_element(op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], torch.dtype]:
    """Pointwise and reduction ops: their dtype comes from running torch's kernel on one-element
    CPU tensors of the same dtypes and ranks (which follows torch's type promotion exactly), and
    their shape from broadcasting and the reduced dims (in symbols, when sizes are symbolic).

    (Cheaper than meta tensors here: torch computes many pointwise ops on meta tensors in Python
    code whose first use imports all of torch._dynamo, seconds on a first compile.)"""

    def tiny(value: Any) -> Any:
        if isinstance(value, SymSize):
            return value.hint
        if not isinstance(value, Node):
            return value
        return torch.ones((1,) * value.meta.ndim, dtype=value.meta.dtype)  # ones: no integer x % 0

    if op in INLINE:  # full(shape, value, dtype), iota(shape, dim, dtype): nothing to infer
        return tuple(args[0]), args[2]
    if op == "load_at":  # x's dtype, the indices' broadcast shape
        return broadcast([i.meta.shape for i in args[1] if isinstance(i, Node)]), args[0].meta.dtype
    kwargs = {k: ("cpu" if k == "device" else v) for k, v in kwargs.items()}
    dtype = OPS[op].impl(*map_structure(tiny, args), **map_structure(tiny, kwargs)).dtype
    tensors = [a.meta.shape for a in flatten(args) if isinstance(a, Node)]
    if OPS[op].kind == "pointwise":
        return broadcast(tensors), dtype
    if OPS[op].kind == "scan":
        return args[0].meta.shape, dtype
    dims = args[1] if len(args) > 1 else kwargs.get("dims", ())
    keepdim = args[2] if len(args) > 2 else kwargs.get("keepdim", False)
    return reduced(args[0].meta.shape, dims, keepdim), dtype


def _run_on_meta(op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> tuple[tuple[Any, ...], torch.dtype,
                                                                                 tuple[Any, ...] | None]:
    """Views, externs and composites: torch's own implementation run on meta tensors. With symbolic
    sizes it runs on the hint sizes, and the shape comes from a rule in symbolic_shapes.py (or,
    for an op without one, the sizes it reads are guarded to stay as they are)."""
    symbolic = has_symbols(args, kwargs)
    to_fake = hinted if symbolic else (lambda value: map_structure(_to_fake, value))
    fake_kwargs = to_fake(kwargs)
    if "device" in fake_kwargs:
        fake_kwargs["device"] = "meta"
    result = OPS[op].impl(*to_fake(args), **fake_kwargs)
    if not isinstance(result, torch.Tensor):
        raise TypeError(f"op {op!r} must produce one tensor, got {type(result).__name__}")
    shape, strides = tuple(result.shape), tuple(result.stride())
    if symbolic:
        shape = symbolic_shape(op, args, kwargs)
        strides = view_strides(op, args, shape) if shape is not None and OPS[op].kind == "view" else None
        # no rule, or (a safety net) a rule that disagrees with torch on this call's sizes
        if shape is None or (OPS[op].kind == "view" and strides is None) or not _agrees(shape, strides, result):
            specialize(args, kwargs)  # this call's sizes, guarded to stay
            shape, strides = tuple(result.shape), tuple(result.stride())
    return shape, result.dtype, strides


def _agrees(shape: tuple[Any, ...], strides: tuple[Any, ...] | None, result: torch.Tensor) -> bool:
    """Do symbolic shape (and view strides) give torch's result for the hint sizes?"""
    if hinted(shape) != tuple(result.shape):
        return False
    return strides is None or all(n == 1 or s == t for n, s, t in zip(result.shape, hinted(strides), result.stride(),
                                                                         strict=True))


def infer_meta(op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> TensorMeta:
    """Shape, dtype and strides of `op(*args)`, found by running the op on meta tensors.

    Running PyTorch's own implementation on data-less tensors gives exactly PyTorch's
    broadcasting and type-promotion results (this is what torch's FakeTensor does).
    """
    if op not in OPS:
        raise KeyError(f"unknown op {op!r}: add it to minicompiler/ir/ops.py")

    if OPS[op].kind in ("pointwise", "reduction", "scan"):
        shape, dtype = _run_on_one_element(op, args, kwargs)
        strides = None
    else:
        shape, dtype, strides = _run_on_meta(op, args, kwargs)
    # Views keep torch's strides (they alias their input); every other op writes a fresh
    # contiguous buffer in compiled code, so we record it as contiguous, but for the externs whose
    # result torch lays out otherwise on every device (extern_layouts.py)
    strides = strides if OPS[op].kind == "view" else result_strides(op, args, shape)
    return TensorMeta(shape, dtype, _device_of(op, args, kwargs), strides)
