"""Reductions to a product or a position: prod, argmax/argmin, max/min along a dim (values and
indices), aminmax; and scans: cumsum, cumprod, logcumsumexp, cummax/cummin (values and indices).
Same conventions as `torch_ops.py`.

torch.max(x, dim) returns the largest values and their positions: an amax and an argmax, which
fuse into one sweep over the row. Its gradient, though, is not amax's: torch sends it to the
one element at the position, where amax shares it among ties. Where x needs a gradient the
values are therefore that element itself, picked by a `where` over the dim's coordinates (iota)
and summed: the same number (but for the sign of a zero, as 0 is added), and its gradient is
the `where`'s, to that element alone.
"""

from __future__ import annotations

import functools
from collections import namedtuple
from typing import Any

import torch

from minicompiler.capture.errors import Unsupported
from minicompiler.capture.torch_ops import Lowering, extern, lowers, norm_dim, reduce_dims
from minicompiler.capture.torch_views import needs_grad, slice_dim
from minicompiler.ir import Graph, Node

ValuesIndices = namedtuple("ValuesIndices", ["values", "indices"])  # like torch.return_types.max
MinMax = namedtuple("MinMax", ["min", "max"])  # like torch.return_types.aminmax


@lowers(torch.prod, methods=["prod"])
def prod(g: Graph, x: Node, dim: int | None = None, keepdim: bool = False, *, dtype: Any = None) -> Node:
    # integers and bool multiply in int64 (the primitive's own rule, as torch's); dtype= converts first
    if dtype is not None:
        x = g.call("convert", x, dtype)
    return g.call("prod", x, reduce_dims(x, dim), keepdim)


def _nonempty_dims(x: Node, dim: Any, what: str) -> tuple[int, ...]:
    """The dims a position is taken over; torch raises where one is empty (no position to give),
    so the call stays eager's and raises there too."""
    dims = reduce_dims(x, dim)
    if any(x.meta.shape[d] == 0 for d in dims if d < x.meta.ndim):
        raise Unsupported(f"{what} over an empty dim (torch raises)")
    return dims


def _position(op: str) -> Lowering:
    """argmax / argmin: dim=None flattens x (the position in row-major order)."""
    return lambda g, x, dim=None, keepdim=False: g.call(op, x, _nonempty_dims(x, dim, f"torch.{op}"), keepdim)


lowers(torch.argmax, methods=["argmax"])(_position("argmax"))
lowers(torch.argmin, methods=["argmin"])(_position("argmin"))


def value_at(g: Graph, x: Node, indices: Node, dim: int, keepdim: bool) -> Node:
    """x's element at `indices` (keepdim shape) along `dim`: a where over dim's coordinates, summed."""
    shape = tuple(size if d == dim else 1 for d, size in enumerate(x.meta.shape))
    coordinate = g.call("iota", shape, dim, torch.int64, x.meta.device)
    return g.call("sum", g.call("where", g.call("eq", coordinate, indices), x, 0), (dim,), keepdim)


def _max_or_min(name: str) -> Lowering:
    reduce, elementwise, position = ("amax", "maximum", "argmax") if name == "max" else ("amin", "minimum", "argmin")

    def lowering(g: Graph, x: Node, dim: Any = None, keepdim: bool = False) -> Any:
        if isinstance(dim, Node):  # torch.max(a, b) is the elementwise maximum
            return g.call(elementwise, x, dim)
        if dim is None:  # the largest value, no position
            return g.call(reduce, x, reduce_dims(x, None), False)
        dims = _nonempty_dims(x, dim, f"torch.{name}")
        if not (x.meta.ndim and x.meta.dtype.is_floating_point and needs_grad(x)):
            # torch.max(x, dim) returns (values, indices): two nodes, one tensor each
            return ValuesIndices(g.call(reduce, x, dims, keepdim), g.call(position, x, dims, keepdim))
        indices = g.call(position, x, dims, True)
        values = value_at(g, x, indices, dims[0], keepdim)  # its gradient goes to that element only
        return ValuesIndices(values, indices if keepdim else g.call("reshape", indices, values.meta.shape))

    return lowering


lowers(torch.max, methods=["max"])(_max_or_min("max"))
lowers(torch.min, methods=["min"])(_max_or_min("min"))


@lowers(torch.aminmax, methods=["aminmax"])
def aminmax(g: Graph, x: Node, *, dim: int | None = None, keepdim: bool = False) -> MinMax:
    # (amin, amax), one sweep: torch shares their gradients among ties as amin's and amax's
    dims = _nonempty_dims(x, dim, "torch.aminmax")
    if dim is None and keepdim:
        keepdim = _keeps_dims_of_whole_aminmax(x.meta.device, x.meta.ndim)
    return MinMax(g.call("amin", x, dims, keepdim), g.call("amax", x, dims, keepdim))


@functools.cache
def _keeps_dims_of_whole_aminmax(device: torch.device, ndim: int) -> bool:
    """Does eager's aminmax over every dim keep them, as asked? On the CPU yes; torch's CUDA kernel
    (2.11) gives 0-d results instead: ask eager, once per device, on a one-element tensor."""
    if device.type == "meta":
        return True
    return torch.aminmax(torch.zeros((1,) * ndim, device=device), keepdim=True).min.ndim == ndim


# --- scans -----------------------------------------------------------------------------------
def scan(g: Graph, op: str, x: Node, dim: int) -> Node:
    """The scan primitive `op` of x along `dim` (a 0-d x is a row of one element)."""
    if x.meta.ndim == 0:
        return g.call("reshape", scan(g, op, g.call("reshape", x, (1,)), 0), ())
    return g.call(op, x, norm_dim(dim, x.meta.ndim))


# cumsum and cumprod have gradient rules (autograd/shape_rules.py); logcumsumexp and cummax/cummin's
# values, where their input needs a gradient, stay torch calls, which torch autograd differentiates.
def _running(op: str, fn: Any) -> Lowering:
    """cumsum / cumprod (integers and bool in int64; dtype= converts first) and logcumsumexp."""

    def lowering(g: Graph, x: Node, dim: int, *, dtype: Any = None) -> Node:
        if op == "logcumsumexp" and needs_grad(x):
            return extern(g, fn, x, dim) if dtype is None else extern(g, fn, x, dim, dtype=dtype)
        return scan(g, op, x if dtype is None else g.call("convert", x, dtype), dim)

    return lowering


for _op in ("cumsum", "cumprod", "logcumsumexp"):
    lowers(getattr(torch, _op), methods=[_op])(_running(_op, getattr(torch, _op)))


# cummax/cummin's values, as torch calls where x needs a gradient (a torch call holds one tensor)
def cummax_values(x: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.cummax(x, dim).values


def cummin_values(x: torch.Tensor, dim: int) -> torch.Tensor:
    return torch.cummin(x, dim).values


def _running_extremum(name: str, values_of: Any) -> Lowering:
    """cummax / cummin: (values, indices), two scans that fuse into one sweep."""

    def lowering(g: Graph, x: Node, dim: int) -> Any:
        values = extern(g, values_of, x, dim) if needs_grad(x) else scan(g, name, x, dim)
        return ValuesIndices(values, scan(g, f"{name}_index", x, dim))

    return lowering


lowers(torch.cummax, methods=["cummax"])(_running_extremum("cummax", cummax_values))
lowers(torch.cummin, methods=["cummin"])(_running_extremum("cummin", cummin_values))


@lowers(torch.cumulative_trapezoid)
def cumulative_trapezoid(g: Graph, y: Any, x: Any = None, *, dx: Any = None, dim: int = -1) -> Node:
    # the running sum of the trapezoids between neighbours along dim, written as torch's
    # (aten/native/Integration.cpp): cumsum(dx / 2 * (left + right)), or, with sample points x,
    # cumsum((left + right) * diff(x)) / 2 (x 1-d lies along dim; fewer dims are leading ones)
    numbers = isinstance(y, Node) and y.meta.ndim and y.meta.dtype != torch.bool  # (torch rejects bool)
    points = x is None or (isinstance(x, Node) and dx is None and x.meta.dtype != torch.bool
                           and x.meta.ndim <= y.meta.ndim)
    if not (numbers and points):
        return extern(g, torch.cumulative_trapezoid, y, x, dx=dx, dim=dim)
    d = norm_dim(dim, y.meta.ndim)
    pairs = g.call("add", slice_dim(g, y, d, slice(None, -1)), slice_dim(g, y, d, slice(1, None)))
    if x is None:
        return scan(g, "cumsum", g.call("mul", (1.0 if dx is None else dx) / 2.0, pairs), d)
    shape = tuple(x.meta.shape[0] if i == d else 1 for i in range(y.meta.ndim)) if x.meta.ndim == 1 else (
        (1,) * (y.meta.ndim - x.meta.ndim) + tuple(x.meta.shape))
    x = g.call("reshape", x, shape) if shape != x.meta.shape else x
    width = g.call("sub", slice_dim(g, x, d, slice(1, None)), slice_dim(g, x, d, slice(None, -1)))
    return g.call("div", scan(g, "cumsum", g.call("mul", pairs, width), d), 2.0)

