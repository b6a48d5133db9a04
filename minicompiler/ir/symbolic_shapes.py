"""Shape rules for ops whose inputs have symbolic sizes (see symbolic.py).

`infer_meta` learns an op's dtype (and its shape for this call) by running torch on meta
tensors of the hint sizes; these rules say what the shape is *in symbols*. An op without a rule
here is specialized instead: its inputs' symbolic sizes are guarded to stay what they are now.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

import torch
import torch.nn.functional as F

from minicompiler.ir.gather import accumulate_at, accumulate_rows
from minicompiler.ir.graph import Node, TensorMeta, contiguous_strides, flatten, map_structure
from minicompiler.ir.symbolic import SymSize, is_symbolic

Shape = tuple[Any, ...]
ShapeRule = Callable[..., Shape]

# Ops whose result has the shape of their first argument (elementwise, or normalizing along dims).
SAME_SHAPE = frozenset({
    "sigmoid", "relu", "gelu", "silu", "clamp", "softmax", "log_softmax", "layer_norm", "square",
    "contiguous", "softplus", "leaky_relu", "hardtanh", "clone", "detach", "flip", "roll", "check_indices",
    "store_at",
})


def has_symbols(args: tuple[Any, ...], kwargs: dict[str, Any]) -> bool:
    for value in flatten((args, kwargs)):
        if isinstance(value, Node) and value.meta is not None and is_symbolic(value.meta.shape):
            return True
        if isinstance(value, SymSize):
            return True
    return False


def hinted(value: Any) -> Any:
    """`value` with sizes replaced by their hints, without guarding them: to ask torch what an op
    does for this call (Nodes become meta tensors of the hint sizes)."""
    def leaf(v: Any) -> Any:
        if isinstance(v, Node):
            meta = v.meta
            return TensorMeta(_hints(meta.shape), meta.dtype, meta.device,
                              None if meta.strides is None else _hints(meta.strides)).fake()
        return v.hint if isinstance(v, SymSize) else v
    return map_structure(leaf, value)


def _hints(sizes: Shape) -> tuple[int, ...]:
    return tuple(s.hint if isinstance(s, SymSize) else s for s in sizes)


def specialize(args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
    """Guard every symbolic size an op without a rule reads to keep its current value."""
    for value in flatten((args, kwargs)):
        sizes = value.meta.shape + value.meta.stride() if isinstance(value, Node) and value.meta else (value,)
        for size in sizes:
            if isinstance(size, SymSize):
                int(size)


def broadcast(shapes: list[Shape]) -> Shape:
    """torch.broadcast_shapes, for sizes that may be symbolic."""
    ndim = max(map(len, shapes), default=0)
    result: list[Any] = [1] * ndim
    for shape in shapes:
        for d, size in enumerate(shape, ndim - len(shape)):
            if size != 1:
                if result[d] != 1 and result[d] != size:
                    raise RuntimeError(f"shapes {shapes} do not broadcast")
                result[d] = size
    return tuple(result)


def reduced(shape: Shape, dims: Any, keepdim: bool) -> Shape:
    """The shape a reduction over `dims` leaves."""
    dims = (dims,) if isinstance(dims, int) else tuple(dims or ())  # None and () fold every dim
    folded = {d % len(shape) for d in dims} if dims and shape else set(range(len(shape)))
    return tuple(1 if d in folded else s for d, s in enumerate(shape) if keepdim or d not in folded)


def reshape_target(shape: Shape, target: Shape) -> Shape:
    """torch's reshape rules on sizes that may be symbolic: one -1 is inferred, the count kept."""
    numel = math.prod(shape)
    if target.count(-1) > 1:
        raise RuntimeError("only one dimension can be inferred")
    if -1 in target:
        known = math.prod(s for s in target if not (isinstance(s, int) and s == -1))
        target = tuple(numel // known if isinstance(s, int) and s == -1 else s for s in target)
    if math.prod(target) != numel:
        raise RuntimeError(f"shape {target} is invalid for input of size {numel}")
    return tuple(target)


def expand_target(shape: Shape, target: Shape) -> Shape:
    """torch's expand rules: -1 keeps a size; a size other than 1 must match."""
    pad = len(target) - len(shape)
    if pad < 0:
        raise RuntimeError(f"expand: the target {target} has fewer dims than {shape}")
    result = tuple(shape[d - pad] if isinstance(s, int) and s == -1 else s for d, s in enumerate(target))
    if any(shape[d - pad] != 1 and shape[d - pad] != result[d] for d in range(pad, len(target))):
        raise RuntimeError(f"cannot expand {shape} to {target}")
    return result


def slice_bounds(key: slice, size: Any) -> tuple[Any, Any, int]:
    """`key.indices(size)` (Python's rules for None, negative and too-large bounds, step > 0),
    for a size and bounds that may be symbolic: x[:, :-1] on a dim of size s1 stops at s1 - 1."""
    if not (is_symbolic(size) or is_symbolic((key.start, key.stop))):
        return key.indices(size)
    step = 1 if key.step is None else int(key.step)
    if step <= 0:
        raise ValueError("slice step must be positive")

    def bound(value: Any, default: Any) -> Any:
        if value is None:
            return default
        if value < 0:
            value = value + size
        return max(0, min(value, size))

    return bound(key.start, 0), bound(key.stop, size), step


def _arg(args: tuple, kwargs: dict, index: int, name: str, default: Any = None) -> Any:
    return args[index] if len(args) > index else kwargs.get(name, default)


def _inner(a: Any, b: Any) -> None:
    """The contracted sizes of a product must agree (as torch would check; a guard if symbolic)."""
    if a != b:
        raise RuntimeError(f"inner sizes {a} and {b} of a matrix product differ")


def _matmul(a: Shape, b: Shape) -> Shape:
    _inner(a[-1], b[0] if len(b) == 1 else b[-2])
    if len(a) == 1 and len(b) == 1:
        return ()
    if len(a) == 1:
        return b[:-2] + b[-1:]
    if len(b) == 1:
        return a[:-1]
    return broadcast([a[:-2], b[:-2]]) + (a[-2], b[-1])


def _slice(x: Shape, dim: int, start: int, end: int, step: int = 1) -> Shape:
    size = x[dim]
    if step != 1 or start < 0 or end < 0:
        raise _NoRule
    start, end = min(start, size), min(end, size)
    return x[:dim] + (max(end - start, 0),) + x[dim + 1:]


def _squeeze(x: Shape, dims: Any = None) -> Shape:
    drop = set(range(len(x))) if dims is None else {dims} if isinstance(dims, int) else set(dims)
    return tuple(s for d, s in enumerate(x) if not (d in drop and s == 1))


def _unsqueeze(x: Shape, dim: int) -> Shape:
    return x[:dim] + (1,) + x[dim:]


def _transpose(x: Shape, d0: int, d1: int) -> Shape:
    shape = list(x)
    shape[d0], shape[d1] = shape[d1], shape[d0]
    return tuple(shape)


class _NoRule(Exception):
    """This call of an op has no symbolic rule (e.g. a slice with a step): specialize it."""


def _shape(node: Any) -> Shape:
    return node.meta.shape


RULES: dict[str, ShapeRule] = {
    "reshape": lambda x, shape: tuple(shape),
    "expand": lambda x, shape: tuple(shape),
    "permute": lambda x, dims: tuple(_shape(x)[d] for d in dims),
    "slice": lambda x, *rest: _slice(_shape(x), *rest),
    "squeeze": lambda x, dims=None: _squeeze(_shape(x), dims),
    "unsqueeze": lambda x, dim: _unsqueeze(_shape(x), dim),
    "transpose": lambda x, d0, d1: _transpose(_shape(x), d0, d1),
    "select": lambda x, dim, index: _shape(x)[:dim] + _shape(x)[dim + 1:],
    "matmul": lambda a, b: _matmul(_shape(a), _shape(b)),
    "bmm": lambda a, b: _matmul(_shape(a), _shape(b)),
    "addmm": lambda bias, a, b: _matmul(_shape(a), _shape(b)),
    "linear": lambda x, w, b=None: _matmul(_shape(x), _shape(w)[::-1]),
    "cat": lambda tensors, dim=0: _cat([_shape(t) for t in tensors], dim),
    "torch_call": lambda fn, *args, **kwargs: _torch_call(fn, *args, **kwargs),
    "torch_call_vjp": lambda fn, argnum, grad, *args, **kwargs: _shape(args[argnum]),  # like its input
    "recorded_call": lambda name, differentiable, fn, *args, **kwargs: _torch_call(fn, *args, **kwargs),
    "recorded_vjp": lambda name, result, fn, argnum, grad, *args, **kwargs: _shape(args[argnum]),
    "full": lambda shape, *rest, **kw: tuple(shape),
    "iota": lambda shape, *rest, **kw: tuple(shape),
    "lerp": lambda *args: broadcast([_shape(a) for a in args if isinstance(a, Node)]),
    "embedding": lambda ids, weight, *rest: _shape(ids) + _shape(weight)[1:],
    "gather": lambda x, dim, index: _shape(index),
    "take": lambda x, index: _shape(index),
    "repeat": lambda x, repeats: tuple(n * r for n, r in zip((1,) * (len(repeats) - len(_shape(x))) + _shape(x),
                                                              repeats, strict=True)),
    "pad": lambda x, pad, *rest: _padded(_shape(x), pad),
    "addcmul": lambda *args, **kw: broadcast([_shape(a) for a in args if isinstance(a, Node)]),
}


def _arange(*args: Any, **kwargs: Any) -> Shape:
    """torch.arange(n) of a size n (integer bounds, step 1): n - start elements."""
    if len(args) > 2 or not all(isinstance(a, int | SymSize) for a in args):
        raise _NoRule
    start, end = (0, args[0]) if len(args) == 1 else args
    return (max(end - start, 0),)


# torch functions kept whole (`torch_call`) whose result shape is known in symbols
TORCH_CALL_RULES: dict[Callable[..., Any], ShapeRule] = {
    F.embedding: lambda ids, weight, *rest, **kw: _shape(ids) + _shape(weight)[1:],
    # the queries' rows, the values' width (replace/attention.py makes these calls)
    F.scaled_dot_product_attention: lambda q, k, v, *rest, **kw: _shape(q)[:-1] + _shape(v)[-1:],
    torch.arange: _arange,
    accumulate_at: lambda shape, indices, grad: tuple(shape),
    accumulate_rows: lambda shape, rows, grad: tuple(shape),
}


def _torch_call(fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Shape:
    if fn not in TORCH_CALL_RULES:
        raise _NoRule
    return TORCH_CALL_RULES[fn](*args, **kwargs)


def _padded(x: Shape, pad: Any) -> Shape:
    """F.pad's result: (before, after) pairs for the last dim, then the one before it, ..."""
    shape = list(x)
    for k in range(len(pad) // 2):
        shape[-1 - k] = shape[-1 - k] + pad[2 * k] + pad[2 * k + 1]
    return tuple(shape)


def _cat(shapes: list[Shape], dim: int) -> Shape:
    shapes = [s for s in shapes if s != (0,)]  # torch.cat skips empty 1-d tensors
    first = shapes[0]
    return first[:dim] + (sum(s[dim] for s in shapes),) + first[dim + 1:]


def symbolic_shape(op: str, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Shape | None:
    """The op's result shape in symbols, or None when no rule covers this call."""
    try:
        if op in SAME_SHAPE:
            return _shape(args[0])
        if op == "mean":
            return reduced(_shape(args[0]), _arg(args, kwargs, 1, "dims"), _arg(args, kwargs, 2, "keepdim", False))
        if op in ("var", "std"):
            return reduced(_shape(args[0]), _arg(args, kwargs, 1, "dims"), _arg(args, kwargs, 3, "keepdim", False))
        if op in RULES:
            return RULES[op](*args, **kwargs)
    except _NoRule:
        return None
    return None


def reshape_view_strides(shape: Shape, strides: Shape, target: Shape) -> Shape | None:
    """The strides of `target` as a view of a tensor with `shape` and `strides`, or None when no
    view can have it (torch's computeStride: each run of dims that are contiguous with each
    other may be split or merged, no more). On symbolic sizes each comparison is a guard."""
    if not shape or not target:
        return None  # 0-d: left to torch
    result: list[Any] = [0] * len(target)
    view_d, chunk_stride = len(target) - 1, strides[-1]
    tensor_numel, view_numel = 1, 1
    for tensor_d in reversed(range(len(shape))):
        tensor_numel *= shape[tensor_d]
        chunk_ends = tensor_d == 0 or (shape[tensor_d - 1] != 1
                                       and strides[tensor_d - 1] != tensor_numel * chunk_stride)
        if chunk_ends:
            while view_d >= 0 and (view_numel < tensor_numel or target[view_d] == 1):
                result[view_d] = view_numel * chunk_stride
                view_numel *= target[view_d]
                view_d -= 1
            if view_numel != tensor_numel:
                return None
            if tensor_d > 0:
                chunk_stride, tensor_numel, view_numel = strides[tensor_d - 1], 1, 1
    return tuple(result) if view_d == -1 else None


def view_strides(op: str, args: tuple[Any, ...], shape: Shape) -> Shape | None:
    """A view's strides in symbols, or None when the rule would need torch's own view logic."""
    x = args[0].meta
    strides = x.stride()
    if op == "reshape":  # a view where one can be made, else (as torch does) a contiguous copy
        if x.is_contiguous():
            return contiguous_strides(shape)
        return reshape_view_strides(x.shape, strides, shape) or contiguous_strides(shape)
    if op == "permute":
        return tuple(strides[d] for d in args[1])
    if op == "expand":
        pad = len(shape) - x.ndim
        return tuple(0 if d < pad or (x.shape[d - pad] == 1 and shape[d] != 1) else strides[d - pad]
                     for d in range(len(shape)))
    if op == "slice":
        return strides
    if op == "detach":
        return strides
    return None
