"""mode="reduce-overhead": replay a compiled program from a CUDA graph.

A compiled program launches several kernels, each costing some microseconds of Python and
driver work on the CPU; for small tensors that, not the GPU, sets the speed. A CUDA graph
records every launch of one call once, then replays them all with a single launch.

A replay reads its inputs from, and writes its outputs to, the memory used while recording.
An input that is the very same tensor as in the call before is read where it is ("borrowed"):
parameters, which an optimizer updates in place, and module buffers such as BatchNorm's
running statistics. The first call runs without a graph and notes its inputs; the second
records, borrowing the inputs it finds again; a replay checks that borrowed inputs are still
the same tensors (else it records again; after a few such changes only parameters are
borrowed). Every other input (a new batch, the tensors a forward saved for its backward) is
copied into a *static* tensor. Outputs are cloned out, because the next replay overwrites
them (an output that is an input, such as a weight saved for the backward, is handed back as
that input).
"""

from __future__ import annotations

import weakref
from collections.abc import Callable
from typing import Any

import torch

from minicompiler.ir import map_structure

Runner = Callable[[list[torch.Tensor]], Any]
MAX_CHANGED_RECORDINGS = 4  # recordings after which only parameters are read in place


def _layout(tensors: list[torch.Tensor]) -> list[tuple]:
    return [(t.shape, t.stride(), t.dtype, t.device) for t in tensors]


class CUDAGraphRunner:
    """Wraps `run(inputs)`; on CUDA inputs it records a CUDA graph on the second call and replays it.
    A call with other shapes or another tensor in place of a borrowed input records again."""

    def __init__(self, run: Runner) -> None:
        self.run = run
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static_inputs: list[torch.Tensor] = []
        self.borrowed: list[bool] = []  # read in place rather than copied in
        self.addresses: list[int] = []  # where each static input was when the graph was recorded
        self.static_outputs: Any = None
        self.recordings = 0
        # the inputs of the call before a recording (weakly: a batch need not stay alive for this)
        self.previous: list[weakref.ref[torch.Tensor]] | None = None

    def __call__(self, inputs: list[torch.Tensor]) -> Any:
        if not inputs or not all(t.is_cuda for t in inputs):
            return self.run(inputs)
        if not self._can_replay(inputs):
            if self.previous is None:  # the first call: note its inputs
                self.previous = [weakref.ref(t) for t in inputs]
                return self.run(inputs)
            self._record(inputs)
        for static, tensor, borrowed in zip(self.static_inputs, inputs, self.borrowed, strict=True):
            if not borrowed:
                static.copy_(tensor)
        self.graph.replay()
        passed_through = {id(static): tensor for static, tensor in zip(self.static_inputs, inputs, strict=True)}
        return map_structure(lambda v: self._output(v, passed_through), self.static_outputs)

    def _can_replay(self, inputs: list[torch.Tensor]) -> bool:
        if self.graph is None or _layout(inputs) != _layout(self.static_inputs):
            return False
        # the same tensor, and still over the same memory (`param.data = ...` would move it)
        return all(not borrowed or (static is tensor and tensor.data_ptr() == address)
                   for static, tensor, borrowed, address
                   in zip(self.static_inputs, inputs, self.borrowed, self.addresses, strict=True))

    def _borrowable(self, inputs: list[torch.Tensor]) -> list[bool]:
        """Parameters; and inputs that are the same tensors as in the call before, unless borrowed
        inputs have changed too often (then each change would cost a recording)."""
        stable = self.recordings < MAX_CHANGED_RECORDINGS
        previous = [ref() for ref in self.previous] if self.previous else [None] * len(inputs)
        return [isinstance(t, torch.nn.Parameter) or (stable and t is before)
                for t, before in zip(inputs, previous, strict=True)]

    @staticmethod
    def _output(value: Any, passed_through: dict[int, torch.Tensor]) -> Any:
        """A static output, cloned before the next replay overwrites it; an output that is one of
        the inputs (a weight the backward needs) is that input, as without a graph."""
        if not isinstance(value, torch.Tensor):
            return value
        return passed_through.get(id(value)) if id(value) in passed_through else value.clone()

    def _record(self, inputs: list[torch.Tensor]) -> None:
        self.borrowed = self._borrowable(inputs)
        self.previous = [weakref.ref(t) for t in inputs]
        self.static_inputs = [t if borrowed else t.detach().clone()
                              for t, borrowed in zip(inputs, self.borrowed, strict=True)]
        self.addresses = [t.data_ptr() for t in self.static_inputs]
        if self.graph is not None:
            self.graph.reset()  # before the new recording: see the capture stream below
        # Warm up on a side stream first: the first calls build kernels and allocate, which a
        # recording must not contain.
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), torch.no_grad():
            for _ in range(2):
                self.run(self.static_inputs)
        torch.cuda.current_stream().wait_stream(stream)
        self.graph = torch.cuda.CUDAGraph()
        # Record on a stream of its own. cuBLAS keeps a workspace per stream, which a recorded
        # matmul uses by address; on a stream shared with other graphs (PyTorch's default capture
        # stream), destroying any one of them frees that workspace under the others, which then
        # fault on replay (pytorch/pytorch#193402; torch.compile's CUDA graphs do destroy theirs).
        # A fresh stream's workspace is allocated during this capture, in this graph's own memory.
        capture_stream = torch.cuda.Stream()
        with torch.cuda.graph(self.graph, stream=capture_stream), torch.no_grad():
            self.static_outputs = self.run(self.static_inputs)
        self.recordings += 1
