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

Only exact or order-insensitive results are split this way: sums of float32/float64 (rounded
in another order than eager's, as any GPU sum is) and integers, and max/min. A float16 partial
sum would be rounded to float16 between the steps, so those are left whole.
"""

from __future__ import annotations

import math

import torch

from minicompiler.fuse.rules import reduction_dims
from minicompiler.ir import Graph, Node
from minicompiler.simplify.facts import location

SPLIT_OPS = frozenset({"sum", "amax", "amin"})
SPLIT_DTYPES = frozenset({torch.float32, torch.float64, torch.int32, torch.int64})
FEW_ROWS = 1024  # fewer rows than this: too few programs to fill a GPU
LONG_ROWS = 1024  # and rows at least this long: enough work to be worth a second kernel
MANY_ROWS = 2048  # the first step keeps at least this many rows


def split_reductions(graph: Graph) -> list[str]:
    """Split, in place, each reduction with few long rows into two; one note per split."""
    notes = []
    for node in graph.compute_nodes():
        first = _first_step_dims(node)
        if first:
            x, dims, keepdim = node.args[0], node.args[1], node.args[2] if len(node.args) > 2 else False
            partial = graph.call_before(node, node.op, x, first, True)
            node.args = (partial, dims, keepdim)  # the same dims: those of the first step are 1 now
            shape = ", ".join(map(str, partial.meta.shape))
            notes.append(f"{node.name}: reduced in two steps, first dims {first} into [{shape}]{location(node)}")
    return notes


def _first_step_dims(node: Node) -> tuple[int, ...]:
    """The dims the first step reduces; () where the reduction stays whole."""
    if node.op not in SPLIT_OPS or node.kwargs or node.meta.dtype not in SPLIT_DTYPES:
        return ()
    shape = node.args[0].meta.shape
    if not all(isinstance(s, int) for s in shape):
        return ()  # symbolic sizes: the row counts are not known
    reduced = [d for d in reduction_dims(node) if shape[d] != 1]
    length = math.prod(shape[d] for d in reduced)
    if len(reduced) < 2 or math.prod(shape) // max(length, 1) >= FEW_ROWS or length < LONG_ROWS:
        return ()
    first: tuple[int, ...] = ()
    for d in reversed(reduced[1:]):  # trailing dims, while enough rows are left
        if math.prod(shape) // (math.prod(shape[e] for e in first) * shape[d]) < MANY_ROWS:
            break
        first = (d, *first)
    return first
