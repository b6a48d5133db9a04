"""A linear layer's bias added by the generated kernel after the matrix multiply (the GPU).

`nn.Linear` decomposes into `addmm(b, x, w.t())`: cuBLAS adds the bias in the matmul's epilogue.
On the H100 that costs more than the add: with a bias cuBLAS picks other kernels, and a BERT-base
feed-forward output (1024x3072 @ 3072x768, float32) takes 159 us as addmm and 116 us as mm
(`benchmarks/results/h100_2026-11-27e/gemm_choice.txt`). Where everything that reads the product
is pointwise (a GELU, a residual add before a LayerNorm), the bias can join that kernel instead,
as TorchInductor does:

    y = addmm(b, x, w)            y = matmul(x, w)
    out = reshape(y, (B, T, N))   out = reshape(y, (B, T, N))
    z = add(out, residual)        out_b = add(out, b)        <- fused with the add after it
                                  z = add(out_b, residual)

The bias is one row broadcast along the last dim, so it moves past a reshape that keeps that dim.
Not every shape gains, and a race in isolation is not the whole story: MiniTransformer's
feed-forward output (1024x2048 @ 2048x512) is 19% faster as mm alone, yet the model ran 10-15%
slower with its bias moved (`bias_after_matmul_ab.txt`, same directory). So each candidate shape
is raced once per process, addmm against mm on tensors of its sizes and layouts (a few
milliseconds), and the bias moves only where mm wins by RACE_MARGIN or more: BERT's and ViT's
3072-wide feed-forward outputs (24-30% faster), which made their inference 7-8% faster. The race
reads its operands from memory, not from the L2 cache (`_median_ms`), as the model does.

float32 only: in half precision the product would be rounded before the bias is added. Where
a matmul's product goes to another library call (attention's Q, K, V), the bias stays in
cuBLAS's epilogue: an add there would be a kernel of its own. Runs on a graph just before it
is lowered, in place, after `addmm_relu` (which takes the ReLUs).
"""

from __future__ import annotations

import functools
import statistics
import time
from collections.abc import Callable

import torch

from minicompiler.ir import Graph, Node, map_structure
from minicompiler.ir.ops import OPS
from minicompiler.simplify.facts import location

RACE_MARGIN = 0.2  # mm must beat addmm by this fraction in the race (see the docstring)
L2_FLUSH_BYTES = 256 << 20  # written between the race's calls: more than any GPU's L2 (H200: 60 MB)


def bias_after_matmul(graph: Graph, worth_it: Callable[[Node], bool] | None = None) -> list[str]:
    """Turn each addmm whose readers are all pointwise into a matmul and an add, where `worth_it`
    (default: the race) says so; one note each."""
    notes = []
    users = graph.users()
    worth_it = worth_it or mm_beats_addmm
    for node in graph.compute_nodes():
        if (moves := _where_the_bias_goes(node, users)) is None or not worth_it(node):
            continue
        bias, a, b = node.args
        node.op, node.args = "matmul", (a, b)
        for value, readers in moves.items():
            added = graph.call_before(min(readers, key=graph.nodes.index), "add", value, bias)
            for reader in readers:
                _read_instead(reader, value, added)
        notes.append(f"{node.name}: matmul without its bias, added by the kernel after it{location(node)}")
    return notes


def _where_the_bias_goes(node: Node, users: dict[Node, list[Node]]) -> dict[Node, list[Node]] | None:
    """For addmm(bias, a, b) read only by pointwise ops, directly or through reshapes that keep
    the last dim: {the product or a reshape of it: the pointwise ops that are to read it plus the
    bias}. None for any other node."""
    if node.op != "addmm" or node.kwargs or len(node.args) != 3:
        return None
    bias, columns = node.args[0], node.meta.shape[-1]
    if not (isinstance(bias, Node) and bias.meta.shape == (columns,) and node.meta.dtype == torch.float32
            and bias.meta.dtype == torch.float32):
        return None
    moves: dict[Node, list[Node]] = {}
    for reader in dict.fromkeys(users[node]):
        if reader.op == "reshape" and reader.meta.shape[-1:] == (columns,) and _pointwise(users[reader]):
            moves[reader] = list(dict.fromkeys(users[reader]))
        elif _pointwise([reader]):
            moves.setdefault(node, []).append(reader)
        else:
            return None
    return moves or None


def _read_instead(reader: Node, old: Node, new: Node) -> None:
    def swap(arg: object) -> object:
        return new if arg is old else arg

    reader.args, reader.kwargs = map_structure(swap, reader.args), map_structure(swap, reader.kwargs)


def _pointwise(readers: list[Node]) -> bool:
    return bool(readers) and all(r.op != "output" and OPS[r.op].kind == "pointwise" for r in readers)


def mm_beats_addmm(node: Node) -> bool:
    """Race addmm(bias, a, b) against mm(a, b) on random tensors laid out as the node's operands."""
    operands = [arg.meta for arg in node.args]
    if node.meta.device.type != "cuda":
        return False  # the race is between cuBLAS's kernels
    if not all(isinstance(n, int) for meta in operands for n in (*meta.shape, *meta.stride())):
        return False  # symbolic sizes: one shape's race would not speak for the others
    key = tuple((meta.shape, meta.stride(), meta.dtype, meta.device) for meta in operands)
    return _race(key)


@functools.cache
def _race(operands: tuple) -> bool:
    bias, a, b = (torch.empty_strided(shape, strides, dtype=dtype, device=device).normal_()
                  for shape, strides, dtype, device in operands)
    flush = torch.empty(L2_FLUSH_BYTES // 4, dtype=torch.int32, device=a.device)
    with_bias = _median_ms(lambda: torch.addmm(bias, a, b), flush)
    without = _median_ms(lambda: torch.mm(a, b), flush)
    return without < with_bias * (1 - RACE_MARGIN)


def _median_ms(call: Callable[[], object], flush: torch.Tensor, repeats: int = 7) -> float:
    """Milliseconds per call, with the operands out of the GPU's L2 cache (`flush` is written
    before each call), as a model's operands come from memory. Timed from the cache, addmm's
    kernel looked as fast as mm's and the MiniTransformer's feed-forward biases stayed in addmm,
    whose kernel (64x64 tiles) took about twice as long in the model as mm's (128x128); timed
    from memory, mm wins, and on the H200 MiniTransformer inference took 1.40 ms instead of 1.59
    (reduce-overhead: 1.31 instead of 1.51). The longer of the GPU's time and the host's (a
    call's launch costs host time too, and a model of small kernels waits on that, not on the GPU)."""
    for _ in range(2):  # warm-up: cuBLAS's workspace, the kernel's first load
        call()
    samples = []
    for _ in range(repeats):
        flush.zero_()
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        host_start = time.perf_counter()
        start.record()
        call()
        end.record()
        host_ms = (time.perf_counter() - host_start) * 1e3
        end.synchronize()
        samples.append(max(start.elapsed_time(end), host_ms))
    return statistics.median(samples)
