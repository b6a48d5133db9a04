"""What `fuse` produces: a `Schedule`, the graph's work as an ordered list of steps.

A step is one of:
  Kernel      a group of pointwise/reduction nodes that codegen turns into ONE generated loop nest
  ExternCall  a node torch runs whole (matmul, cat, an unknown torch function, ...)
  Alias       a view (reshape/permute/expand/slice) of a buffer: no work, a new shape over the
              same memory, which kernels then read through its strides

`Buffer`s are the values that live in memory at run time: the graph's inputs, what externs
and aliases produce, and the kernel values that someone outside their kernel needs. Every
other value exists only inside a kernel's loop, in a register.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Literal

import torch

from minicompiler.ir.graph import Graph, Node
from minicompiler.ir.ops import OPS
from minicompiler.ir.symbolic import size_code

KernelKind = Literal["pointwise", "reduction"]
BufferOrigin = Literal["input", "kernel", "extern", "alias"]


def format_shape(shape: tuple[int, ...]) -> str:
    return f"[{', '.join(map(size_code, shape))}]"  # symbolic sizes as `s0`


@dataclass(frozen=True)
class Buffer:
    """A node's value held in memory. `reasons` say why a kernel value had to be stored."""

    node: Node
    origin: BufferOrigin
    reasons: tuple[str, ...] = ()
    into: Node | None = None  # a changed input whose memory the kernel stores this new value in (in_place.py)
    copy_of: Node | None = None  # a scatter's base, copied by the wrapper as the buffer's first value (buffers.py)

    @property
    def name(self) -> str:
        return self.node.name

    @property
    def shape(self) -> tuple[int, ...]:
        return self.node.meta.shape

    @property
    def dtype(self) -> torch.dtype:
        return self.node.meta.dtype

    @property
    def strides(self) -> tuple[int, ...]:
        return self.node.meta.stride()

    def __str__(self) -> str:
        reasons = self.reasons + ((f"written in place into {self.into.name}",) if self.into is not None else ())
        reasons += (f"starts as a copy of {self.copy_of.name}",) if self.copy_of is not None else ()
        why = f"  ({'; '.join(reasons)})" if reasons else ""
        return f"{self.name}: {self.node.meta} {self.origin}{why}"


def writes_into(node: Node, value: Node) -> bool:
    """Is `value` the base whose memory scatter `node` writes into (not a value it reads)?"""
    return OPS[node.op].kind == "scatter" and value is node.args[0] and value not in node.args[1:]


@dataclass(eq=False)
class Kernel:
    """Nodes computed by one generated loop nest over the iteration space `domain`.

    Pointwise kernel: every node has shape `domain`; one flat loop over its elements.
    Reduction kernel: the reductions fold `reduction_dims` of `domain`. Nodes of shape
    `domain` are *element* values (computed inside a loop over the reduced dims); the
    reductions and the pointwise nodes over the reduced shape are *row* values (one per
    row, a row being one point of the kept dims).
    """

    name: str
    kind: KernelKind
    domain: tuple[int, ...]
    reduction_dims: tuple[int, ...]
    nodes: list[Node]
    inputs: list[Buffer] = field(default_factory=list)  # buffers read, in first-use order
    outputs: list[Buffer] = field(default_factory=list)  # kernel values stored to memory

    def is_row_value(self, node: Node) -> bool:
        return OPS[node.op].kind == "reduction" or node.meta.shape != self.domain

    @property
    def kept_dims(self) -> tuple[int, ...]:
        return tuple(d for d in range(len(self.domain)) if d not in self.reduction_dims)

    @property
    def keepdim_shape(self) -> tuple[int, ...]:
        """The reduced shape with the folded dims kept as size 1 (what keepdim=True gives)."""
        return tuple(1 if d in self.reduction_dims else s for d, s in enumerate(self.domain))

    @property
    def reduced_shape(self) -> tuple[int, ...]:
        """The reduced shape with the folded dims dropped (what keepdim=False gives)."""
        return tuple(self.domain[d] for d in self.kept_dims)

    @property
    def loop_order(self) -> tuple[int, ...]:
        """The domain's dims from the slowest-moving to the fastest, in the order a pointwise
        kernel walks them: its first output's memory order. Neighbouring threads (or SIMD lanes)
        then store, and read from buffers laid out alike, neighbouring addresses: a channels-last
        ReLU walked in (N, C, H, W) order touches addresses C elements apart, uncoalesced (~8x
        slower on an H100). Row-major dims, reductions, and outputs with gaps or broadcasts walk
        the dims in order."""
        order = tuple(range(len(self.domain)))
        # (a scatter's output has its base's shape: the kernel walks the values, not it)
        first = next((b for b in self.outputs if b.shape == self.domain), None)
        if self.kind != "pointwise" or first is None:
            return order
        return _memory_order(self.domain, first.strides) or order

    @property
    def outer_reduction(self) -> bool:
        """A reduction whose rows lie side by side in memory and whose reduced elements do not:
        the sums over (N, H, W) of a channels-last batch norm input, say. Its blocks are best
        many rows wide and few columns long (codegen/triton.py), the rows walked in `row_order`."""
        strides = self._element_strides()
        if self.kind != "reduction" or strides is None:
            return False
        kept = [strides[d] for d in self.kept_dims if self.domain[d] != 1]
        reduced = [strides[d] for d in self.reduction_dims if self.domain[d] != 1]
        return 1 in kept and 1 not in reduced

    @property
    def row_order(self) -> tuple[int, ...]:
        """A reduction kernel's kept dims (as positions in `kept_dims`) from the slowest-moving
        row to the fastest. For an outer reduction the memory order of what it reads:
        neighbouring rows then read neighbouring addresses, and a block of rows loads coalesced
        (per-(n, h, c) partial sums of a channels-last tensor walked in (n, c, h) order would read
        addresses C apart). Otherwise the memory order of what it stores, and row-major where
        that is row-major or not dense."""
        order = tuple(range(len(self.kept_dims)))
        if self.outer_reduction:
            strides = self._element_strides()
            assert strides is not None
            return tuple(sorted(order, key=lambda i: -strides[self.kept_dims[i]]))
        # else the memory order of what it stores, where that is not row-major: a channels-last
        # max pool then walks its windows channel by channel, reading and writing neighbouring
        # addresses (the argmax a training pool keeps is laid out alike: layout.py)
        if not all(isinstance(n, int) for n in self.domain):  # comparing symbolic sizes would guard them
            return order
        for buffer in self.outputs:
            if buffer.shape not in (self.reduced_shape, self.keepdim_shape):
                continue
            strides = buffer.strides if buffer.shape == self.reduced_shape else tuple(
                buffer.strides[d] for d in self.kept_dims)
            if (walk := _memory_order(self.reduced_shape, strides)) not in (None, order):
                return walk
        return order

    def _element_strides(self) -> tuple[int, ...] | None:
        """The strides of the first tensor the kernel reads element by element (shape: the domain;
        not one broadcast along some dim, as a per-channel value expanded is), if known now."""
        # sizes known now only: comparing a symbolic size would add a guard on it (s0 != 64)
        if not all(isinstance(n, int) for n in self.domain):
            return None
        for read in self.inputs:
            if not all(isinstance(n, int) for n in read.shape) or read.shape != self.domain:
                continue
            strides = read.strides
            if all(isinstance(n, int) for n in strides) and all(
                    stride != 0 or size == 1 for size, stride in zip(self.domain, strides, strict=True)):
                return strides
        return None

    def __str__(self) -> str:
        over = format_shape(self.domain)
        if self.kind == "reduction":
            over += f" reducing dims {self.reduction_dims}"
        stores = ", ".join(b.name for b in self.outputs) or "nothing"
        return f"{self.name}: {self.kind} over {over}: {', '.join(n.name for n in self.nodes)} -> {stores}"


def _memory_order(shape: tuple[Any, ...], strides: tuple[Any, ...]) -> tuple[int, ...] | None:
    """The dims of a dense layout from the slowest-moving to the fastest; None for a layout with
    gaps or broadcasts, or sizes not known now."""
    if not all(isinstance(n, int) for n in (*strides, *shape)):
        return None
    walk = tuple(sorted(range(len(shape)), key=lambda d: -strides[d]))
    expected = 1
    for d in reversed(walk):  # dense: each stride the product of the sizes inside it
        if shape[d] != 1 and strides[d] != expected:
            return None
        expected *= shape[d]
    return walk


@dataclass(frozen=True)
class ExternCall:
    """A node torch runs as a whole; its output is a buffer."""

    node: Node
    reason: str

    def __str__(self) -> str:
        inputs = ", ".join(i.name for i in self.node.inputs())
        return f"extern {self.node.name} = {self.node.op}({inputs})  ({self.reason})"


@dataclass(frozen=True)
class Alias:
    """A view of a buffer, made in the wrapper with torch's own view op (zero copy)."""

    node: Node

    def __str__(self) -> str:
        source = self.node.args[0]
        return f"alias {self.node.name} = {self.node.op}({source.name})"


Step = Kernel | ExternCall | Alias


@dataclass(frozen=True)
class FusionDecision:
    """Whether `consumer` was put in the same kernel as `producer`, and why (or why not)."""

    producer: Node
    consumer: Node
    fused: bool
    reason: str

    def __str__(self) -> str:
        verdict = "fused" if self.fused else "not fused"
        return f"{self.producer.name} -> {self.consumer.name}: {verdict}: {self.reason}"


@dataclass
class Schedule:
    graph: Graph
    steps: list[Step]
    buffers: dict[Node, Buffer]
    decisions: list[FusionDecision]
    written_back: list[str] = field(default_factory=list)  # per changed input: in place, or copied and why

    @property
    def kernels(self) -> list[Kernel]:
        return [s for s in self.steps if isinstance(s, Kernel)]

    @property
    def refusals(self) -> list[FusionDecision]:
        return [d for d in self.decisions if not d.fused]

    def __str__(self) -> str:
        lines = ["steps:"] + [f"  {step}" for step in self.steps]
        lines += ["buffers:"] + [f"  {b}" for b in self.buffers.values()]
        lines += ["decisions:"] + [f"  {d}" for d in self.decisions]
        if self.written_back:
            lines += ["changed inputs:"] + [f"  {note}" for note in self.written_back]
        return "\n".join(lines)
