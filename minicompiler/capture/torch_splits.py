"""Lowerings that return several tensors: one tensor cut into pieces (split, chunk, unbind,
tensor_split, hsplit/vsplit/dsplit and their `unsafe_` and `_copy` twins), or several tensors
given one shape (broadcast_tensors, meshgrid).

Every piece is a view of its input, as in eager: a `slice` (or `select`) along the cut dim, or an
`expand`, so cutting costs no kernel at all. The `_copy` twins clone each piece instead, because
eager gives each one memory of its own. Where the pieces start and stop is worked out here, at
capture time, from the input's sizes. For the ops added beside split/chunk/unbind, torch itself
first runs on a data-less copy of the input (`meta.fake()`): that checks the arguments (a call
eager rejects becomes a graph break, where eager raises its own error), and the pieces it gives
must have the shapes ours have.

Same conventions as `torch_ops.py`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import torch

from minicompiler.capture.builtins import handles
from minicompiler.capture.errors import Unsupported
from minicompiler.capture.guards import predicate_guard
from minicompiler.capture.tensor import TensorVariable, call_torch_function
from minicompiler.capture.torch_ops import Lowering, lowers, norm_dim
from minicompiler.capture.torch_views import expand, reshape, select, slice_dim
from minicompiler.capture.variables import ConstantVariable, Variable
from minicompiler.ir import Graph, Node

if TYPE_CHECKING:
    from minicompiler.capture.frame import Tracer


def _cut(g: Graph, x: Node, dim: int, lengths: Sequence[int]) -> tuple[Node, ...]:
    """Consecutive slices of x along `dim`, of the given lengths."""
    pieces, start = [], 0
    for length in lengths:
        pieces.append(slice_dim(g, x, dim, slice(start, start + length)))
        start += length
    return tuple(pieces)


def _as_eager(pieces: tuple[Node, ...], eager: Sequence[torch.Tensor], what: str) -> tuple[Node, ...]:
    """`pieces`, once they have the shapes eager's pieces (computed on a data-less input) have."""
    if [p.meta.shape for p in pieces] != [tuple(t.shape) for t in eager]:
        raise Unsupported(f"{what}: capture cut {[p.meta.shape for p in pieces]}, torch "
                          f"{[tuple(t.shape) for t in eager]}")
    return pieces


# --- one tensor, cut into pieces ------------------------------------------------------------
@lowers(torch.split, methods=["split"])
def split(g: Graph, x: Node, split_size_or_sections: Any, dim: int = 0) -> tuple[Node, ...]:
    # an int is the length of every piece but the last; a list, each piece's length
    d = norm_dim(dim, x.meta.ndim)
    size = x.meta.shape[d]
    if isinstance(split_size_or_sections, int):
        step = split_size_or_sections
        sections = [min(step, size - start) for start in range(0, size, step)] or [0]
    else:
        sections = list(split_size_or_sections)
        if sum(sections) != size or min(sections, default=0) < 0:  # (eager raises)
            raise Unsupported(f"split sizes {sections} do not add up to {size}, the size of dim {d}")
    return _cut(g, x, d, sections)


@lowers(torch.unsafe_split, methods=["unsafe_split"])
def unsafe_split(g: Graph, x: Node, split_size: int, dim: int = 0) -> tuple[Node, ...]:
    # split's pieces, of one length only (eager's are views too, untracked by autograd)
    if not isinstance(split_size, int):
        raise TypeError(f"unsafe_split(): argument 'split_size' must be int, not {type(split_size).__name__}")
    return split(g, x, split_size, dim)


@lowers(torch.split_with_sizes, methods=["split_with_sizes"])
def split_with_sizes(g: Graph, x: Node, split_sizes: Sequence[int], dim: int = 0) -> tuple[Node, ...]:
    return split(g, x, list(split_sizes), dim)


@lowers(torch.chunk, torch.unsafe_chunk, methods=["chunk", "unsafe_chunk"])
def chunk(g: Graph, x: Node, chunks: int, dim: int = 0) -> tuple[Node, ...]:
    # pieces of ceil(size / chunks), so maybe fewer than `chunks` of them
    if chunks <= 0:
        raise Unsupported(f"chunk expects `chunks` to be greater than 0, got: {chunks}")
    size = x.meta.shape[norm_dim(dim, x.meta.ndim)]
    return split(g, x, max(-(-size // chunks), 1), dim)


@lowers(torch.unbind, methods=["unbind"])
def unbind(g: Graph, x: Node, dim: int = 0) -> tuple[Node, ...]:
    d = norm_dim(dim, x.meta.ndim)
    return tuple(select(g, x, d, i) for i in range(x.meta.shape[d]))


@lowers(torch.tensor_split, methods=["tensor_split"])
def tensor_split(g: Graph, x: Node, *args: Any, **kwargs: Any) -> tuple[Node, ...]:
    """tensor_split(x, sections | indices, dim=0): `sections` pieces whose lengths differ by at
    most one (the longer ones first), or cuts before each index (Python's slice rules: negative
    indices count from the end, decreasing ones give empty pieces)."""
    cuts = args[0] if args else next((kwargs[k] for k in ("sections", "indices", "tensor_indices_or_sections")
                                      if k in kwargs), None)
    if isinstance(cuts, Node):  # (see tensor_split_reading_indices below)
        raise Unsupported("tensor_split with a tensor of indices that is not a CPU int64 input of the function "
                          "(torch reads its values)")
    eager = x.meta.fake().tensor_split(*args, **kwargs)  # raises, as eager would
    d = norm_dim(args[1] if len(args) > 1 else kwargs.get("dim", 0), x.meta.ndim)
    size = x.meta.shape[d]
    if isinstance(cuts, int):
        base, longer = divmod(size, cuts)
        return _as_eager(_cut(g, x, d, [base + (i < longer) for i in range(cuts)]), eager, "tensor_split")
    bounds = [0, *cuts, size]
    pieces = tuple(slice_dim(g, x, d, slice(start, stop)) for start, stop in itertools.pairwise(bounds))
    return _as_eager(pieces, eager, "tensor_split")


def _split_along(fn: Callable[..., Any], dim_of: Callable[[int], int]) -> Lowering:
    """hsplit / vsplit / dsplit: tensor_split along one dim (by the input's ndim), after torch's
    own checks (enough dims; `sections` must divide that dim evenly)."""
    def lowering(g: Graph, x: Node, indices_or_sections: Any) -> tuple[Node, ...]:
        fn(x.meta.fake(), indices_or_sections)  # raises, as eager would
        return tensor_split(g, x, indices_or_sections, dim_of(x.meta.ndim))

    return lowering


lowers(torch.hsplit, methods=["hsplit"])(_split_along(torch.hsplit, lambda ndim: 0 if ndim == 1 else 1))
lowers(torch.vsplit, methods=["vsplit"])(_split_along(torch.vsplit, lambda ndim: 0))
lowers(torch.dsplit, methods=["dsplit"])(_split_along(torch.dsplit, lambda ndim: 2))


def _copies(pieces_of: Lowering) -> Lowering:
    """split_with_sizes_copy / unbind_copy: the same pieces, each in memory of its own."""
    return lambda g, *args, **kwargs: tuple(g.call("clone", p) for p in pieces_of(g, *args, **kwargs))


lowers(torch.split_with_sizes_copy)(_copies(split_with_sizes))
lowers(torch.unbind_copy)(_copies(unbind))


@handles(torch.tensor_split)
def tensor_split_reading_indices(tx: Tracer, x: Variable, *args: Variable, **kwargs: Variable) -> Variable:
    """torch.tensor_split(x, t) with `t` a CPU int64 tensor: torch reads t's values as Python ints
    (the cuts), so capture does too, if t is an input of the function: its values are guarded
    (a call with other values captures again), and t is then only a list of ints."""
    cuts = args[0] if args else kwargs.get("tensor_indices_or_sections")
    if isinstance(cuts, TensorVariable):
        values = _read_input_ints(tx, cuts)
        if values is not None:
            args, kwargs = (ConstantVariable(values), *args[1:]), dict(kwargs)
            kwargs.pop("tensor_indices_or_sections", None)
    return call_torch_function(tx, torch.tensor_split, [x, *args], kwargs)


def _read_input_ints(tx: Tracer, var: TensorVariable) -> int | list[int] | None:
    """The values of an input tensor that torch would read as ints (CPU, int64, 0-d or 1-d),
    guarded to stay the same; None when `var` is not such a tensor."""
    real, source = tx.state.input_value(var)
    if real is None or source is None or real.device.type != "cpu" or real.dtype != torch.int64 or real.ndim > 1:
        return None
    values = real.tolist()
    tx.state.add_guard(predicate_guard(source, f"{source}.tolist() == {values}",
                                       lambda t: isinstance(t, torch.Tensor) and t.tolist() == values), source)
    return values


# --- several tensors, given one shape -------------------------------------------------------
def _tensor_list(tensors: tuple[Any, ...]) -> list[Node]:
    """f(a, b) and f([a, b]) alike."""
    return list(tensors[0]) if len(tensors) == 1 and isinstance(tensors[0], (list, tuple)) else list(tensors)


@lowers(torch.broadcast_tensors)
def broadcast_tensors(g: Graph, *tensors: Any) -> tuple[Node, ...]:
    # each expanded to the shape they broadcast to (one already of that shape is returned as is)
    tensors = _tensor_list(tensors)
    shape = torch.broadcast_shapes(*(t.meta.shape for t in tensors))  # raises, as eager would
    return tuple(expand(g, t, shape) for t in tensors)


@lowers(torch.meshgrid)
def meshgrid(g: Graph, *tensors: Any, indexing: str | None = None) -> tuple[Node, ...]:
    """Tensor i (0-d or 1-d, n_i elements) seen along dim i of the grid (n_0, n_1, ...), the same
    along every other dim: a reshape to (1, .., n_i, .., 1), then an expand. With indexing="xy"
    (Cartesian, NumPy's default) the first two dims trade places: (n_1, n_0, n_2, ...)."""
    tensors = _tensor_list(tensors)
    torch.meshgrid(*(t.meta.fake() for t in tensors), indexing=indexing or "ij")  # raises, as eager would
    places = list(range(len(tensors)))
    if indexing == "xy" and len(tensors) >= 2:
        places[0], places[1] = 1, 0
    shape = [1] * len(tensors)
    for t, place in zip(tensors, places, strict=True):
        shape[place] = t.meta.numel
    grids = []
    for t, place in zip(tensors, places, strict=True):
        along = [1] * len(tensors)
        along[place] = t.meta.numel
        grids.append(expand(g, reshape(g, t, tuple(along)), tuple(shape)))
    return tuple(grids)
