"""In-place writes: a changed input's new value stored straight into the input's memory.

A graph is functional: `p.sub_(lr * g)` is captured as a new value `sub = p - lr * g`, which the
runtime copies into `p` after the call. For an optimizer step that is one extra `copy_` per
parameter and per state tensor, each a small parallel loop of its own. When the kernel computing
the new value may safely overwrite the old one as it goes, it is handed the input's memory as its
output buffer instead, and there is nothing left to copy:

    kernel_mul_sub(in_g, out_sub)      # const float* in_p = out_sub: loads and stores one buffer

That is safe only when every old element is read before its slot is overwritten, and by no one
else. Checked here (anything else keeps the copy, with the reason in the schedule):

  - the new value is a kernel's output, of the input's shape, dtype and strides, and the input is
    laid out densely (row-major, or channels-last with sizes known now);
  - the kernel is pointwise, so the old value is read only at the index being written (a
    reduction reads a whole row; every node of a pointwise kernel has the kernel's shape, so no
    broadcast reads one element into many); or, in a reduction kernel, the new value is one per
    row and the old one is read only by such row values (a batch norm's running statistics);
  - inside the kernel the old value is loaded before the new one is stored: its first reader is
    no later than the new value's node (the body loads a buffer once and reuses the load);
  - no view or extern made from the input's memory is read by that kernel, and no step after it
    reads the input or such a view (they would see new values where they expect old ones).

Other inputs cannot overlap the changed one: capture guards that (`separate_memory_guard`).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping

from minicompiler.fuse.schedule import Buffer, ExternCall, Kernel, Step
from minicompiler.ir.graph import Node
from minicompiler.layout import is_channels_last


def plan_in_place(steps: list[Step], buffers: dict[Node, Buffer], written_back: Mapping[Node, Node]) -> list[str]:
    """`written_back` maps a new value to the input it is copied into. Each new value that may be
    computed in place becomes a buffer `into` that input (kernel inputs and outputs updated); one
    note per new value says what was decided."""
    notes, taken = [], set()
    for value, target in written_back.items():
        reason = _why_not_in_place(steps, buffers, value, target) if target not in taken else "input written twice"
        if reason is not None:
            notes.append(f"{target.name}: copied from {value.name} after the call ({reason})")
            continue
        taken.add(target)
        kernel = next(s for s in steps if isinstance(s, Kernel) and value in s.nodes)
        buffers[value] = dataclasses.replace(buffers[value], into=target)
        kernel.outputs = [buffers[b.node] for b in kernel.outputs]
        kernel.inputs = [b for b in kernel.inputs if b.node is not target]  # reached through the output
        notes.append(f"{target.name}: written in place by {kernel.name} (its new value {value.name})")
    return notes


def _why_not_in_place(steps: list[Step], buffers: dict[Node, Buffer], value: Node, target: Node) -> str | None:
    buffer = buffers.get(value)
    if buffer is None or buffer.origin != "kernel":
        return "the new value is not computed by a kernel"
    if buffer.into is not None or buffer.copy_of is not None:
        return "the new value is a scatter's, written into its base's memory or a copy of it"
    if (reason := _layout_mismatch(value, target)) is not None:
        return reason
    position = next(i for i, s in enumerate(steps) if isinstance(s, Kernel) and value in s.nodes)
    kernel = steps[position]
    if kernel.kind != "pointwise" and not _row_local(kernel, value, target):
        return f"{kernel.name} is a reduction: it reads the old value across a row"
    readers = [i for i, node in enumerate(kernel.nodes) if target in node.inputs()]
    if readers and readers[0] > kernel.nodes.index(value):
        return f"{kernel.name} reads the old value after storing the new one"
    memory = _views_of(steps, target)
    if any(b.node in memory - {target} for b in kernel.inputs):
        return f"{kernel.name} reads a view of the input"
    for later in steps[position + 1 :]:
        if any(i in memory for n in _nodes(later) for i in n.inputs()):
            return f"{_name(later)} reads the old value afterwards"
    return None


def _row_local(kernel: Kernel, value: Node, target: Node) -> bool:
    """In a reduction kernel: is the new value one per row, and the old one read only by values
    one per row of the same shape? Each row's old element is then read and overwritten by the
    program that owns the row, and by no other (a batch norm's running statistics, updated after
    its sums)."""
    shape = value.meta.shape
    readers = [n for n in kernel.nodes if target in n.inputs()]
    return kernel.is_row_value(value) and target.meta.shape == shape and all(
        kernel.is_row_value(n) and n.meta.shape == shape for n in readers)


def _layout_mismatch(value: Node, target: Node) -> str | None:
    new, old = value.meta, target.meta
    if (new.shape, new.dtype, new.stride()) != (old.shape, old.dtype, old.stride()):
        return "the new value is laid out differently"
    dense = old.is_contiguous() or (is_channels_last(target) and all(isinstance(s, int) for s in old.shape))
    return None if dense else "the input is not laid out densely (a strided view)"


def _views_of(steps: list[Step], target: Node) -> set[Node]:
    """The input and every alias or extern result that may share its memory (`.contiguous()`
    of a contiguous tensor is the tensor itself)."""
    memory = {target}
    for step in steps:
        if not isinstance(step, Kernel) and any(i in memory for i in step.node.inputs()):
            memory.add(step.node)
    return memory


def _nodes(step: Step) -> list[Node]:
    return step.nodes if isinstance(step, Kernel) else [step.node]


def _name(step: Step) -> str:
    if isinstance(step, Kernel):
        return step.name
    return f"extern {step.node.name}" if isinstance(step, ExternCall) else f"view {step.node.name}"
