"""An eval-mode batch norm as a per-channel affine map, where the fold cannot be kept.

`fold_conv_batch_norm` folds the batch norm into the convolution's weight and bias, and keeps the
folded tensors from call to call. A CUDA graph (mode="reduce-overhead") replays no Python, so it
cannot keep them: the fold is recorded into the graph and runs again at every replay, four or so
tiny kernels per weight and per bias (160 in ResNet-18). There the batch norm is written instead
as what it is in eval mode,

    bn(y) = (y - mean) * scale + beta,     scale = gamma / sqrt(var + eps)   (per channel)

`scale` one small kernel over the channels, the rest joining the kernel after the convolution
(with the ReLU, as TorchInductor does).
"""

from __future__ import annotations

from typing import Any

from minicompiler.ir import Graph, Node, rewrite
from minicompiler.replace.conv_bn import eval_batch_norm
from minicompiler.simplify.facts import location


def batch_norm_as_affine(graph: Graph, log: list[str] | None = None) -> Graph:
    """A new graph where each eval-mode F.batch_norm is its affine map in pointwise ops."""
    def rule(new: Graph, node: Node, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not eval_batch_norm(node):
            return None
        _, x, mean, var, gamma, beta, _, _, eps = args
        per_channel = (-1,) + (1,) * (x.meta.ndim - 2)  # (C,) against (N, C, *spatial)

        def channels(value: Node) -> Node:
            return new.call("reshape", value, per_channel)

        scale = new.call("rsqrt", new.call("add", var, eps))
        if gamma is not None:
            scale = new.call("mul", scale, gamma)
        y = new.call("mul", new.call("sub", x, channels(mean)), channels(scale))
        if log is not None:
            log.append(f"batch norm: %{node.name} as (x - mean) * scale + beta{location(node)}")
        return y if beta is None else new.call("add", y, channels(beta))

    return rewrite(graph, rule)
