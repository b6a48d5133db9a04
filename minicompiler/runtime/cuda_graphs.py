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

import dataclasses
import functools
import itertools
import operator
import weakref
from collections.abc import Callable, Sequence
from typing import Any

import torch

from minicompiler.ir import flatten, map_structure

Runner = Callable[[list[torch.Tensor]], Any]
MAX_CHANGED_RECORDINGS = 4  # recordings after which only parameters are read in place

# Aliases of some graph's output memory, handed out uncopied and not yet given copies of their own:
# id -> a weak reference to it (a WeakSet would compare tensors with ==, which is elementwise; a
# WeakValueDictionary cost ~1 us an entry, and a training step lends ~130 saved tensors)
_LENT: dict[int, weakref.ref[torch.Tensor]] = {}
_IS_CUDA = operator.attrgetter("is_cuda")
# what a replay hands out at each output position (`_plan_outputs`)
INPUT, LEND, COPY, VALUE = "input", "lend", "copy", "value"


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
        self.borrowed: list[bool] = []  # read in place rather than copied in
        self.static_outputs: Any = None
        # Per replay, in Python, over every input and output (a ResNet-18 step has ~300): what is
        # worked out once per recording instead. The inputs copied in and those read in place; and,
        # per flat output, what it is handed out as (`_plan_outputs`)
        self.copied_positions: list[int] = []
        self.borrowed_positions: list[int] = []
        self.copied_layout: list[tuple] = []
        self.borrowed_addresses: list[int] = []
        self.borrowed_shapes: list[torch.Size] = []
        self.flat_outputs: list[Any] = []
        self.flat = False  # static_outputs is a tuple of tensors (and values), nothing nested
        self.plan: list[tuple[str, int]] = []
        self.recordings = 0
        # the inputs of the call before a recording (weakly: a batch need not stay alive for this)
        self.previous: list[weakref.ref[torch.Tensor]] | None = None
        self.lent: list[tuple[int, weakref.ref[torch.Tensor]]] = []  # lent by the last replay, by id

    def __call__(self, inputs: list[torch.Tensor]) -> Any:
        if not inputs or not all(map(_IS_CUDA, inputs)):
            return self.run(inputs)
        replayable = self._can_replay(inputs)
        if not replayable and self.previous is None:  # the first call: note its inputs
            self.previous = [weakref.ref(t) for t in inputs]
            return self.run(inputs)
        self._reclaim_lent()  # what follows overwrites (or, recording, frees) the lent outputs' memory
        if not replayable:
            self._record(inputs)
        for position in self.copied_positions:
            self.static_inputs[position].copy_(inputs[position])
        self.graph.replay()
        return self._outputs(inputs)

    def _can_replay(self, inputs: list[torch.Tensor]) -> bool:
        if self.graph is None or len(inputs) != len(self.static_inputs):
            return False
        if _layout([inputs[i] for i in self.copied_positions]) != self.copied_layout:
            return False
        # A borrowed input must be where the graph reads it (`param.data = ...` would move it), and
        # as large. (Its strides and dtype: the guards check a forward's inputs, parameters
        # included; a backward's borrowed inputs are the forward's lent outputs, as recorded.)
        borrowed = [inputs[i] for i in self.borrowed_positions]
        return [t.data_ptr() for t in borrowed] == self.borrowed_addresses and [
            t.shape for t in borrowed] == self.borrowed_shapes

    def _borrowable(self, inputs: list[torch.Tensor]) -> list[bool]:
        """Parameters and lent outputs; and inputs that are the same tensors as in the call before,
        unless borrowed inputs have moved too often (then each move would cost a recording)."""
        stable = self.recordings < MAX_CHANGED_RECORDINGS
        previous = [ref() for ref in self.previous] if self.previous else [None] * len(inputs)
        return [isinstance(t, torch.nn.Parameter) or (stable and (t is before or _lent(t)))
                for t, before in zip(inputs, previous, strict=True)]

    def _plan_outputs(self) -> None:
        """What each static output is handed out as: an input (a weight the backward needs is that
        input, as without a graph), lent (the last `lend_last`), copied out (`_copy_out`), or itself
        (not a tensor)."""
        position_of = {id(static): i for i, static in enumerate(self.static_inputs)}
        # a copied-in input the graph changed: its new value is in the static copy, for the caller to copy back
        for position in self.written:
            if not self.borrowed[position]:
                del position_of[id(self.static_inputs[position])]
        self.flat_outputs = list(flatten(self.static_outputs))
        self.flat = type(self.static_outputs) is tuple and not any(
            isinstance(value, (tuple, list, dict)) for value in self.static_outputs)
        first_lent = len(self.flat_outputs) - self.lend_last
        self.plan = [(VALUE, 0) if not isinstance(value, torch.Tensor)
                     else (INPUT, position_of[id(value)]) if id(value) in position_of
                     else (LEND, 0) if n >= first_lent else (COPY, 0)
                     for n, value in enumerate(self.flat_outputs)]
        # the outputs copied out, each once (an output twice among them is one copy), and where
        # each copy goes: the plan a replay follows, rather than working it out again
        copied = {id(v): v for v, (kind, _) in zip(self.flat_outputs, self.plan, strict=True) if kind is COPY}
        self.copied = list(copied.values())
        self.copy_plan = _plan_copies(self.copied)
        index = {key: i for i, key in enumerate(copied)}
        self.plan = [(kind, index[id(v)] if kind is COPY else at)
                     for v, (kind, at) in zip(self.flat_outputs, self.plan, strict=True)]

    def _outputs(self, inputs: list[torch.Tensor]) -> Any:
        """The static outputs as `_plan_outputs` says."""
        copies = _copy_out(self.copy_plan, self.copied)
        handed_out = [inputs[at] if kind is INPUT else self._lend(v) if kind is LEND
                      else copies[at] if kind is COPY else v
                      for v, (kind, at) in zip(self.flat_outputs, self.plan, strict=True)]
        if self.flat:
            return tuple(handed_out)  # the usual program
        leaves = iter(handed_out)
        return map_structure(lambda _: next(leaves), self.static_outputs)

    def _lend(self, static: torch.Tensor) -> torch.Tensor:
        # A tensor of its own over the graph's memory, tracked weakly, with a version counter of its
        # own: copying the next inputs into static inputs (which an output may view) changes nothing
        # autograd saved, as its memory is reclaimed first.
        alias = static.data
        ref = weakref.ref(alias)
        _LENT[id(alias)] = ref
        self.lent.append((id(alias), ref))
        return alias

    def _reclaim_lent(self) -> None:
        """Before this graph overwrites (or frees) its outputs: a lent alias still alive gets a copy."""
        for key, ref in self.lent:
            if (alias := ref()) is not None:
                alias.data = alias.clone()  # the same tensor object (autograd holds it) on new memory
            if _LENT.get(key) is ref:
                del _LENT[key]
        self.lent = []

    def _record(self, inputs: list[torch.Tensor]) -> None:
        self.borrowed = self._borrowable(inputs)
        self.previous = [weakref.ref(t) for t in inputs]
        # a borrowed input is held through an alias: the graph reads its memory, not that object
        self.static_inputs = [t.detach() if borrowed else t.detach().clone()
                              for t, borrowed in zip(inputs, self.borrowed, strict=True)]
        self.copied_positions = [i for i, borrowed in enumerate(self.borrowed) if not borrowed]
        self.borrowed_positions = [i for i, borrowed in enumerate(self.borrowed) if borrowed]
        self.copied_layout = _layout([self.static_inputs[i] for i in self.copied_positions])
        self.borrowed_addresses = [self.static_inputs[i].data_ptr() for i in self.borrowed_positions]
        self.borrowed_shapes = [self.static_inputs[i].shape for i in self.borrowed_positions]
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
        self._plan_outputs()
        self.recordings += 1


def _lent(tensor: torch.Tensor) -> bool:
    """Is `tensor` an alias some graph lent and has not reclaimed?"""
    ref = _LENT.get(id(tensor))
    return ref is not None and ref() is tensor


@dataclasses.dataclass(frozen=True)
class _CopyPlan:
    """Where `_copy_out` puts each copy: per block (dtype, device, elements), the tensors' positions
    and each copy's (shape, strides, offset) in it; and the positions of those cloned alone."""
    blocks: list[tuple[torch.dtype, torch.device, int, list[int], list[tuple[torch.Size, tuple[int, ...], int]]]]
    cloned: list[int]


def _plan_copies(tensors: list[torch.Tensor]) -> _CopyPlan:
    """How `_copy_out` copies each tensor, with its strides: dense ones of one dtype into one new
    block of memory, by one launch (`torch._foreach_copy_`); the rest cloned. Worked out once per
    recording: a graph's outputs keep their sizes, strides and dtypes from replay to replay."""
    groups: dict[tuple[torch.dtype, torch.device], list[int]] = {}
    cloned = []
    for position, tensor in enumerate(tensors):
        if _dense(tensor):
            groups.setdefault((tensor.dtype, tensor.device), []).append(position)
        else:
            cloned.append(position)
    blocks = []
    for (dtype, device), positions in groups.items():
        group = [tensors[p] for p in positions]
        step = max(1, 64 // group[0].element_size())  # each copy starts 64-byte aligned
        starts = list(itertools.accumulate((-(-t.numel() // step) * step for t in group), initial=0))
        places = [(t.shape, t.stride(), start) for t, start in zip(group, starts, strict=False)]
        blocks.append((dtype, device, starts[-1], positions, places))
    return _CopyPlan(blocks, cloned)


def _copy_out(plan: _CopyPlan, tensors: list[torch.Tensor]) -> list[torch.Tensor]:
    copies: list[torch.Tensor] = [None] * len(tensors)  # type: ignore[list-item]  # every one is set below
    for position in plan.cloned:
        copies[position] = tensors[position].clone()
    for dtype, device, numel, positions, places in plan.blocks:
        block = torch.empty(numel, dtype=dtype, device=device)
        views = [block.as_strided(*place) for place in places]
        torch._foreach_copy_(views, [tensors[p] for p in positions])
        for position, view in zip(positions, views, strict=True):
            copies[position] = view
    return copies


def _dense(tensor: torch.Tensor) -> bool:
    """Does the tensor fill exactly its numel() elements of memory (so a copy with its strides does)?"""
    if tensor.is_contiguous():
        return True
    return tensor.dim() == 4 and tensor.is_contiguous(memory_format=torch.channels_last)
