"""Fold an eval-mode batch norm into the convolution before it (seed 004).

In eval mode batch norm is a per-channel affine map with the running statistics,

    bn(y) = (y - mean) * scale + beta,     scale = gamma / sqrt(var + eps)

so bn(conv(x, w, b)) = conv(x, w * scale[:, None, None, None], (b - mean) * scale + beta):
one convolution instead of a convolution and a pass over its whole output.

The new weight and bias are computed *inside* the compiled program from the live parameters and
running statistics (a few per-channel ops), not baked in as constants: loading a state dict or
updating the statistics between calls needs no recompile and cannot go stale. Training-mode batch
norm (batch statistics) is a different graph, never a `torch_call` of F.batch_norm, so it is
never folded.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from minicompiler.ir import Graph, Node, rewrite
from minicompiler.replace.deferred import Deferred, single_use
from minicompiler.simplify.facts import location

CONVOLUTIONS = frozenset({torch.conv1d, torch.conv2d, torch.conv3d})


def _is_conv(node: Any) -> bool:
    return (isinstance(node, Node) and node.op == "torch_call" and node.args[0] in CONVOLUTIONS
            and not node.kwargs and len(node.args) >= 3)


def _eval_batch_norm(node: Node) -> bool:
    """F.batch_norm(x, running_mean, running_var, weight, bias, training=False, momentum, eps)."""
    if node.op != "torch_call" or node.args[0] is not F.batch_norm or node.kwargs or len(node.args) != 9:
        return False
    _, _, mean, var, _, _, training, _, _ = node.args
    return training is False and isinstance(mean, Node) and isinstance(var, Node)


def fold_conv_batch_norm(graph: Graph, log: list[str] | None = None) -> Graph:
    """A new graph where every eval-mode batch norm reading a convolution (and nothing else
    reading that convolution) is folded into the convolution's weight and bias."""
    users = graph.users()
    convs = {node.args[1] for node in graph.nodes
             if _eval_batch_norm(node) and _is_conv(node.args[1]) and single_use(node.args[1], users, node)
             and node.args[1].args[2].meta.dtype == node.args[3].meta.dtype}

    def rule(new: Graph, node: Node, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if node in convs:
            return Deferred(node, args, kwargs)
        if len(args) > 1 and isinstance(args[1], Deferred):  # the batch norm of a folded conv
            if log is not None:
                log.append(f"fold conv+bn: %{node.name} folded into %{args[1].node.name}'s weight and bias"
                           f"{location(node)}")
            return _folded_conv(new, args[1].args, args)
        return None

    return rewrite(graph, rule)


def _folded_conv(g: Graph, conv: tuple[Any, ...], bn: tuple[Any, ...]) -> Node:
    fn, x, weight, bias, *settings = conv
    _, _, mean, var, gamma, beta, _, _, eps = bn
    scale = g.call("rsqrt", g.call("add", var, eps))  # (C_out,)
    if gamma is not None:
        scale = g.call("mul", scale, gamma)
    per_out_channel = (weight.meta.shape[0],) + (1,) * (weight.meta.ndim - 1)  # (C_out,) -> against (C_out, C_in, k...)
    new_weight = g.call("mul", weight, g.call("reshape", scale, per_out_channel))
    shifted = g.call("neg", mean) if bias is None else g.call("sub", bias, mean)
    new_bias = g.call("mul", shifted, scale)
    if beta is not None:
        new_bias = g.call("add", new_bias, beta)
    return g.call("torch_call", fn, x, new_weight, new_bias, *settings)
