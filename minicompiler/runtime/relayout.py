"""What a generated wrapper calls to give a tensor the layout its compiled code expects, at run
time: the decisions are layout.py's, made while compiling; these carry them out on each call."""

from __future__ import annotations

from collections.abc import Callable

import torch

from minicompiler.runtime.cuda_graphs import recording_cuda_graph
from minicompiler.runtime.per_tensor import PerTensor

CHANNELS_LAST = torch.channels_last


def channels_last_copy(tensor: torch.Tensor) -> torch.Tensor:
    """`tensor` channels-last: itself if it is, else a copy kept (weakly, per tensor) and made
    again only when the tensor changes (its memory or version counter: an optimizer step)."""
    if tensor.is_contiguous(memory_format=CHANNELS_LAST):
        return tensor
    if recording_cuda_graph():  # a CUDA graph's replays run no Python: copy in it
        return tensor.detach().contiguous(memory_format=CHANNELS_LAST)
    state = (tensor.data_ptr(), tensor._version)
    kept = _COPIES.get(tensor)
    if kept is None or kept[0] != state:
        kept = _COPIES[tensor] = (state, tensor.detach().contiguous(memory_format=CHANNELS_LAST))
    return kept[1]


_COPIES = PerTensor()  # tensor -> (its data_ptr and version, its copy)


def laid_out(tensor: torch.Tensor, strides: tuple[int, ...]) -> torch.Tensor:
    """`tensor` with these strides (an extern's result as torch usually lays it out, ir/extern_layouts.py):
    itself where it has them (a dim of size 1 may have any), else a copy laid out so."""
    if all(have == want or size == 1 for have, want, size in zip(tensor.stride(), strides, tensor.shape, strict=True)):
        return tensor
    copy = torch.empty_strided(tensor.shape, strides, dtype=tensor.dtype, device=tensor.device)
    return copy.copy_(tensor)


def reinterpret_tensor(tensor: torch.Tensor, size: tuple[int, ...], stride: tuple[int, ...],
                       offset: int) -> torch.Tensor:
    """A view of `tensor`'s memory with these sizes and strides, starting `offset` elements after
    `tensor` starts. Made the cheap way where nothing records it: the tensor TorchInductor's
    wrappers make, sharing the memory without a trip through torch's dispatcher (half the cost of
    a view op). Where autograd could be recording the call (a tensor that requires grad, grad
    mode on), it is torch's own `as_strided`, which autograd sees through."""
    if tensor.requires_grad and torch.is_grad_enabled() or _REINTERPRET is None:
        return torch.as_strided(tensor, size, stride, tensor.storage_offset() + offset)
    return _REINTERPRET(tensor, size, stride, offset)


def _cheap_reinterpret() -> Callable[..., torch.Tensor] | None:
    """torch's private `_reinterpret_tensor`, if this torch has it and it counts the offset from
    the tensor's own start (checked, not assumed: it is not a public API)."""
    function = getattr(getattr(torch._C, "_dynamo", None), "guards", None)
    function = getattr(function, "_reinterpret_tensor", None)
    if function is None:
        return None
    probe = torch.arange(4.0)[1:]
    view = function(probe, (1,), (1,), 1)
    return function if view.storage_offset() == 2 and view.item() == 2.0 else None


_REINTERPRET = _cheap_reinterpret()
