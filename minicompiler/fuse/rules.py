"""When may a node join a kernel? `can_fuse` answers, with a reason either way.

The rules, in the words of the loop nest a kernel becomes:
  - a pointwise node joins if it runs over the kernel's iteration space (its shape is the
    kernel's domain), or, in a reduction kernel, if it is one value per row (its shape is the
    reduced shape);
  - a reduction joins if it folds the kernel's domain, over the same dims as the kernel's
    other reductions (a pointwise kernel becomes a reduction kernel);
  - an element value may read a row value only where that value broadcasts along the
    reduced dims (a keepdim=True reduction does; keepdim=False over trailing dims does not);
  - views and extern calls never join: an extern is run by torch, a view is a new shape over
    a stored buffer.
"""

from __future__ import annotations

from minicompiler.fuse.schedule import FusionDecision, Kernel, format_shape
from minicompiler.ir.graph import Node
from minicompiler.ir.ops import OPS


def reduction_dims(node: Node) -> tuple[int, ...]:
    """The dims a reduction node folds: sorted, non-negative; `()` means all (as in torch)."""
    ndim = len(node.args[0].meta.shape)
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dims", ())
    if isinstance(dims, int):
        dims = (dims,)
    if not dims:
        return tuple(range(ndim))
    return tuple(sorted({d % ndim for d in dims}))


def iteration_space(node: Node) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(domain, reduction dims) of the loop nest that computes `node` on its own."""
    if OPS[node.op].kind == "reduction":
        return node.args[0].meta.shape, reduction_dims(node)
    return node.meta.shape, ()


def _left_padded(shape: tuple[int, ...], ndim: int) -> tuple[int, ...]:
    return (1,) * (ndim - len(shape)) + shape


def _kind_refusal(producer: Node, consumer: Node) -> str | None:
    for node in (producer, consumer):
        kind = OPS[node.op].kind if node.op in OPS else node.op  # "placeholder"
        if kind == "extern":
            return f"{node.op} is an extern call"
        if kind == "view":
            return f"{node.op} is a view: it aliases a stored buffer"
    return None


def kernel_refusal(kernel: Kernel, node: Node) -> str | None:
    """Why `node` cannot be computed in `kernel`'s loop nest, or None if it can."""
    if OPS[node.op].kind == "reduction":
        domain, dims = iteration_space(node)
        if domain != kernel.domain:
            return f"different iteration space: {format_shape(domain)} vs {format_shape(kernel.domain)}"
        if kernel.kind == "reduction" and dims != kernel.reduction_dims:
            return f"reduction over different dims: {dims} vs {kernel.reduction_dims}"
        return None  # its input, if in the kernel, has the domain's shape: an element value
    shape = node.meta.shape
    row_shapes = (kernel.keepdim_shape, kernel.reduced_shape) if kernel.kind == "reduction" else ()
    if shape != kernel.domain and shape not in row_shapes:
        return f"different iteration space: {format_shape(shape)} vs {format_shape(kernel.domain)}"
    members = set(kernel.nodes)
    for inp in node.inputs():
        if inp not in members or not kernel.is_row_value(inp):
            continue
        if shape == kernel.domain and _left_padded(inp.meta.shape, len(shape)) != kernel.keepdim_shape:
            # e.g. sum(x[4, 8], dim=1) is [4]: broadcast against [4, 8] it would run along dim 1
            return (
                f"{inp.name} {format_shape(inp.meta.shape)} does not broadcast along the reduced dims "
                f"of {format_shape(kernel.domain)}"
            )
        if shape != kernel.domain and _left_padded(inp.meta.shape, len(shape)) != shape:
            # a row value must keep its row: [4] read as [4, 1] would run along the wrong dim
            return f"mixes row shapes {format_shape(inp.meta.shape)} and {format_shape(shape)}"
    return None


def _acceptance(kernel: Kernel, node: Node) -> str:
    if OPS[node.op].kind == "reduction":
        if kernel.kind == "pointwise":
            dims = reduction_dims(node)
            return f"reduction over dims {dims} of its producers' domain {format_shape(kernel.domain)}"
        return f"another reduction over dims {kernel.reduction_dims} of {format_shape(kernel.domain)}"
    if node.meta.shape != kernel.domain:
        return f"one value per row of the reduction over dims {kernel.reduction_dims}"
    return f"same iteration space {format_shape(kernel.domain)}"


def can_fuse(kernel: Kernel | None, producer: Node, consumer: Node) -> FusionDecision:
    """May `consumer` be computed in the kernel that holds `producer`?

    `kernel` is None when `producer` is in no kernel (a graph input, an extern's output, a view)."""
    reason = _kind_refusal(producer, consumer)
    if reason is None:
        if kernel is None:
            reason = f"{producer.name} is a graph input, not computed by a kernel"
        else:
            reason = kernel_refusal(kernel, consumer)
            if reason is None:
                return FusionDecision(producer, consumer, True, _acceptance(kernel, consumer))
    return FusionDecision(producer, consumer, False, reason)
