"""mode="reduce-overhead": replay a compiled program from a CUDA graph.

A compiled program launches several kernels, each costing some microseconds of Python and
driver work on the CPU; for small tensors that, not the GPU, sets the speed. A CUDA graph
records every launch of one call once, then replays them all with a single launch.

A replay reads its inputs from, and writes its outputs to, the memory used while recording.
Copying costs a launch too, so the runner avoids copies where it safely can:

- Inputs are *borrowed* (read where they are) when they will be found at the same address on
  the next call: parameters, which an optimizer updates in place; inputs that are the very same
  tensors as in the call before (module buffers such as BatchNorm's running statistics); and
  outputs another graph *lent* (below). A replay checks that every borrowed input is still at
  the recorded address (else it records again; after a few such changes only parameters are
  borrowed). Every other input (a new batch, the incoming gradient) is copied into a *static*
  tensor the graph reads.
- Outputs are copied out, because the next replay overwrites them: into one new block of memory
  per dtype, by one launch (a backward's ~60 gradients were ~60 clones). An output that is an
  input (a weight saved for the backward) is handed back as that input.
- A forward's saved tensors, and the new values of inputs the program changes (which the
  caller copies into those inputs at once), are *lent* instead (`lend_last`): handed out
  uncopied, as aliases of the graph's own output memory, which nothing outside minicompiler
  sees. Autograd drops saved tensors once the backward has run, which in a training loop is
  before the next forward; a lent tensor still alive when the graph is about to replay again
  (a second forward before the backward, `retain_graph=True`) is given its own copy first. So
  the usual step needs no clone of saved tensors, and the backward graph, borrowing them, no
  copy either. (Gradients cannot be lent: autograd keeps a new tensor object over a gradient's
  memory as `.grad`, which the runner could not give a copy of its own.)
- An input the program changes in place (`written`: a BatchNorm's running statistics) is
  written by the graph itself when it is borrowed, as without a graph. The warm-up runs before
  a recording would change it twice more, so it is put back after them.
"""

from __future__ import annotations

import functools
import itertools
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch

from minicompiler.ir import flatten, map_structure

Runner = Callable[[list[torch.Tensor]], Any]
MAX_CHANGED_RECORDINGS = 4  # recordings after which only parameters are read in place

# Aliases of some graph's output memory, handed out uncopied and not yet given copies of their own,
# by id (a WeakSet would compare tensors with ==, which is elementwise).
_LENT: weakref.WeakValueDictionary[int, torch.Tensor] = weakref.WeakValueDictionary()


def recording_cuda_graph() -> bool:
    """Is a CUDA graph being recorded on this stream now? Its replays run no Python, so a value a
    wrapper keeps between calls (a folded or converted weight) must then be computed in the graph."""
    return _cuda_available() and torch.cuda.is_current_stream_capturing()


@functools.cache
def _cuda_available() -> bool:
    # asked on every call of every kept fold and copy: torch's answer reads the environment each time
    return torch.cuda.is_available()


def _layout(tensors: list[torch.Tensor]) -> list[tuple]:
    return [(t.shape, t.stride(), t.dtype, t.device) for t in tensors]


class CUDAGraphRunner:
    """Wraps `run(inputs)`; on CUDA inputs it records a CUDA graph on the second call and replays it.
    A call with other shapes, or a borrowed input found elsewhere in memory, records again.
    The last `lend_last` outputs are lent rather than copied; the inputs at positions `written`
    may be changed in place by the program (see the module's docstring)."""

    def __init__(self, run: Runner, lend_last: int = 0, written: Sequence[int] = ()) -> None:
        self.run = run
        self.lend_last = lend_last
        self.written = tuple(written)
        self.graph: torch.cuda.CUDAGraph | None = None
        self.static_inputs: list[torch.Tensor] = []
        self.layout: list[tuple] = []
        self.borrowed: list[bool] = []  # read in place rather than copied in
        self.addresses: list[int] = []  # where each input was when the graph was recorded
        self.static_outputs: Any = None
        self.num_outputs = 0
        self.recordings = 0
        # the inputs of the call before a recording (weakly: a batch need not stay alive for this)
        self.previous: list[weakref.ref[torch.Tensor]] | None = None
        self.lent: list[weakref.ref[torch.Tensor]] = []  # lent by the last replay

    def __call__(self, inputs: list[torch.Tensor]) -> Any:
        if not inputs or not all(t.is_cuda for t in inputs):
            return self.run(inputs)
        replayable = self._can_replay(inputs)
        if not replayable and self.previous is None:  # the first call: note its inputs
            self.previous = [weakref.ref(t) for t in inputs]
            return self.run(inputs)
        self._reclaim_lent()  # what follows overwrites (or, recording, frees) the lent outputs' memory
        if not replayable:
            self._record(inputs)
        for static, tensor, borrowed in zip(self.static_inputs, inputs, self.borrowed, strict=True):
            if not borrowed:
                static.copy_(tensor)
        self.graph.replay()
        return self._outputs(inputs)

    def _can_replay(self, inputs: list[torch.Tensor]) -> bool:
        if self.graph is None or _layout(inputs) != self.layout:
            return False
        # a borrowed input must be where the graph reads it (`param.data = ...` would move it)
        return all(not borrowed or tensor.data_ptr() == address
                   for tensor, borrowed, address in zip(inputs, self.borrowed, self.addresses, strict=True))

    def _borrowable(self, inputs: list[torch.Tensor]) -> list[bool]:
        """Parameters and lent outputs; and inputs that are the same tensors as in the call before,
        unless borrowed inputs have moved too often (then each move would cost a recording)."""
        stable = self.recordings < MAX_CHANGED_RECORDINGS
        previous = [ref() for ref in self.previous] if self.previous else [None] * len(inputs)
        return [isinstance(t, torch.nn.Parameter) or (stable and (t is before or _LENT.get(id(t)) is t))
                for t, before in zip(inputs, previous, strict=True)]

    def _outputs(self, inputs: list[torch.Tensor]) -> Any:
        """The static outputs: copied out (`_copies`), or lent (the last `lend_last`); an output
        that is one of the inputs (a weight the backward needs) is that input, as without a graph."""
        passed_through = {id(static): tensor for static, tensor in zip(self.static_inputs, inputs, strict=True)}
        # a copied-in input the graph changed: its new value is in the static copy, for the caller to copy back
        for position in self.written:
            if not self.borrowed[position]:
                del passed_through[id(self.static_inputs[position])]
        positions = itertools.count()
        first_lent = self.num_outputs - self.lend_last
        copied: dict[int, torch.Tensor] = {}  # the outputs to copy out, by id

        def output(value: Any) -> Any:
            lend = next(positions) >= first_lent
            if not isinstance(value, torch.Tensor):
                return value
            if id(value) in passed_through:
                return passed_through[id(value)]
            if lend:
                return self._lend(value)
            copied[id(value)] = value
            return value

        handed_out = map_structure(output, self.static_outputs)
        copies = dict(zip(copied, _copies(list(copied.values())), strict=True))
        return map_structure(lambda value: copies.get(id(value), value), handed_out)

    def _lend(self, static: torch.Tensor) -> torch.Tensor:
        # A tensor of its own over the graph's memory, tracked weakly, with a version counter of its
        # own: copying the next inputs into static inputs (which an output may view) changes nothing
        # autograd saved, as its memory is reclaimed first.
        alias = static.data
        _LENT[id(alias)] = alias
        self.lent.append(weakref.ref(alias))
        return alias

    def _reclaim_lent(self) -> None:
        """Before this graph overwrites (or frees) its outputs: a lent alias still alive gets a copy."""
        for ref in self.lent:
            if (alias := ref()) is not None:
                alias.data = alias.clone()  # the same tensor object (autograd holds it) on new memory
                del _LENT[id(alias)]
        self.lent = []

    def _record(self, inputs: list[torch.Tensor]) -> None:
        self.borrowed = self._borrowable(inputs)
        self.previous = [weakref.ref(t) for t in inputs]
        # a borrowed input is held through an alias: the graph reads its memory, not that object
        self.static_inputs = [t.detach() if borrowed else t.detach().clone()
                              for t, borrowed in zip(inputs, self.borrowed, strict=True)]
        self.layout = _layout(self.static_inputs)
        self.addresses = [t.data_ptr() for t in self.static_inputs]
        if self.graph is not None:
            self.graph.reset()  # before the new recording: see the capture stream below
        # Warm up on a side stream first: the first calls build kernels and allocate, which a
        # recording must not contain. The inputs the program changes are put back after them.
        before = [self.static_inputs[position].clone() for position in self.written]
        stream = torch.cuda.Stream()
        stream.wait_stream(torch.cuda.current_stream())
        with torch.cuda.stream(stream), torch.no_grad():
            for _ in range(2):
                self.run(self.static_inputs)
            for position, value in zip(self.written, before, strict=True):
                self.static_inputs[position].copy_(value)
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
        self.num_outputs = sum(1 for _ in flatten(self.static_outputs))
        self.recordings += 1


def _copies(tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    """A copy of each tensor, with its strides. Dense ones of one dtype share one new block of
    memory and are copied by one launch (`torch._foreach_copy_`); the rest are cloned."""
    copies: dict[int, torch.Tensor] = {}
    groups: dict[tuple[torch.dtype, torch.device], list[torch.Tensor]] = {}
    for tensor in tensors:
        if _dense(tensor):
            groups.setdefault((tensor.dtype, tensor.device), []).append(tensor)
        else:
            copies[id(tensor)] = tensor.clone()
    for (dtype, device), group in groups.items():
        step = max(1, 64 // group[0].element_size())  # each copy starts 64-byte aligned
        starts = list(itertools.accumulate((-(-t.numel() // step) * step for t in group), initial=0))
        block = torch.empty(starts[-1], dtype=dtype, device=device)
        views = [block.as_strided(t.shape, t.stride(), start) for t, start in zip(group, starts, strict=False)]
        torch._foreach_copy_(views, group)
        copies.update((id(t), view) for t, view in zip(group, views, strict=True))
    return [copies[id(t)] for t in tensors]


def _dense(tensor: torch.Tensor) -> bool:
    """Does the tensor fill exactly its numel() elements of memory (so a copy with its strides does)?"""
    if tensor.is_contiguous():
        return True
    return tensor.dim() == 4 and tensor.is_contiguous(memory_format=torch.channels_last)
