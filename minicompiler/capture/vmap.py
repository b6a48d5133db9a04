"""`torch.vmap` of functions of scalars, captured by broadcasting (what transformers 4 builds masks with).

transformers 4 makes a decoder's 4-D attention mask, when it sees it is being compiled, as

    with TransformGetItemToIndex():                    # a TorchFunctionMode: x[t] -> aten.index
        mask = vmap(vmap(vmap(vmap(fn, (None, None, None, 0)), (None, None, 0, None)),
                         (None, 0, None, None)), (0, None, None, None))(b, h, q, kv)

where `fn(b, h, q, kv)` sees one index of each (0-d tensors) and compares or looks them up
(`kv <= q`, `padding_mask[b, kv]`). TorchDynamo traces vmap as a higher-order op. Here a nest of
vmaps over 1-d arguments is captured in one go, the way one would write it by hand: each
argument becomes a tensor with one dim per vmap level (its own size at the level that maps it,
1 elsewhere), `fn` runs once on those, and broadcasting does the mapping:

    b -> (B, 1, 1, 1)   h -> (1, H, 1, 1)   q -> (1, 1, Q, 1)   kv -> (1, 1, 1, KV)
    kv <= q -> (1, 1, Q, KV)      padding_mask[b, kv] -> (B, 1, 1, KV)      result -> (B, H, Q, KV)

That is only right for what `fn` does to scalars elementwise: pointwise ops (with unmapped
tensors that are 0-d) and indexing an unmapped tensor with mapped indices. The graph nodes `fn`
made are checked for exactly that; anything else (a reduction, a matmul) is a break. (Not
checked: Python reading a mapped value's shape, which sees the broadcast shape, not `()`.)

`TransformGetItemToIndex` itself is entered and left as a no-op: tensor indices are captured as
advanced indexing (aten.index) anyway, which is what the mode turns `x[t]` into.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from minicompiler.capture import advanced_indexing
from minicompiler.capture.builtins import handles
from minicompiler.capture.errors import Unsupported
from minicompiler.capture.tensor import TensorVariable
from minicompiler.capture.torch_views import advanced_index
from minicompiler.capture.variables import ConstantVariable, TupleVariable, Variable
from minicompiler.ir import Node, flatten
from minicompiler.ir.ops import OPS

if TYPE_CHECKING:
    from minicompiler.capture.frame import Tracer

# The one TorchFunctionMode entered as a no-op (see above), by where torch defines it.
_INDEX_MODES = {("torch._dynamo._trace_wrapped_higher_order_op", "TransformGetItemToIndex")}


def _is_index_mode(mode: Variable) -> bool:
    cls = getattr(mode, "cls", None) or type(getattr(mode, "value", None))
    return (getattr(cls, "__module__", None), getattr(cls, "__qualname__", None)) in _INDEX_MODES


@handles(torch.overrides._push_mode)
def _push_mode(tx: Tracer, mode: Variable) -> Variable:
    if not _is_index_mode(mode):
        raise Unsupported(f"entering a TorchFunctionMode ({mode.describe()}) is not captured")
    tx.state.function_modes.append(mode)
    return ConstantVariable(None)


@handles(torch.overrides._pop_mode)
def _pop_mode(tx: Tracer) -> Variable:
    if not tx.state.function_modes:
        raise Unsupported("leaving a TorchFunctionMode entered outside the captured code")
    return tx.state.function_modes.pop()


class VmapVariable(Variable):
    """`torch.vmap(fn, in_dims)`: called, the whole nest of vmaps under it runs at once."""

    def __init__(self, fn: Variable, in_dims: Any) -> None:
        self.fn, self.in_dims = fn, in_dims

    def describe(self) -> str:
        return f"torch.vmap({self.fn.describe()})"

    def call(self, tx: Tracer, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if kwargs:
            raise Unsupported("keyword arguments to a vmapped function")
        levels: list[tuple[Any, ...]] = []  # in_dims of each vmap, outermost first
        fn: Variable = self
        while isinstance(fn, VmapVariable):
            dims = fn.in_dims if isinstance(fn.in_dims, tuple) else (fn.in_dims,) * len(args)
            if len(dims) != len(args) or any(d not in (0, None) for d in dims):
                raise Unsupported(f"vmap with in_dims={fn.in_dims} (only 0 or None per argument)")
            levels.append(dims)
            fn = fn.fn
        mapped, sizes = _broadcast_arguments(tx, args, levels)
        first = len(tx.state.graph.nodes)
        with advanced_indexing.kept_whole():
            result = fn.call(tx, mapped, {})
        if not isinstance(result, TensorVariable):
            raise Unsupported(f"a vmapped function that returns {result.describe()}")
        roots = {a.node for a, arg in zip(mapped, args, strict=True) if a is not arg}
        _check_elementwise(tx.state.graph.nodes[first:], roots, len(levels))
        # vmap returns a new tensor with every level's dim, out_dims=0: outermost first
        full = tx.state.graph.call("expand", result.node, tuple(sizes))
        return tx.state.wrap_result(tx.state.graph.call("contiguous", full))


def _broadcast_arguments(tx: Tracer, args: list[Variable], levels: list[tuple[Any, ...]]) -> tuple[
        list[Variable], list[int]]:
    """Each mapped argument (1-d for each level that maps it) reshaped to one dim per level."""
    sizes: list[int | None] = [None] * len(levels)
    mapped: list[Variable] = []
    for i, arg in enumerate(args):
        own = [level for level, dims in enumerate(levels) if dims[i] == 0]
        if not own:
            mapped.append(arg)
            continue
        if not isinstance(arg, TensorVariable) or arg.node.meta.ndim != len(own):
            raise Unsupported("vmap over an argument whose items are not scalars (only functions of scalars "
                              "are captured)")
        shape = [1] * len(levels)
        for dim, level in enumerate(own):
            size = arg.node.meta.shape[dim]
            if sizes[level] not in (None, size):
                raise Unsupported("vmap over arguments of different sizes")
            sizes[level] = shape[level] = size
        mapped.append(tx.state.wrap_result(tx.state.graph.call("reshape", arg.node, tuple(shape))))
    if None in sizes:
        raise Unsupported("a vmap level that maps no argument")
    return mapped, [s for s in sizes if s is not None]


def _check_elementwise(nodes: list[Node], roots: set[Node], ndim: int) -> None:
    """Broadcasting equals vmap for what the function did to the mapped values: pointwise ops
    (any unmapped tensor they meet is 0-d) and lookups into an unmapped tensor."""
    mapped = set(roots)
    for node in nodes:
        tensors = [a for a in flatten((node.args, node.kwargs)) if isinstance(a, Node)]
        if not any(a in mapped for a in tensors) or _fills(node):
            continue  # (`q.new_ones(())` takes only q's dtype and device: one scalar, not mapped)
        mapped.add(node)
        others = [a for a in tensors if a not in mapped]
        if node.op == "torch_call" and node.args[0] is advanced_index:
            ok = node.args[1] not in mapped and len(node.args) - 2 == node.args[1].meta.ndim
        else:
            pointwise = (getattr(node.args[0], "__name__", "") in _POINTWISE_EXTERNS if node.op == "torch_call"
                         else node.op in OPS and OPS[node.op].kind == "pointwise")
            ok = pointwise and all(a.meta.ndim == 0 for a in others)
        if not ok or node.meta.ndim != ndim:
            what = getattr(node.args[0], "__name__", node.op) if node.op == "torch_call" else node.op
            raise Unsupported(f"a vmapped function does more than elementwise work on its scalars ({what}); "
                              "only that is captured (by broadcasting)")


def _fills(node: Node) -> bool:
    return node.op == "torch_call" and getattr(node.args[0], "__name__", "") in _FILLS


_FILLS = {"new_ones", "new_zeros", "new_full", "new_empty"}
# torch functions kept whole (torch_call) that are elementwise (`a & b` is torch.bitwise_and)
_POINTWISE_EXTERNS = {"bitwise_and", "bitwise_or", "bitwise_xor", "bitwise_not", "logical_and", "logical_or",
                      "logical_xor", "logical_not", "remainder", "floor_divide", "fmod", "where"}


@handles(torch.vmap)
def vmap(tx: Tracer, func: Variable, in_dims: Variable | None = None, out_dims: Variable | None = None,
         randomness: Variable | None = None, chunk_size: Variable | None = None) -> Variable:
    out = 0 if out_dims is None else out_dims.as_python()
    if out != 0:
        raise Unsupported(f"vmap with out_dims={out}")
    dims = 0 if in_dims is None else in_dims.as_python() if not isinstance(in_dims, TupleVariable) \
        else tuple(d.as_python() for d in in_dims.items)
    return VmapVariable(func, dims)
