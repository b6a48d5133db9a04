"""Lowerings for shapes: views, indexing, joining and splitting, metadata and dtype casts.

Same conventions as `torch_ops.py`. Sizes with -1, negative dims and `x[..., None, 1:]`
are resolved here, at capture time, so later stages only ever see concrete shapes and
non-negative dims. A view whose result equals its input (`x.reshape(x.shape)`) adds no node.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from minicompiler.capture.errors import Unsupported
from minicompiler.capture.torch_ops import InPlace, Lowering, extern, lowers, norm_dim
from minicompiler.ir import Graph, Node, map_structure
from minicompiler.ir.symbolic import is_symbolic
from minicompiler.ir.symbolic_shapes import expand_target, reshape_target, slice_bounds

TENSOR_PROPERTIES: dict[str, Lowering] = {}  # "shape" (as in x.shape) -> lowering(g, x)


def _sizes(sizes: tuple[Any, ...]) -> tuple[Any, ...]:
    """x.view(2, 3), x.view((2, 3)) and x.view(y.shape) alike."""
    if len(sizes) == 1 and isinstance(sizes[0], (tuple, list)):
        return tuple(sizes[0])
    return tuple(sizes)


# --- views -------------------------------------------------------------------------------
@lowers(torch.reshape, methods=["reshape"])
def reshape(g: Graph, x: Node, *shape: Any) -> Node:
    if is_symbolic(x.meta.shape) or is_symbolic(_sizes(shape)):
        new_shape = reshape_target(x.meta.shape, _sizes(shape))
    else:
        new_shape = tuple(x.meta.fake().reshape(_sizes(shape)).shape)  # resolves -1, checks numel
    return x if new_shape == x.meta.shape else g.call("reshape", x, new_shape)


@lowers(methods=["view"])
def view(g: Graph, x: Node, *shape: Any) -> Node:
    if shape and isinstance(shape[0], torch.dtype):
        raise Unsupported("Tensor.view(dtype) reinterprets the bits of a tensor")
    if not (is_symbolic(x.meta.shape) and x.meta.strides is None):  # contiguous: any view is allowed
        x.meta.fake().view(_sizes(shape))  # raises, as eager would, if the strides do not allow a view
    return reshape(g, x, *shape)


lowers(methods=["view_as", "reshape_as"])(lambda g, x, other: reshape(g, x, other.meta.shape))


@lowers(torch.flatten, methods=["flatten"])
def flatten(g: Graph, x: Node, start_dim: int = 0, end_dim: int = -1) -> Node:
    shape = x.meta.shape
    if not shape:
        return reshape(g, x, (1,))
    start, end = norm_dim(start_dim, len(shape)), norm_dim(end_dim, len(shape))
    return reshape(g, x, shape[:start] + (-1,) + shape[end + 1:])


@lowers(torch.unflatten, methods=["unflatten"])
def unflatten(g: Graph, x: Node, dim: int, sizes: Any) -> Node:
    d = norm_dim(dim, x.meta.ndim)
    return reshape(g, x, x.meta.shape[:d] + tuple(sizes) + x.meta.shape[d + 1:])


@lowers(torch.permute, methods=["permute"])
def permute(g: Graph, x: Node, *dims: Any) -> Node:
    order = tuple(norm_dim(d, x.meta.ndim) for d in _sizes(dims))
    return x if order == tuple(range(x.meta.ndim)) else g.call("permute", x, order)


@lowers(torch.transpose, torch.swapaxes, torch.swapdims, methods=["transpose", "swapaxes", "swapdims"])
def transpose(g: Graph, x: Node, dim0: int, dim1: int) -> Node:
    d0, d1 = norm_dim(dim0, x.meta.ndim), norm_dim(dim1, x.meta.ndim)
    return x if d0 == d1 else g.call("transpose", x, d0, d1)


lowers(torch.t, methods=["t"])(lambda g, x: x if x.meta.ndim < 2 else transpose(g, x, 0, 1))
TENSOR_PROPERTIES["T"] = lambda g, x: permute(g, x, *reversed(range(x.meta.ndim)))
TENSOR_PROPERTIES["mT"] = lambda g, x: transpose(g, x, -2, -1)


def _adjoint(matrix_dims: bool) -> Lowering:
    """x.H (a matrix) and x.mH (the last two dims): the transpose for real numbers; a complex
    tensor also needs its conjugate, which torch computes (an extern call)."""
    def lowering(g: Graph, x: Node) -> Node:
        if x.meta.dtype.is_complex:
            return extern(g, torch.adjoint if matrix_dims else torch.Tensor.conj, x if matrix_dims
                          else permute(g, x, *reversed(range(x.meta.ndim))))
        return transpose(g, x, -2, -1) if matrix_dims else permute(g, x, *reversed(range(x.meta.ndim)))

    return lowering


TENSOR_PROPERTIES["mH"] = _adjoint(matrix_dims=True)
TENSOR_PROPERTIES["H"] = _adjoint(matrix_dims=False)  # a matrix or less: all its dims reversed


@lowers(torch.unsqueeze, methods=["unsqueeze"])
def unsqueeze(g: Graph, x: Node, dim: int) -> Node:
    return g.call("unsqueeze", x, norm_dim(dim, x.meta.ndim + 1))


@lowers(torch.squeeze, methods=["squeeze"])
def squeeze(g: Graph, x: Node, dim: Any = None) -> Node:
    """Made explicit: the dims that really have size 1, as a sorted tuple."""
    if dim is None:
        candidates: Any = range(x.meta.ndim)
    else:
        candidates = {norm_dim(d, x.meta.ndim) for d in ((dim,) if isinstance(dim, int) else dim)}
    dims = tuple(sorted(d for d in candidates if x.meta.shape[d] == 1))
    return g.call("squeeze", x, dims) if dims else x


@lowers(methods=["expand"])
def expand(g: Graph, x: Node, *sizes: Any) -> Node:
    target = _sizes(sizes)
    if is_symbolic(x.meta.shape) or is_symbolic(target):
        shape = expand_target(x.meta.shape, target)
    else:
        shape = tuple(x.meta.fake().expand(target).shape)  # resolves -1
    return x if shape == x.meta.shape else g.call("expand", x, shape)


lowers(methods=["expand_as"])(lambda g, x, other: expand(g, x, other.meta.shape))
lowers(torch.broadcast_to, methods=["broadcast_to"])(lambda g, x, size: expand(g, x, size))
lowers(torch.ravel, methods=["ravel"])(lambda g, x: flatten(g, x))


@lowers(torch.movedim, torch.moveaxis, methods=["movedim", "moveaxis"])
def movedim(g: Graph, x: Node, source: Any, destination: Any) -> Node:
    # the dims in `source` go to the places in `destination`; the others keep their order
    ndim = x.meta.ndim
    sources = [norm_dim(d, ndim) for d in ((source,) if isinstance(source, int) else source)]
    places = [norm_dim(d, ndim) for d in ((destination,) if isinstance(destination, int) else destination)]
    rest = iter(d for d in range(ndim) if d not in sources)
    moved = dict(zip(places, sources, strict=True))
    return permute(g, x, *(moved[p] if p in moved else next(rest) for p in range(ndim)))


def at_least(ndim: int) -> Lowering:
    """atleast_1d/2d/3d: size-1 dims added where torch adds them, to one tensor or to each of several."""
    def one(g: Graph, x: Node) -> Node:
        shape = x.meta.shape
        if len(shape) >= ndim:
            return x
        if ndim == 3 and len(shape) == 2:  # (m, n) -> (m, n, 1)
            return reshape(g, x, (*shape, 1))
        if ndim == 3 and len(shape) == 1:  # (n,) -> (1, n, 1)
            return reshape(g, x, (1, *shape, 1))
        return reshape(g, x, (1,) * (ndim - len(shape)) + shape)  # () -> (1, ...), (n,) -> (1, n)

    def lowering(g: Graph, *tensors: Any) -> Any:
        if len(tensors) == 1 and isinstance(tensors[0], list | tuple):
            return tuple(one(g, x) for x in tensors[0])
        return one(g, tensors[0]) if len(tensors) == 1 else tuple(one(g, x) for x in tensors)

    return lowering


for _ndim in (1, 2, 3):
    lowers(getattr(torch, f"atleast_{_ndim}d"))(at_least(_ndim))
lowers(methods=["contiguous"])(lambda g, x, memory_format=None: g.call("contiguous", x))
lowers(torch.clone, methods=["clone"])(lambda g, x, memory_format=None: g.call("clone", x))
@lowers(torch.detach, methods=["detach"])
def detach(g: Graph, x: Node) -> Node:
    """The same values; where a gradient could flow, a `detach` node stops it (AOT autograd
    gives it no VJP), elsewhere nothing to do."""
    return g.call("detach", x) if needs_grad(x) else x


def needs_grad(node: Node) -> bool:
    """Does `node` depend on a graph input that requires grad? (Capture keeps requires_grad on inputs only.)"""
    seen, todo = set(), [node]
    while todo:
        n = todo.pop()
        if n.op == "placeholder" and n.meta is not None and n.meta.requires_grad:
            return True
        todo += [i for i in n.inputs() if i not in seen]
        seen.update(n.inputs())
    return False


# --- indexing ----------------------------------------------------------------------------
@lowers(torch.select, methods=["select"])
def select(g: Graph, x: Node, dim: int, index: int) -> Node:
    d = norm_dim(dim, x.meta.ndim)
    size = x.meta.shape[d]
    if not -size <= index < size:
        raise Unsupported(f"index {index} is out of range for dim {d} of size {size}")
    return g.call("select", x, d, index if index >= 0 else index + size)


def slice_dim(g: Graph, x: Node, dim: int, key: slice) -> Node:
    start, stop, step = slice_bounds(key, x.meta.shape[dim])
    if step <= 0:
        raise Unsupported("slicing a tensor with a negative step (torch does not support it)")
    if (start, stop, step) == (0, x.meta.shape[dim], 1):
        return x  # x[:] adds nothing
    return g.call("slice", x, dim, start, max(stop, start), step)


@lowers(torch.narrow, methods=["narrow"])
def narrow(g: Graph, x: Node, dim: int, start: int, length: int) -> Node:
    d = norm_dim(dim, x.meta.ndim)
    start = start % x.meta.shape[d] if start < 0 else start
    return slice_dim(g, x, d, slice(start, start + length))


def advanced_index(x: torch.Tensor, *items: Any) -> torch.Tensor:
    """x[items] where some items are tensors (a torch_call node's function)."""
    return x[items]


def index(g: Graph, x: Node, key: Any) -> Node:
    """Basic indexing `x[1, :, None, ..., ::2]` as select / slice / unsqueeze nodes."""
    items = key if isinstance(key, tuple) else (key,)
    lists = [k for k, item in enumerate(items) if isinstance(item, list)]
    if len(lists) == 1 and _short_int_list(items[lists[0]]) and not any(isinstance(i, (bool, Node)) for i in items):
        return _joined_slices(g, x, items)
    for item in items:
        if isinstance(item, (list, bool)):
            raise Unsupported("indexing with a list or bool (advanced indexing) is not captured yet")
    if any(isinstance(item, Node) for item in items):  # advanced indexing: a gather
        from minicompiler.capture.advanced_indexing import as_gather  # (it slices with slice_dim below)

        gathered = as_gather(g, x, items)
        return gathered if gathered is not None else extern(g, advanced_index, x, *items)
    if items.count(Ellipsis) > 1:
        raise Unsupported("an index can only have a single ellipsis ('...')")
    uses_a_dim = [item is not None and item is not Ellipsis for item in items]
    if sum(uses_a_dim) > x.meta.ndim:
        raise Unsupported(f"too many indices for a {x.meta.ndim}-d tensor")
    dim = 0  # the dim of the current `x` that the next item indexes
    for position, item in enumerate(items):
        if item is None:
            x = g.call("unsqueeze", x, dim)
            dim += 1
        elif item is Ellipsis:  # skip to the dims the items after it index, counted from the end
            dim = x.meta.ndim - sum(uses_a_dim[position + 1:])
        elif isinstance(item, int):
            x = select(g, x, dim, item)  # the dim disappears: `dim` stays
        elif isinstance(item, slice):
            x = slice_dim(g, x, dim, item)
            dim += 1
        else:
            raise Unsupported(f"indexing a tensor with a {type(item).__name__}")
    return x


def _short_int_list(item: list) -> bool:
    return 0 < len(item) <= 16 and all(type(i) is int for i in item)


def _joined_slices(g: Graph, x: Node, items: tuple[Any, ...]) -> Node:
    """x[..., [i, j], ...] with one short list of ints: x[..., i:i+1, ...], x[..., j:j+1, ...] joined
    along that dim (Falcon's `fused_qkv[..., [-2], :]`). One list index moves no dim, and the result
    is a new tensor, as torch's."""
    items = spelled_out(items, x.meta.ndim)
    at = next(k for k, item in enumerate(items) if isinstance(item, list))
    size = x.meta.shape[sum(1 for item in items[:at] if item is not None)]
    if not all(-size <= i < size for i in items[at]):
        raise Unsupported(f"index {items[at]} is out of range for a dim of size {size}")
    parts = [index(g, x, (*items[:at], slice(i % size, i % size + 1), *items[at + 1:])) for i in items[at]]
    return cat(g, parts, sum(1 for item in items[:at] if not isinstance(item, int)))


def spelled_out(items: tuple[Any, ...] | list[Any], ndim: int) -> tuple[Any, ...]:
    """An index's items with `...` written as the full slices it stands for (None kept)."""
    if Ellipsis not in items:
        return tuple(items)
    at = list(items).index(Ellipsis)
    used = sum(1 for item in items if item is not None and item is not Ellipsis)
    return (*items[:at], *[slice(None)] * (ndim - used), *items[at + 1:])


# --- joining and splitting ---------------------------------------------------------------
@lowers(torch.cat, torch.concat)
def cat(g: Graph, tensors: Any, dim: int = 0) -> Node:
    # as torch does, a 1-d empty tensor (`torch.tensor([])`, a cache before its first update) is skipped
    tensors = [t for t in tensors if tuple(t.meta.shape) != (0,)] or list(tensors)[:1]
    if len(tensors) == 1:  # still a new tensor, as eager's
        return g.call("clone", tensors[0])
    return g.call("cat", tensors, norm_dim(dim, tensors[0].meta.ndim))


lowers(torch.concatenate)(lambda g, tensors, axis=0: cat(g, tensors, axis))


@lowers(torch.stack)
def stack(g: Graph, tensors: Any, dim: int = 0) -> Node:
    tensors = list(tensors)
    d = norm_dim(dim, tensors[0].meta.ndim + 1)
    return g.call("cat", [g.call("unsqueeze", t, d) for t in tensors], d)


# split, chunk, unbind and the other ops that cut a tensor into pieces: torch_splits.py


# --- metadata: answered at capture time (the shape guards keep them true) -----------------
TENSOR_PROPERTIES.update({
    "shape": lambda g, x: _size_value(x.meta.shape),
    "dtype": lambda g, x: x.meta.dtype,
    "device": lambda g, x: x.meta.device,
    "ndim": lambda g, x: x.meta.ndim,
    "is_cuda": lambda g, x: x.meta.device.type == "cuda",
    "layout": lambda g, x: torch.strided,
    "is_nested": lambda g, x: False,  # capture takes plain strided tensors only (builder.py)
})


@lowers(methods=["size"])
def size(g: Graph, x: Node, dim: int | None = None) -> Any:
    return _size_value(x.meta.shape) if dim is None else x.meta.shape[norm_dim(dim, x.meta.ndim)]


def _size_value(shape: tuple[Any, ...]) -> Any:
    """x.shape: a torch.Size, or with symbolic sizes a tuple (torch.Size holds only ints)."""
    return tuple(shape) if is_symbolic(shape) else torch.Size(shape)


@lowers(methods=["stride"])
def stride(g: Graph, x: Node, dim: int | None = None) -> Any:
    strides = x.meta.stride()
    return strides if dim is None else strides[norm_dim(dim, x.meta.ndim)]


lowers(methods=["dim", "ndimension"])(lambda g, x: x.meta.ndim)
lowers(torch.numel, methods=["numel", "nelement"])(lambda g, x: x.meta.numel)
lowers(methods=["element_size"])(lambda g, x: x.meta.dtype.itemsize)
lowers(torch.is_floating_point, methods=["is_floating_point"])(lambda g, x: x.meta.dtype.is_floating_point)
lowers(torch.is_complex, methods=["is_complex"])(lambda g, x: x.meta.dtype.is_complex)
lowers(methods=["is_contiguous"])(lambda g, x, memory_format=None: x.meta.fake().is_contiguous())

# Torch functions that only look at metadata (torch's own module code calls several). They
# run at capture time, on data-less tensors, and give a Python value.
_METADATA_QUERIES = [
    torch.jit.is_scripting, torch.jit.is_tracing, torch._assert, torch.result_type, torch.promote_types,
    torch.can_cast, torch.is_same_size, torch.get_default_dtype, F._none_or_dtype,
]


def _runs_on_meta(fn: Any) -> Lowering:
    def lowering(g: Graph, *args: Any, **kwargs: Any) -> Any:
        def fake(value: Any) -> Any:
            return value.meta.fake() if isinstance(value, Node) else value

        return fn(*map_structure(fake, args), **map_structure(fake, kwargs))

    return lowering


for _query in _METADATA_QUERIES:
    lowers(_query)(_runs_on_meta(_query))


_REFUSED = {
    "item": "Tensor.item() reads a tensor's value",
    "tolist": "Tensor.tolist() reads a tensor's values",
    "numpy": "Tensor.numpy() reads a tensor's values",
    "data_ptr": "Tensor.data_ptr() reads a tensor's address",
    "backward": "Tensor.backward() runs autograd inside the function",
    "nonzero": "nonzero() has a data-dependent shape",
    # a Python bool read from the values; a graph could compute it as a bool tensor, but turning that
    # into the bool is a graph break at this very call, where torch runs the whole op anyway
    "allclose": "allclose() returns a Python bool read from the tensors' values",
    "equal": "equal() returns a Python bool read from the tensors' values",
}


def _refuse(reason: str) -> Lowering:
    def lowering(g: Graph, *args: Any, **kwargs: Any) -> Any:
        raise Unsupported(reason)

    return lowering


for _name, _reason in _REFUSED.items():
    lowers(methods=[_name])(_refuse(_reason))
for _name in ("nonzero", "allclose", "equal"):
    lowers(getattr(torch, _name))(_refuse(_REFUSED[_name]))


# --- dtype casts -------------------------------------------------------------------------
def _same_device(a: torch.device, b: torch.device) -> bool:
    return a.type == b.type and (a.index is None or b.index is None or a.index == b.index)


def convert(g: Graph, x: Node, dtype: Any, device: Any = None, copy: bool = False) -> Node:
    if device is not None and not _same_device(torch.device(device), x.meta.device):
        raise Unsupported(f"moving a tensor from {x.meta.device} to {device} inside the function")
    if dtype is None or dtype == x.meta.dtype:
        return g.call("clone", x) if copy else x  # .to() of the same dtype returns x itself
    return g.call("convert", x, dtype)


@lowers(methods=["copy_"])
def copy_(g: Graph, x: Node, src: Any, non_blocking: bool = False) -> InPlace:
    if not isinstance(src, Node):
        raise Unsupported("Tensor.copy_() from a non-tensor")
    value = convert(g, expand(g, src, x.meta.shape), x.meta.dtype)
    return InPlace(g.call("clone", value))  # x gets its own memory, not a view of src


@lowers(methods=["to"])
def to(g: Graph, x: Node, *args: Any, dtype: Any = None, device: Any = None, non_blocking: bool = False,
       copy: bool = False, memory_format: Any = None) -> Node:
    for arg in args:  # .to(dtype), .to(device), .to(device, dtype), .to(other_tensor)
        if isinstance(arg, torch.dtype):
            dtype = arg
        elif isinstance(arg, Node):
            dtype, device = arg.meta.dtype, arg.meta.device
        elif isinstance(arg, (str, torch.device)) or (isinstance(arg, int) and not isinstance(arg, bool)):
            device = arg
    return convert(g, x, dtype, device, copy)


_CASTS = {
    "float": torch.float32, "half": torch.float16, "double": torch.float64, "bfloat16": torch.bfloat16,
    "int": torch.int32, "long": torch.int64, "bool": torch.bool, "short": torch.int16,
    "byte": torch.uint8, "char": torch.int8,
}
def _cast(dtype: torch.dtype) -> Lowering:
    return lambda g, x, memory_format=None: convert(g, x, dtype)


for _name, _dtype in _CASTS.items():
    lowers(methods=[_name])(_cast(_dtype))
lowers(methods=["type_as"])(lambda g, x, other: convert(g, x, other.meta.dtype))
lowers(methods=["cpu"])(lambda g, x, memory_format=None: convert(g, x, None, "cpu"))
lowers(methods=["cuda"])(lambda g, x, device=None, non_blocking=False, memory_format=None: convert(
    g, x, None, device if device is not None else "cuda"))


@lowers(methods=["type"])
def type_(g: Graph, x: Node, dtype: Any = None, non_blocking: bool = False) -> Any:
    if dtype is None:
        raise Unsupported("Tensor.type() without a dtype returns a string")
    if not isinstance(dtype, torch.dtype):
        raise Unsupported(f"Tensor.type({dtype!r}): only torch.dtype arguments are captured")
    return convert(g, x, dtype)
