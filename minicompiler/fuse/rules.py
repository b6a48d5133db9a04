"""When may a node join a kernel? `can_fuse` answers, with a reason either way.

The rules, in the words of the loop nest a kernel becomes:
  - a pointwise node joins if it runs over the kernel's iteration space (its shape is the
    kernel's domain), or, in a reduction kernel, if it is one value per row (its shape is the
    reduced shape);
  - a reduction joins if it folds the kernel's domain, over the same dims as the kernel's
    other reductions (a pointwise kernel becomes a reduction kernel); so does a scan (cumsum,
    ...), swept along its dim as a reduction is, though its result is an element value;
  - an element value may read a row value only where that value broadcasts along the
    reduced dims (a keepdim=True reduction does; keepdim=False over trailing dims does not);
  - a view joins only where it renames a value of the kernel without moving it: detach, a
    row value reshaped between the kernel's two row shapes ([C] <-> [1, C, 1, 1]), or a row
    value expanded over the domain (every element of the row reads it). In the loop nest it
    is the same register, so the ops around it stay fusable; any other view is a new shape
    over a stored buffer;
  - a comparison of a value recomputed in a reduction kernel with a reduction over that
    value (`x == amax(x)`, x computed) does not join: each sweep recomputes the value, and
    C++'s vectorized and scalar math may differ in the last bit between sweeps, which flips
    the comparison. The value is stored once, in the sweep that reduces it, and read back;
  - load_at (a gather: flip, pad, cat, embedding, ...) never joins the kernel computing the
    tensor it reads from: it reads elements other than the loop's own, so that tensor is stored;
  - store_at (a scatter) runs over its values' elements, so it joins a pointwise kernel of that
    shape (its values and positions computed there), never the one computing its base (whose
    memory it writes into); and nothing joins after it: its result is whole only once every
    element of the loop has written, so a reader of it runs in a later kernel;
  - extern calls never join: torch runs them.
"""

from __future__ import annotations

from minicompiler.fuse.schedule import FusionDecision, Kernel, format_shape
from minicompiler.ir.graph import Node
from minicompiler.ir.ops import COMPARISONS, OPS
from minicompiler.ir.symbolic_shapes import broadcast


def reduction_dims(node: Node) -> tuple[int, ...]:
    """The dims a reduction node folds: sorted, non-negative; `()` means all (as in torch)."""
    ndim = len(node.args[0].meta.shape)
    dims = node.args[1] if len(node.args) > 1 else node.kwargs.get("dims", ())
    if isinstance(dims, int):
        dims = (dims,)
    if not dims:
        return tuple(range(ndim))
    return tuple(sorted({d % ndim for d in dims}))


SWEPT = frozenset({"reduction", "scan"})  # the kinds of op computed in a sweep along some dims


def iteration_space(node: Node) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """(domain, reduction dims) of the loop nest that computes `node` on its own."""
    if OPS[node.op].kind in SWEPT:
        return node.args[0].meta.shape, reduction_dims(node)
    if OPS[node.op].kind == "scatter":  # one step per element of the values (and positions)
        return broadcast([a.meta.shape for a in node.args[1:3] if isinstance(a, Node)]), ()
    return node.meta.shape, ()


def _left_padded(shape: tuple[int, ...], ndim: int) -> tuple[int, ...]:
    return (1,) * (ndim - len(shape)) + shape


def _kind_refusal(kernel: Kernel | None, producer: Node, consumer: Node) -> str | None:
    for node in (producer, consumer):
        if node.op in OPS and OPS[node.op].kind == "extern":
            return f"{node.op} is an extern call"
    if kernel is None:
        if OPS.get(producer.op) is not None and OPS[producer.op].kind == "view":
            return f"{producer.op} is a view: it aliases a stored buffer"
        return f"{producer.name} is a graph input, not computed by a kernel"
    return None


def view_refusal(kernel: Kernel, view: Node) -> str | None:
    """Why `view` of a value of `kernel` cannot be that value's register in the loop nest."""
    source, shape = view.args[0], view.meta.shape
    if view.op == "detach" or (view.op in ("reshape", "expand") and shape == source.meta.shape):
        return None
    if view.op not in ("reshape", "expand"):
        return f"{view.op} moves elements: it aliases a stored buffer"
    if kernel.kind != "reduction" or not kernel.is_row_value(source):
        return f"{view.op} to {format_shape(shape)} changes which element is where"
    rows = (kernel.keepdim_shape, kernel.reduced_shape)
    if view.op == "reshape" and source.meta.shape in rows and shape in rows:
        return None
    if view.op == "expand" and shape == kernel.domain and _left_padded(source.meta.shape, len(shape)) == rows[0]:
        return None
    return f"{view.op} of row value {source.name} to {format_shape(shape)} is not one value per row"


def kernel_refusal(kernel: Kernel, node: Node) -> str | None:
    """Why `node` cannot be computed in `kernel`'s loop nest, or None if it can."""
    if (scatter := next((n for n in kernel.nodes if OPS[n.op].kind == "scatter"), None)) is not None:
        return f"{scatter.name} writes at computed positions: its kernel ends with it"
    if OPS[node.op].kind == "scatter":
        return _scatter_refusal(kernel, node)
    if OPS[node.op].kind == "view":
        if node.args[0] not in kernel.nodes:
            return f"{node.args[0].name} is not computed in the kernel"
        return view_refusal(kernel, node)
    if OPS[node.op].kind in SWEPT:
        domain, dims = iteration_space(node)
        if domain != kernel.domain:
            return f"different iteration space: {format_shape(domain)} vs {format_shape(kernel.domain)}"
        if kernel.kind == "reduction" and dims != kernel.reduction_dims:
            return f"reduction over different dims: {dims} vs {kernel.reduction_dims}"
        return None  # its input, if in the kernel, has the domain's shape: an element value
    if node.op == "load_at" and node.args[0] in kernel.nodes:
        return f"load_at reads {node.args[0].name} at other elements than its own: it must be in memory"
    shape = node.meta.shape
    row_shapes = (kernel.keepdim_shape, kernel.reduced_shape) if kernel.kind == "reduction" else ()
    if shape != kernel.domain and shape not in row_shapes:
        return f"different iteration space: {format_shape(shape)} vs {format_shape(kernel.domain)}"
    members = set(kernel.nodes)
    if (reason := _comparison_refusal(kernel, node)) is not None:
        return reason
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


def _scatter_refusal(kernel: Kernel, node: Node) -> str | None:
    if kernel.kind == "reduction":
        return f"{node.op} writes at computed positions: it runs in a pointwise kernel"
    if node.args[0] in kernel.nodes:
        return f"{node.op} writes into a copy of {node.args[0].name}: that must be in memory first"
    domain = iteration_space(node)[0]
    if domain != kernel.domain:
        return f"different iteration space: {format_shape(domain)} vs {format_shape(kernel.domain)}"
    return None


def _comparison_refusal(kernel: Kernel, node: Node) -> str | None:
    if node.op not in COMPARISONS or kernel.kind != "reduction":
        return None
    members = set(kernel.nodes)
    computed = [i for i in node.inputs() if i in members and not kernel.is_row_value(i)]
    for row in (i for i in node.inputs() if i in members and kernel.is_row_value(i)):
        for element in computed:
            if element in _ancestors_in(row, members):
                return f"compares {element.name}, recomputed per sweep, with {row.name}, a reduction over it"
    return None


def _ancestors_in(node: Node, members: set[Node]) -> set[Node]:
    found: set[Node] = set()
    pending = [node]
    while pending:
        for inp in pending.pop().inputs():
            if inp in members and inp not in found:
                found.add(inp)
                pending.append(inp)
    return found


def _acceptance(kernel: Kernel, node: Node) -> str:
    if OPS[node.op].kind == "view":
        return f"{node.op} renames {node.args[0].name}: the same register in the loop nest"
    if OPS[node.op].kind == "reduction":
        if kernel.kind == "pointwise":
            dims = reduction_dims(node)
            return f"reduction over dims {dims} of its producers' domain {format_shape(kernel.domain)}"
        return f"another reduction over dims {kernel.reduction_dims} of {format_shape(kernel.domain)}"
    if iteration_space(node)[0] != kernel.domain:
        return f"one value per row of the reduction over dims {kernel.reduction_dims}"
    return f"same iteration space {format_shape(kernel.domain)}"


def can_fuse(kernel: Kernel | None, producer: Node, consumer: Node) -> FusionDecision:
    """May `consumer` be computed in the kernel that holds `producer`?

    `kernel` is None when `producer` is in no kernel (a graph input, an extern's output, a view)."""
    reason = _kind_refusal(kernel, producer, consumer)
    if reason is None and kernel is not None:
        reason = kernel_refusal(kernel, consumer)
        if reason is None:
            return FusionDecision(producer, consumer, True, _acceptance(kernel, consumer))
    return FusionDecision(producer, consumer, False, reason)
