"""Values a wrapper makes from its parameters alone, kept from one call to the next.

In eval mode a convolution's weight and bias have its batch norm folded into them
(replace/conv_bn.py), and on a GPU its weight is read channels-last (layout.py): values that
depend on the parameters and running statistics only, not on the call's input. TorchInductor
computes them once at compile time when asked to freeze the parameters, and then cannot see a
parameter change. Here they are made again exactly when one of the tensors they read has changed,
which every call has to ask. Asked per value (ResNet-50: 159 of them, two to six tensors each),
that was a dictionary lookup and a list of (identity, memory, version) per value, ~5 us each on the
H100's host; the wrapper's prologue instead makes them all in one generated function,

    def kept_values(conv1_weight, bn1_running_mean, bn1_running_var, ...):
        conv1_weight = channels_last_copy(conv1_weight)
        torch_call = const_0(conv1_weight, bn1_running_var, bn1_weight, 1e-05)  # folded_weight
        ...
        return conv1_weight, torch_call, ...

and asks once per call, `kept(kept_values, conv1_weight, ...)`, whether any of the tensors it reads
is another tensor or has another memory or version counter than the last time: three passes of
C-level `map` over the tensors. The tensors of the last call are held, so their ids cannot be
taken by new tensors while they are compared with.

The values are made afresh, and not kept, where keeping them would be wrong: while a CUDA graph is
recorded (its replays run no Python, so the values must be made inside the graph), and where torch
autograd will differentiate them (grad mode on and a tensor requiring grad).
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Sequence
from typing import Any

import torch

from minicompiler.runtime.cuda_graphs import recording_cuda_graph

DATA_PTR = torch.Tensor.data_ptr
VERSION = operator.attrgetter("_version")
REQUIRES_GRAD = operator.attrgetter("requires_grad")


class KeptValues:
    """`kept(make, *tensors)`: make(*tensors), made again only when a tensor changed."""

    def __init__(self) -> None:
        self.tensors: Sequence[torch.Tensor] = ()  # held: their ids stay theirs while compared with
        self.state: tuple[int, ...] = ()
        self.values: Any = None

    def __call__(self, make: Callable[..., Any], *tensors: torch.Tensor) -> Any:
        if recording_cuda_graph() or (torch.is_grad_enabled() and any(map(REQUIRES_GRAD, tensors))):
            return make(*tensors)
        state = (*map(id, tensors), *map(DATA_PTR, tensors), *map(VERSION, tensors))
        if state != self.state:
            self.values = make(*tensors)
            self.tensors, self.state = tensors, state
        return self.values
