"""Split a reduction with few, long rows in two (the Triton backend), as TorchInductor does.

A reduction kernel gives each program a block of rows. A training batch norm sums over
(N, H, W) for each of its C channels: ResNet-18's first one, 64 rows of 200,704 elements each.
That is 64 programs (or, 64 rows to a block, one) on a GPU with 132 multiprocessors, each
sweeping 0.8 MB: most of the GPU idles (on the H100 such sums took 0.2-0.7 ms, against 0.05 for
torch's). Reduced in two steps instead,

    sum(x, (0, 2, 3))   ->   sum(sum(x, (3,), keepdim=True), (0, 2, 3))

the first step has N*C*H rows of W elements (114,688 rows: work for every multiprocessor) and
still fuses with what computes x; the second folds a tensor W times smaller. The first step
takes the trailing reduced dims, as many as leave it at least `MANY_ROWS` rows.

A small input (at most `WHOLE_INPUT` elements) stays whole. Split, a batch norm's statistics
are a kernel that stores partial sums and a second that adds them up; whole, one kernel sums
each channel and normalizes it too (reading the channel twice, the second time mostly from
cache). Few programs read long rows then, slowly: on the H200 machine every batch norm left
whole put ResNet-50 b16's training step at 23.3 ms of GPU time instead of 7.6 (0.82x eager
instead of 1.05x). On a small input they finish in microseconds, and a small model's training
step waits on the host, which spends ~8 us per launch: there ResNet-18 b1's step took 10.5 ms
with every batch norm whole against 11.5 split (eager: 10.3).

Only exact or order-insensitive results are split this way: sums of float32/float64 (rounded
in another order than eager's, as any GPU sum is) and integers, and max/min. A float16 partial
sum would be rounded to float16 between the steps, so those are left whole.

A variance needs its mean before it can sum squares about it: split as above, a batch norm's
statistics took four kernels (the mean's two steps, then the squares' two). Instead each first-step
row (a chunk of nF elements) sums the squares about its own mean, in the kernel that sums the
chunk, and the second step adds the chunks up as Chan et al. do,

    sum((x - m)^2) = sum over chunks j of [ sum((x - m_j)^2 over j) + nF * (m_j - m)^2 ],

exact, and as accurate as the two passes it replaces: two kernels, then the normalization.

A sum over one long dim that is not the last, a bias's gradient (the (B*S, H) gradient summed
over its rows), is an outer reduction: each program takes 64 neighbouring columns and walks all
the rows. BERT's 768 columns made 12 programs for the whole GPU (20 us a sum; TorchInductor's 2).
Its dim is split in two, (R,) -> (R1, R2), and summed in two steps: first over R2, which leaves
R1 times as many rows (programs for every multiprocessor), then over R1.
"""

from __future__ import annotations

import functools
import math

import torch

from minicompiler.fuse.rules import reduction_dims
from minicompiler.ir import OPS, Graph, Node, map_structure
from minicompiler.ir.ops import INLINE
from minicompiler.simplify.facts import location

SPLIT_OPS = frozenset({"sum", "amax", "amin"})
SPLIT_DTYPES = frozenset({torch.float32, torch.float64, torch.int32, torch.int64})
FEW_ROWS = 1024  # fewer rows than this: too few programs to fill a GPU
LONG_ROWS = 1024  # and rows at least this long: enough work to be worth a second kernel
MANY_ROWS = 2048  # the first step keeps at least this many rows
OUTER_BLOCK_ROWS = 64  # rows per program of an outer reduction (codegen/triton.py's XBLOCK for them)
MANY_PROGRAMS = 512  # an outer reduction's first step has at least this many (~4 per multiprocessor)
MIN_CHUNK = 8  # and sums at least this many elements per row
# inputs smaller than this are read whole by one kernel in a few microseconds: a second kernel
# would cost more host time (a launch and a buffer) than it saves (the MLP's (1024, 10) output
# gradient, summed over its rows, was split in 128 chunks)
SMALL_INPUT = 1 << 16
WHOLE_INPUT = 1 << 18  # a reduction with few long rows of an input up to this size stays whole (see above)


def split_reductions(graph: Graph) -> list[str]:
    """Split, in place, each reduction with few long rows into two; one note per split."""
    notes = []
    partials: dict[tuple[str, Node, tuple[int, ...]], Node] = {}  # one first step per (op, input, dims)
    for node in graph.compute_nodes():
        first = _first_step_dims(node)
        if first and (chunked := _chunk_means(node, first)) is not None:
            _sum_squares_by_chunks(graph, node, first, *chunked)
            notes.append(f"{node.name}: sum of squares about the mean in two steps, first dims {first}, "
                         f"each chunk about its own mean{location(node)}")
        elif (outer := _outer_split(node)) is not None:
            first, last, chunks = outer
            length = math.prod(node.args[0].meta.shape[first:last + 1])
            notes.append(f"{node.name}: dims {first}..{last} ({length} elements) split into {chunks} chunks, "
                         f"reduced in two steps{location(node)}")
            _split_one_dim(graph, node, first, last, chunks)
        elif first:
            x, dims, keepdim = node.args[0], node.args[1], node.args[2] if len(node.args) > 2 else False
            # a batch norm sums x twice, for its mean (C,) and its variance's (1, C, 1, 1): one first step
            key = (node.op, x, first)
            if key not in partials:
                partials[key] = graph.call_before(node, node.op, x, first, True)
            partial = partials[key]
            node.args = (partial, dims, keepdim)  # the same dims: those of the first step are 1 now
            shape = ", ".join(map(str, partial.meta.shape))
            notes.append(f"{node.name}: reduced in two steps, first dims {first} into [{shape}]{location(node)}")
    return notes


def _splittable_shape(node: Node) -> tuple[int, ...] | None:
    """The input's shape where `node` is a reduction that may be split (an exact or
    order-insensitive one, of known sizes); None otherwise."""
    if node.op not in SPLIT_OPS or node.kwargs or node.meta.dtype not in SPLIT_DTYPES:
        return None
    shape = node.args[0].meta.shape
    if not all(isinstance(s, int) for s in shape):
        return None  # symbolic sizes: the row counts are not known
    return shape if math.prod(shape) >= SMALL_INPUT else None


def _first_step_dims(node: Node) -> tuple[int, ...]:
    """The dims the first step reduces; () where the reduction stays whole."""
    if (shape := _splittable_shape(node)) is None:
        return ()
    reduced = [d for d in reduction_dims(node) if shape[d] != 1]
    length = math.prod(shape[d] for d in reduced)
    if len(reduced) < 2 or math.prod(shape) // max(length, 1) >= FEW_ROWS or length < LONG_ROWS or (
            math.prod(shape) <= WHOLE_INPUT):
        return ()
    first: tuple[int, ...] = ()
    for d in reversed(reduced[1:]):  # trailing dims, while enough rows are left
        if math.prod(shape) // (math.prod(shape[e] for e in first) * shape[d]) < MANY_ROWS:
            break
        first = (d, *first)
    return first


def _chunk_means(squares: Node, first: tuple[int, ...]) -> tuple[Node, Node, Node] | None:
    """(x, chunk sums, mean) where `squares` is sum((x - mean)^2) over dims D, the mean being
    sum(x over D) / n whose sum is already split with first step `first` (the variance's
    decomposition, decompose/reductions.py); None otherwise."""
    square, dims = squares.args[0], set(reduction_dims(squares))
    if not (square.op == "mul" and square.args[0] is square.args[1] and isinstance(square.args[0], Node)
            and square.args[0].op == "sub"):
        return None
    x, mean = square.args[0].args
    scaled = mean.args[0] if isinstance(mean, Node) and mean.op == "detach" else mean
    if not (isinstance(x, Node) and isinstance(scaled, Node) and scaled.op in ("div", "mul")):
        return None
    total, factor = scaled.args
    n = math.prod(x.meta.shape[d] for d in dims)
    if not (isinstance(total, Node) and total.op == "sum" and set(reduction_dims(total)) == dims
            and isinstance(factor, (int, float)) and math.isclose(factor if scaled.op == "div" else 1 / factor, n)):
        return None
    chunks = total.args[0]  # the first step of the mean's sum, split before this node
    if not (chunks.op == "sum" and chunks.args[0] is x and tuple(reduction_dims(chunks)) == first
            and chunks.meta.ndim == x.meta.ndim):
        return None
    return x, chunks, mean


def _sum_squares_by_chunks(graph: Graph, squares: Node, first: tuple[int, ...], x: Node, chunks: Node,
                           mean: Node) -> None:
    """Rewrite `squares` in place as the chunks' sums of squares about their own means plus
    nF * (chunk mean - mean)^2, summed over its dims."""
    call = functools.partial(graph.call_before, squares)
    dims, keepdim = squares.args[1], squares.args[2] if len(squares.args) > 2 else False
    per_chunk = math.prod(x.meta.shape[d] for d in first)
    centred = call("sub", x, call("div", chunks, per_chunk))  # about the chunk's own mean
    within = call("sum", call("sum", call("mul", centred, centred), first, True), dims, keepdim)
    # nF * (m_j - m)^2 as (chunk sum - nF * m)^2 / nF: from the chunk sums the second step reads
    # anyway, so the first step stores no chunk means
    apart = call("sub", chunks, call("mul", mean, per_chunk))
    between = call("sum", call("mul", apart, apart), dims, keepdim)
    squares.op, squares.args = "add", (within, call("div", between, per_chunk))


def _outer_split(node: Node) -> tuple[int, int, int] | None:
    """(first dim, last dim, chunks): `node` reduces neighbouring dims (as one long dim) that are
    not its input's last, with too few rows for the programs of an outer reduction; the dims,
    seen as one, split into `chunks` of at least MIN_CHUNK elements."""
    if (shape := _splittable_shape(node)) is None:
        return None
    reduced = reduction_dims(node)
    if not reduced:
        return None  # a 0-d input
    first, last = reduced[0], reduced[-1]
    keepdim = node.args[2] if len(node.args) > 2 else False
    if list(reduced) != list(range(first, last + 1)) or all(s == 1 for s in shape[last + 1:]) or (
            keepdim and last > first):
        return None  # dims apart, or the last dim (an inner reduction), or several dims kept as 1s
    length = math.prod(shape[first:last + 1])
    rows = math.prod(shape) // max(length, 1)
    if length < LONG_ROWS or rows // OUTER_BLOCK_ROWS >= MANY_PROGRAMS:
        return None
    wanted = -(-MANY_PROGRAMS * OUTER_BLOCK_ROWS // rows)  # chunks for MANY_PROGRAMS, or as close as will go
    divisors = [c for c in range(2, length // MIN_CHUNK + 1) if length % c == 0]
    chunks = next((c for c in divisors if c >= wanted), divisors[-1] if divisors else None)
    return None if chunks is None else (first, last, chunks)


def _split_one_dim(graph: Graph, node: Node, first: int, last: int, chunks: int) -> None:
    """Rewrite `node` in place to reduce, over dim `first`, the partial results of its input's
    dims `first`..`last` seen as (chunks, length // chunks) and reduced over the second."""
    x, keepdim = node.args[0], node.args[2] if len(node.args) > 2 else False
    shape = x.meta.shape
    length = math.prod(shape[first:last + 1])
    split_shape = (*shape[:first], chunks, length // chunks, *shape[last + 1:])
    source, dims = _before_reshape(x, first, last)  # (a Linear's gradient is reshaped to 2-d)
    split = _computed_split(graph, source, node, split_shape, *dims)
    split = split or graph.call_before(node, "reshape", x, split_shape)
    partial = graph.call_before(node, node.op, split, (first + 1,), False)  # `chunks` at dim `first`
    node.args = (partial, (first,), keepdim)
    if x is not source and not graph.users()[x]:
        graph.nodes.remove(x)


def _before_reshape(x: Node, first: int, last: int) -> tuple[Node, tuple[int, int]]:
    """(what x reshapes, and its dims that x's `first`..`last` merge) where x only merges dims of
    it, row-major, keeping those before and after; else (x, its dims)."""
    source = x.args[0] if x.op == "reshape" else None
    if source is None or not source.meta.is_contiguous():
        return x, (first, last)
    before, after = x.meta.shape[:first], x.meta.shape[last + 1:]
    inner = len(source.meta.shape) - len(after)
    if source.meta.shape[:first] != before or source.meta.shape[inner:] != after or inner <= first:
        return x, (first, last)
    return source, (first, inner - 1)


def _computed_split(graph: Graph, x: Node, node: Node, split_shape: tuple[int, ...], first: int,
                    last: int) -> Node | None:
    """x (`node`'s input, or what that reshapes) computed in `split_shape` (its dims `first`..`last`
    as one, in two) by its own pointwise ops, over views of their inputs split alike; x's other
    readers read that back through a view of x's shape. A reshape of a computed value is a buffer
    to the fuser, stored and then read: an MLP's ReLU gradient was a kernel of its own, which the
    bias gradient's first step read back. Computed in the split shape, it is summed by the kernel
    computing it. None where x is not computed by pointwise ops laid out row-major, or an input
    does not split along with it."""
    users = graph.users()
    cone = _pointwise_cone(x, users)
    inputs = [i for member in cone for i in member.inputs() if i not in cone]
    if not cone or not all(_splits_along(i, x, first, last) for i in inputs):
        return None
    readers = users[x]
    anchor = min(readers, key=graph.nodes.index)  # the new nodes come before x's first reader
    made: dict[Node, Node] = {}
    views = {i: graph.call_before(anchor, "reshape", i, _split_like(i, x, split_shape, first, last))
             for i in dict.fromkeys(inputs)}
    for member in [n for n in graph.nodes if n in cone]:  # in graph order
        args = tuple(made.get(a, views.get(a, a)) if isinstance(a, Node) else a for a in member.args)
        made[member] = graph.call_before(anchor, member.op, *args, **member.kwargs)
    back = graph.call_before(anchor, "reshape", made[x], x.meta.shape)
    for reader in readers:
        if reader is not node:
            reader.args = map_structure(lambda v: back if v is x else v, reader.args)
    for member in cone:  # nothing reads them now
        graph.nodes.remove(member)
    return made[x]


def _pointwise_cone(x: Node, users: dict[Node, list[Node]]) -> set[Node]:
    """x and the pointwise nodes of its shape that only it (through each other) reads; empty where
    x is not such a node, laid out row-major."""
    def pointwise(n: Node) -> bool:
        return (n.op in OPS and OPS[n.op].kind == "pointwise" and n.op not in INLINE and not n.kwargs
                and n.meta.shape == x.meta.shape and n.meta.is_contiguous())

    if not pointwise(x):
        return set()
    cone, grown = {x}, True
    while grown:
        grown = False
        for n in {i for member in cone for i in member.inputs()} - cone:
            if pointwise(n) and users[n] and all(u in cone for u in users[n]):
                cone.add(n)
                grown = True
    return cone


def _splits_along(value: Node, x: Node, first: int, last: int) -> bool:
    """Can `value`, read by x's ops (broadcast against x's shape), be viewed split as x is: its
    dims `first`..`last` x's own, side by side in memory, or all broadcast (size 1)?"""
    if value.op in INLINE or value.meta.ndim > x.meta.ndim:
        return False
    lead = x.meta.ndim - value.meta.ndim
    padded = (1,) * lead + value.meta.shape
    if all(size == 1 for size in padded[first:last + 1]):
        return True
    strides = (0,) * lead + value.meta.stride()
    return padded[first:last + 1] == x.meta.shape[first:last + 1] and all(
        strides[d] == strides[d + 1] * padded[d + 1] for d in range(first, last))


def _split_like(value: Node, x: Node, split_shape: tuple[int, ...], first: int, last: int) -> tuple[int, ...]:
    padded = (1,) * (x.meta.ndim - value.meta.ndim) + value.meta.shape
    broadcast = all(size == 1 for size in padded[first:last + 1])
    return (*padded[:first], *((1, 1) if broadcast else split_shape[first:first + 2]), *padded[last + 1:])
