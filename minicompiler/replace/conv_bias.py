"""A convolution's bias added by the generated kernel after it (the Triton backend).

cuDNN's convolution kernels take no bias: torch adds it afterwards with a pass of its own over
the whole output, a broadcast add, one more kernel per convolution (on the H100, ResNet-18's
eval convolutions, their batch norms folded into a bias each, spent 20 such adds, 0.14 ms, beside
0.24 ms for every generated kernel together). Handed to the graph as an add instead,

    conv2d(x, w, b)   ->   conv2d(x, w, None) + b.reshape(C, 1, 1)

the bias joins the kernel that reads the convolution next (the ReLU, a residual add), as
TorchInductor does. Its gradient becomes a sum over the batch and spatial dims in a generated
reduction. The C++ backend keeps the bias in the call: oneDNN adds it inside its convolution.
"""

from __future__ import annotations

from typing import Any

from minicompiler.ir import Graph, Node, rewrite
from minicompiler.replace.conv_bn import is_conv
from minicompiler.simplify.facts import location


def split_conv_bias(graph: Graph, log: list[str] | None = None) -> Graph:
    """A new graph where each convolution with a bias is a convolution without one, then an add."""
    def rule(new: Graph, node: Node, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if not is_conv(node) or not isinstance(args[3], Node):
            return None
        fn, x, weight, bias, *settings = args
        convolution = new.call("torch_call", fn, x, weight, None, *settings)
        per_channel = new.call("reshape", bias, (-1,) + (1,) * (weight.meta.ndim - 2))
        if log is not None:
            log.append(f"conv bias: %{node.name}'s bias added by the kernel after it{location(node)}")
        return new.call("add", convolution, per_channel)

    return rewrite(graph, rule)
