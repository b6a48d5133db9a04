"""Replace a hand-written attention by one call of F.scaled_dot_product_attention (seed 002).

    scores = q @ k.transpose(-2, -1)             matmul(q, transpose(k))
    scores = scores / sqrt(d)                    div or mul by a number
    scores = scores + mask                       optional: an additive (float) mask, or
    scores = scores.masked_fill(mask, -inf)      a boolean mask (True = hidden): where(mask, -inf, scores)
    out = softmax(scores, dim=-1) @ v            softmax over the last dim, matmul

becomes `scaled_dot_product_attention(q, k, v, attn_mask, 0.0, False, scale=scale)`, one extern call:
torch picks its fused (flash / memory-efficient / math) kernel, and the [.., L, S] score matrix
need not be written by our own kernels. SDPA's boolean mask means "True = attend", the opposite of
masked_fill's, so a boolean mask is negated. Only a fill value of -inf is replaced: another value
(-1e9) gives a different answer for a row that is masked everywhere.

Every intermediate (scores, probabilities) must be read only by the next step of the chain; a
graph that also returns the probabilities keeps its hand-written form. In a training graph the
call is differentiated like every torch_call: torch autograd computes SDPA's backward.

Not in a float32 training step on a GPU. There SDPA is the memory-efficient kernel (flash attention
takes half precision only), and its backward is slower than what minicompiler makes of the
hand-written form: cuBLAS's batched matmuls and one fused kernel for scale, mask and softmax each
way. On the H200, 8 attentions in a row, forward and backward, as CUDA graphs, took 0.62-0.91 of
SDPA's time with our kernels at the sizes tried, (8, 8, 128, 64) to (1, 8, 2048, 64) (B, H, L, D),
masked or not, but one ((32, 8, 64, 32) unmasked: 1.10; benchmarks/attention_forms.py); the
MiniTransformer's reduce-overhead training step took 4.66 ms instead of 4.72
(masked: 4.67 instead of 4.82). Inference is the other way round (1.32 ms with SDPA, 1.41 without),
so the choice follows the program the graph is compiled for first (`training`: grad mode on and an
input requiring grad). A kept attention's q, k and v are made contiguous by a kernel of ours where
torch's batched matmul would copy them at every read (`_batches_merge`); the copies are saved for
the backward. Numbers: benchmarks/results/h200_2026-11-28g/.
"""

from __future__ import annotations

import math
from typing import Any

import torch
import torch.nn.functional as F

from minicompiler.ir import Graph, Node, rewrite
from minicompiler.ir.ops import OPS
from minicompiler.replace.deferred import Deferred, single_use
from minicompiler.simplify.facts import location


def _last_dim(dim: Any, ndim: int) -> bool:
    return dim in (-1, ndim - 1)


def _transposed_keys(node: Any) -> bool:
    """k.transpose(-2, -1) (either order of the two dims)."""
    if not isinstance(node, Node) or node.op != "transpose":
        return False
    ndim = node.meta.ndim
    return ndim >= 2 and {d % ndim for d in node.args[1:3]} == {ndim - 2, ndim - 1}


def _scale(node: Node) -> float | None:
    """The factor of `scores / c` or `scores * c`, or None if `node` is neither."""
    if node.op not in ("div", "mul") or not isinstance(node.args[1], (int, float)) or node.args[1] == 0:
        return None
    return 1.0 / node.args[1] if node.op == "div" else float(node.args[1])


def _is_mask(node: Node) -> bool:
    if node.op == "add" and isinstance(node.args[1], Node) and node.args[1].meta.dtype.is_floating_point:
        return isinstance(node.args[0], Node) and node.args[0].meta.shape == node.meta.shape  # mask broadcasts

    # masked_fill(scores, hidden, -inf), as capture writes it
    return (node.op == "where" and not node.kwargs and isinstance(node.args[0], Node)
            and node.args[0].meta.dtype == torch.bool and node.args[1] == -math.inf
            and isinstance(node.args[2], Node) and node.args[2].meta.shape == node.meta.shape)


def _chain(out: Node, users: dict[Node, list[Node]]) -> list[Node] | None:
    """The nodes from `q @ k^T` up to the softmax that the final `... @ v` at `out` reads, or None
    if `out` is not the end of an attention."""
    if out.op != "matmul" or not isinstance(out.args[0], Node):
        return None
    softmax = out.args[0]
    if (softmax.op != "softmax" or not _last_dim(softmax.args[1], softmax.meta.ndim) or softmax.kwargs
            or softmax.args[2:] not in ((), (None,))):  # no dtype= conversion
        return None
    chain, node = [softmax], softmax.args[0]
    if isinstance(node, Node) and _is_mask(node):
        chain.append(node)
        node = node.args[2] if node.op == "where" else node.args[0]
    if not isinstance(node, Node) or _scale(node) is None:
        return None
    chain.append(node)
    scores = node.args[0]
    if not isinstance(scores, Node) or scores.op != "matmul" or not _transposed_keys(scores.args[1]):
        return None
    chain += [scores, scores.args[1]]
    readers = [out, *chain[:-1]]
    if not all(single_use(n, users, reader) for n, reader in zip(chain, readers, strict=True)):
        return None
    return chain


def replace_attention(graph: Graph, log: list[str] | None = None, training: bool = False) -> Graph:
    """A new graph where each hand-written attention is one scaled_dot_product_attention call,
    except in a float32 training step on a GPU (`training`: the graph is compiled for one)."""
    users = graph.users()
    ends: set[Node] = set()
    swallowed: set[Node] = set()
    copied: set[Node] = set()  # q, k or v of an attention kept as written: made contiguous once
    for node in graph.nodes:
        if (chain := _chain(node, users)) is None:
            continue
        if training and _faster_as_written(node):
            scores, keys = chain[-2:]
            strided = [n for n in (scores.args[0], keys.args[0], node.args[1]) if not _batches_merge(n)]
            copied.update(strided)
            if log is not None:
                made = f"; {', '.join(n.name for n in strided)} made contiguous for the matmuls" if strided else ""
                log.append(f"replace attention: %{node.name} kept as written: in a float32 training step on a "
                           f"GPU our matmuls and fused softmax beat SDPA's backward{made}{location(node)}")
            continue
        ends.add(node)
        swallowed.update(chain)

    def rule(new: Graph, node: Node, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if node in copied:
            view = new.copy_of(node, args, kwargs)
            view.tags.update(node.tags)
            return new.call("clone", view)
        if node in swallowed:
            return Deferred(node, args, kwargs)
        if node not in ends:
            return None
        call = _sdpa(new, args[0], args[1])
        if log is not None:
            masked = "masked " if call.args[4] is not None else ""
            log.append(f"replace attention: %{node.name}: {masked}softmax(q @ k^T * {call.kwargs['scale']:.4g}) @ v "
                       f"-> scaled_dot_product_attention{location(node)}")
        return call

    return rewrite(graph, rule)


def _faster_as_written(out: Node) -> bool:
    """Whether the attention ending at `out` runs faster in a training step as written (the
    module docstring says when: float32 on a GPU)."""
    return out.meta.device.type == "cuda" and out.meta.dtype == torch.float32


def _batches_merge(node: Node) -> bool:
    """Whether torch's batched matmul can view the leading (batch) dims of `node` as one dim.
    Where it cannot (q, k, v sliced from one projection: (B, H, L, D) with strides
    (L*3*H*D, D, 3*H*D, 1); or a (B, L, H, D) view transposed), every matmul that reads it copies
    it first: in a training step q, k and v each twice, forward and backward. Made contiguous once
    by our own kernel, the copy is saved for the backward instead."""
    laid_out = _as_viewed(node)
    if laid_out is None:
        return True  # symbolic sizes somewhere in its views: leave it to torch
    dims = [(size, stride) for size, stride in zip(laid_out.shape[:-2], laid_out.stride()[:-2], strict=True)
            if size != 1]
    return all(outer == inner_size * inner_stride
               for (_, outer), (inner_size, inner_stride) in zip(dims, dims[1:], strict=False))


_VIEWS = ("select", "transpose", "permute", "reshape", "slice", "unsqueeze", "squeeze", "expand")


def _as_viewed(node: Node) -> torch.Tensor | None:
    """A meta tensor with `node`'s strides: its chain of views replayed on the contiguous result
    it starts from (the captured graph's metas say only shapes). None where a size is symbolic."""
    if not all(isinstance(n, int) for n in node.meta.shape):
        return None
    if node.op in _VIEWS and isinstance(node.args[0], Node):
        if node.inputs() != [node.args[0]]:
            return None  # a size computed in the graph
        base = _as_viewed(node.args[0])
        return None if base is None else OPS[node.op].impl(base, *node.args[1:], **node.kwargs)
    return torch.empty(node.meta.shape, dtype=node.meta.dtype, device="meta")


def _sdpa(g: Graph, softmax: Deferred, v: Any) -> Node:
    step, mask = softmax.args[0], None
    if step.node.op == "add":  # additive mask
        step, mask = step.args[0], step.args[1]
    elif step.node.op == "where":  # masked_fill(scores, hidden, -inf): SDPA's True means "attend"
        step, mask = step.args[2], g.call("logical_not", step.args[0])
    scale = _scale(step.node)
    scores = step.args[0]
    q, k = scores.args[0], scores.args[1].args[0]
    return g.call("torch_call", F.scaled_dot_product_attention, q, k, v, mask, 0.0, False, scale=scale)
