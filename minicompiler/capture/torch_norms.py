"""ATen's normalisations that also return their statistics: native_layer_norm, native_group_norm,
native_batch_norm, _native_batch_norm_legit and _batch_norm_with_update.

Each returns the normalised tensor and the mean and 1 / sqrt(var + eps) ("rstd", "invstd") it
used, which the backward of torch's kernel reads. Here all three are written with the `mean`,
`var` and pointwise ops the F.* lowerings use (torch_ops.py): the statistics the normalisation
computes anyway are simply returned too. As in eager:

- shapes: layer_norm's statistics keep the normalised dims as size 1, (N, ..., 1, 1); group_norm's
  are (N, groups); batch_norm's are (C,) in training and empty, (0,), in eval mode;
- gradients: layer_norm's and batch_norm's statistics are outputs no gradient flows back through
  (detached), group_norm's are differentiable;
- training-mode batch_norm updates the running statistics in place (an `Updates`);
- float16 / bfloat16 layer and group norms compute in float32, as torch's kernels do.

torch itself first runs each op on data-less copies of the inputs (`meta.fake()`): that checks
the arguments, so a call eager rejects is a graph break where eager raises its own error.
"""

from __future__ import annotations

from typing import Any

import torch

from minicompiler.capture.errors import Unsupported
from minicompiler.capture.torch_ops import Updates, _per_channel_affine, batch_norm_training, lowers
from minicompiler.ir import Graph, Node

LOW_PRECISION = (torch.float16, torch.bfloat16)


def _fake(value: Any) -> Any:
    return value.meta.fake() if isinstance(value, Node) else value


def _as(g: Graph, x: Node, dtype: torch.dtype) -> Node:
    return x if x.meta.dtype == dtype else g.call("convert", x, dtype)


def standardize(g: Graph, x: Node, dims: tuple[int, ...], eps: float) -> tuple[Node, Node, Node]:
    """(x - mean) * rstd over `dims`, with rstd = 1 / sqrt(var + eps) and the biased variance;
    returns it with mean and rstd (their `dims` kept, as size 1, so they broadcast against x)."""
    mean = g.call("mean", x, dims, True)
    rstd = g.call("rsqrt", g.call("add", g.call("var", x, dims, 0, True), eps))
    return g.call("mul", g.call("sub", x, mean), rstd), mean, rstd


@lowers(torch.native_layer_norm)
def native_layer_norm(g: Graph, x: Node, normalized_shape: Any, weight: Node | None, bias: Node | None,
                      eps: float) -> tuple[Node, Node, Node]:
    torch.native_layer_norm(x.meta.fake(), normalized_shape, _fake(weight), _fake(bias), eps)  # eager's checks
    dims = tuple(range(x.meta.ndim - len(normalized_shape), x.meta.ndim))  # the last len(normalized_shape)
    dtype = x.meta.dtype
    y, mean, rstd = standardize(g, _as(g, x, torch.float32) if dtype in LOW_PRECISION else x, dims, eps)
    if weight is not None:
        y = g.call("mul", y, weight)
    if bias is not None:
        y = g.call("add", y, bias)
    return _as(g, y, dtype), g.call("detach", _as(g, mean, dtype)), g.call("detach", _as(g, rstd, dtype))


@lowers(torch.native_group_norm)
def native_group_norm(g: Graph, x: Node, weight: Node | None, bias: Node | None, N: int, C: int, HxW: int,
                      group: int, eps: float) -> tuple[Node, Node, Node]:
    # each sample's channels in `group` groups; each group standardized over its channels and
    # positions: x seen as (N, group, C // group * HxW), standardized over its last dim
    torch.native_group_norm(x.meta.fake(), _fake(weight), _fake(bias), N, C, HxW, group, eps)  # eager's checks
    dtype = x.meta.dtype
    work = _as(g, x, torch.float32) if dtype in LOW_PRECISION else x
    groups = g.call("reshape", work, (N, group, C // group * HxW))
    y, mean, rstd = standardize(g, groups, (2,), eps)
    y = _per_channel_affine(g, g.call("reshape", y, x.meta.shape), weight, bias)
    return tuple(_as(g, t, dtype) for t in (y, g.call("reshape", mean, (N, group)),
                                            g.call("reshape", rstd, (N, group))))


@lowers(torch.native_batch_norm)
def native_batch_norm(g: Graph, x: Node, weight: Node | None, bias: Node | None, running_mean: Node | None,
                      running_var: Node | None, training: bool, momentum: float, eps: float) -> Any:
    """Training: F.batch_norm's lowering, with the batch's mean and invstd (C,). Eval: normalised
    with the running statistics, and both statistics returned empty."""
    fakes = [_fake(v) for v in (x, weight, bias, running_mean, running_var)]
    torch.native_batch_norm(*fakes, training, momentum, eps)  # eager's checks
    if training:
        updates, mean, var = batch_norm_training(g, x, running_mean, running_var, weight, bias, momentum, eps)
        invstd = g.call("rsqrt", g.call("add", var, eps))
        return Updates((updates.result, mean, invstd), updates.new_values)
    if running_mean is None or running_var is None:
        raise Unsupported("batch_norm in eval mode without running statistics")
    per_channel = (1, x.meta.shape[1]) + (1,) * (x.meta.ndim - 2)  # (C,) -> broadcastable against x
    invstd = g.call("rsqrt", g.call("add", g.call("reshape", running_var, per_channel), eps))
    y = g.call("mul", g.call("sub", x, g.call("reshape", running_mean, per_channel)), invstd)
    y = _per_channel_affine(g, y, weight, bias)
    return y, _empty(g, x.meta.dtype, x), _empty(g, x.meta.dtype, x)


def _empty(g: Graph, dtype: torch.dtype, like: Node) -> Node:
    """A tensor of shape (0,): eager's placeholder for a statistic it did not compute."""
    return g.call("full", (0,), 0, dtype, device=like.meta.device)


@lowers(torch._native_batch_norm_legit)
def native_batch_norm_legit(g: Graph, x: Node, weight: Node | None, bias: Node | None, *rest: Any) -> Any:
    """native_batch_norm (ATen's newer spelling), with running statistics, or without them
    (`_native_batch_norm_legit(x, weight, bias, training, momentum, eps)`)."""
    if len(rest) == 3:
        rest = (None, None, *rest)
    return native_batch_norm(g, x, weight, bias, *rest)


# capture reads an op's Python __call__ (torch.ops.aten.X and its overload X.default), which
# calls its `_op`: that builtin is what the table holds
@lowers(torch.ops.aten._batch_norm_with_update._op, torch.ops.aten._batch_norm_with_update.default._op)
def batch_norm_with_update(g: Graph, x: Node, weight: Node | None, bias: Node | None, running_mean: Node,
                           running_var: Node, momentum: float, eps: float) -> Updates:
    """Training-mode native_batch_norm, plus an empty uint8 "reserve" (cuDNN's workspace on GPUs)."""
    result = native_batch_norm(g, x, weight, bias, running_mean, running_var, True, momentum, eps)
    reserve = _empty(g, torch.uint8, x)
    return Updates((*result.result, reserve), result.new_values)

