"""Fold an eval-mode batch norm into the convolution before it (seed 004).

In eval mode batch norm is a per-channel affine map with the running statistics,

    bn(y) = (y - mean) * scale + beta,     scale = gamma / sqrt(var + eps)

so bn(conv(x, w, b)) = conv(x, w * scale[:, None, None, None], (b - mean) * scale + beta):
one convolution instead of a convolution and a pass over its whole output.

The new weight and bias are computed from the live parameters and running statistics, not baked
in as constants: loading a state dict or updating the statistics between calls needs no recompile
and cannot go stale. But they are not computed on every call either (that cost a pass over every
weight per call, and handed the convolution a new weight tensor each time, which oneDNN and cuDNN
prepare again): `folded_weight` and `folded_bias` keep their result per weight until one of the
tensors they read changes (its memory or version counter), as TorchInductor's freezing folds them
once. Where a gradient is asked for (grad mode on and an input requiring grad: the backward of the
call, run by torch autograd), they compute afresh. Training-mode batch norm (batch statistics) is a
different graph, never a `torch_call` of F.batch_norm, so it is never folded.
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from minicompiler.ir import Graph, Node, rewrite
from minicompiler.replace.deferred import Deferred, single_use
from minicompiler.runtime.cuda_graphs import recording_cuda_graph
from minicompiler.runtime.per_tensor import PerTensor
from minicompiler.simplify.facts import location

CONVOLUTIONS = frozenset({torch.conv1d, torch.conv2d, torch.conv3d})


def is_conv(node: Any) -> bool:
    """A torch_call of conv1d/2d/3d with positional arguments (x, weight, bias, ...)."""
    return (isinstance(node, Node) and node.op == "torch_call" and node.args[0] in CONVOLUTIONS
            and not node.kwargs and len(node.args) >= 3)


def eval_batch_norm(node: Node) -> bool:
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
             if eval_batch_norm(node) and is_conv(node.args[1]) and single_use(node.args[1], users, node)
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
    new_weight = g.call("torch_call", folded_weight, weight, var, gamma, eps)
    new_bias = g.call("torch_call", folded_bias, bias, weight, mean, var, gamma, beta, eps)
    return g.call("torch_call", fn, x, new_weight, new_bias, *settings)


def _scale(var: torch.Tensor, gamma: torch.Tensor | None, eps: float) -> torch.Tensor:
    scale = torch.rsqrt(var + eps)  # (C_out,)
    return scale if gamma is None else scale * gamma


def folded_weight(weight: torch.Tensor, var: torch.Tensor, gamma: torch.Tensor | None, eps: float) -> torch.Tensor:
    """w * scale, per output channel (kept until an input changes)."""
    def fold() -> torch.Tensor:
        per_out_channel = (weight.shape[0],) + (1,) * (weight.ndim - 1)  # (C_out,) against (C_out, C_in, k...)
        return weight * _scale(var, gamma, eps).reshape(per_out_channel)

    return _kept(fold, "weight", weight, (weight, var, gamma, eps))


def folded_bias(bias: torch.Tensor | None, weight: torch.Tensor, mean: torch.Tensor, var: torch.Tensor,
                gamma: torch.Tensor | None, beta: torch.Tensor | None, eps: float) -> torch.Tensor:
    """(b - mean) * scale + beta (kept until an input changes; `weight` only names the entry)."""
    def fold() -> torch.Tensor:
        shifted = -mean if bias is None else bias - mean
        new_bias = shifted * _scale(var, gamma, eps)
        return new_bias if beta is None else new_bias + beta

    return _kept(fold, "bias", weight, (bias, mean, var, gamma, beta, eps))


def _kept(fold: Any, what: str, owner: torch.Tensor, inputs: tuple[Any, ...]) -> torch.Tensor:
    """fold(), computed again only when a tensor in `inputs` is another one or was changed."""
    # This runs twice per folded convolution per call (ResNet-50: 106 times), so it is kept lean:
    # one tensor asked whether it is a shape-inference (meta) one, a list rather than a generator.
    if (owner.is_meta or recording_cuda_graph()
            or (torch.is_grad_enabled() and any(isinstance(t, torch.Tensor) and t.requires_grad for t in inputs))):
        # shape inference; a CUDA graph being recorded (its replays run no Python: the fold must
        # be in the graph to follow the weights); a result torch autograd differentiates
        return fold()
    state = [(id(t), t.data_ptr(), t._version) if isinstance(t, torch.Tensor) else t for t in inputs]
    kept = _FOLDED.get(owner)
    if kept is None:
        kept = _FOLDED[owner] = {}
    if what not in kept or kept[what][0] != state:
        kept[what] = (state, fold())
    return kept[what][1]


_FOLDED = PerTensor()  # weight -> {"weight"/"bias": (inputs' state, result)}
