"""Turn the fuse and codegen stages' results into the report's plain records.

The report holds only strings and numbers (so it serializes to JSON and renders without a
kernel); this module is where a `Schedule` and a `CompiledModule` become `FusionInfo` and
`KernelInfo` rows, and where each graph node gets the user line it came from.
"""

from __future__ import annotations

from minicompiler.codegen import CompiledModule
from minicompiler.codegen.body import in_place_params, plan_sweeps
from minicompiler.fuse import Alias, Buffer, ExternCall, Kernel, Schedule
from minicompiler.ir import Graph
from minicompiler.ir.symbolic import size_hint
from minicompiler.report import FusionInfo, KernelInfo


def node_lines(graph: Graph) -> dict[str, int]:
    """Graph node name -> the line of user code that made it (for the linked views)."""
    return {n.name: n.source.lineno for n in graph.nodes if n.source is not None}


def describe_schedule(schedule: Schedule) -> str:
    return str(schedule)


def describe_fusion(schedule: Schedule) -> list[FusionInfo]:
    return [FusionInfo(d.producer.name, d.consumer.name, d.fused, d.reason) for d in schedule.decisions]


def _nbytes(buffer: Buffer) -> int:
    return size_hint(buffer.node.meta.numel) * buffer.dtype.itemsize  # symbolic: for the compiled call's sizes


def _read_once(kernel: Kernel) -> int:
    """Bytes of every buffer a pointwise kernel reads, once each: its inputs and the changed
    inputs it overwrites in place (reached through their outputs, fuse/in_place.py)."""
    return sum(_nbytes(b) for b in kernel.inputs) + sum(
        size_hint(node.meta.numel) * node.meta.dtype.itemsize for _, _, node in in_place_params(kernel))


def _bytes_moved(kernel: Kernel) -> int:
    """What the generated loops load and store. A pointwise kernel reads each input once; a
    reduction kernel re-reads an element-level input in every sweep over the row that needs it."""
    stores = sum(_nbytes(b) for b in kernel.outputs)
    if kernel.kind == "pointwise":
        return stores + _read_once(kernel)
    _, sweeps = plan_sweeps(kernel, {b.node for b in kernel.outputs})
    reads = 0
    for buffer in kernel.inputs:
        readers = [n for n in kernel.nodes if buffer.node in n.inputs()]
        element_reads = sum(any(n in sweep.nodes for n in readers) for sweep in sweeps)
        reads += _nbytes(buffer) * max(1, element_reads)
    return stores + reads


def _source_lines(nodes: list) -> list[str]:
    """'file:line  text' of the user code these nodes compute, once each, in order."""
    seen = dict.fromkeys(f"{n.source}  {n.source.line}" for n in nodes if n.source is not None)
    return list(seen)


def describe_kernels(schedule: Schedule, module: CompiledModule) -> list[KernelInfo]:
    """One row per step that does work at run time: generated kernels and extern calls."""
    language = "cpp" if module.backend == "cpp" else "python"
    rows = []
    for step in schedule.steps:
        if isinstance(step, Kernel):
            minimum = sum(_nbytes(b) for b in step.outputs) + (
                _read_once(step) if step.kind == "pointwise" else sum(_nbytes(b) for b in step.inputs))
            rows.append(KernelInfo(
                name=step.name, kind=step.kind, nodes=[n.name for n in step.nodes],
                source_lines=_source_lines(step.nodes), code=module.kernel_sources[step.name],
                language=language, bytes_moved=_bytes_moved(step), bytes_minimum=minimum,
            ))
        elif isinstance(step, ExternCall):
            # a bounds check of indices a user gave (gather, embedding) is no work of the op's own
            kind = "check" if step.node.op == "check_indices" else "extern"
            rows.append(KernelInfo(
                name=step.node.name, kind=kind, nodes=[step.node.name],
                source_lines=_source_lines([step.node]), code=str(step), language="text",
            ))
        elif isinstance(step, Alias):
            rows.append(KernelInfo(
                name=step.node.name, kind="alias", nodes=[step.node.name],
                source_lines=_source_lines([step.node]), code=str(step), language="text",
            ))
    return rows
