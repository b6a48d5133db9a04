"""The compiler pipeline for one captured graph, as a list of named steps.

    graph (torch-level ops)
      -> decompose   high-level ops become primitives
      -> simplify    algebraic rules, constant folding, CSE, DCE
      -> fuse        nodes grouped into kernels, with a reason for every refusal
      -> generate    C++ or Triton kernels plus a Python wrapper that calls them

Each step is timed and recorded in a GraphReport, and its result is kept in
`CompiledGraph.artifacts` so a notebook can step through them.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

from minicompiler.codegen import CodegenError, generate
from minicompiler.decompose import decompose
from minicompiler.fuse import fuse
from minicompiler.ir import Graph, graph_to_python, run_graph
from minicompiler.report import GraphReport, StageRecord
from minicompiler.reporting import describe_fusion, describe_kernels, describe_schedule, node_lines
from minicompiler.simplify import simplify_with_log

BACKENDS = ("auto", "cpp", "triton", "eager")


@dataclass
class CompiledGraph:
    """A runnable compiled graph: `run(list of input tensors) -> output structure`."""

    run: Callable[[list[torch.Tensor]], Any]
    report: GraphReport
    artifacts: dict[str, Any] = field(default_factory=dict)  # stage name -> its result


def _timed(report: GraphReport, name: str, step: Callable[[], Any]) -> tuple[Any, StageRecord]:
    start = time.perf_counter()
    result = step()
    record = StageRecord(name, time.perf_counter() - start)
    report.stages.append(record)
    return result, record


def run_with_torch(graph: Graph) -> Callable[[list[torch.Tensor]], Any]:
    """Run a graph op by op with torch (the 'eager' backend and every fallback)."""
    return lambda inputs: run_graph(graph, *inputs)


def compile_graph(
    graph: Graph, backend: str, capture_seconds: float = 0.0, strict: bool = False
) -> CompiledGraph:
    """Take one captured graph through every stage for `backend` ("cpp", "triton" or "eager").

    If code generation fails, `strict` re-raises the CodegenError; otherwise the graph runs with
    torch ops and the report says why."""
    report = GraphReport(backend)
    report.stages.append(
        StageRecord("capture", capture_seconds, graph_to_python(graph), node_lines=node_lines(graph))
    )
    artifacts: dict[str, Any] = {"capture": graph}
    if backend == "eager":
        return CompiledGraph(run_with_torch(graph), report, artifacts)

    primitives, record = _timed(report, "decompose", lambda: decompose(graph))
    record.text, record.node_lines = graph_to_python(primitives), node_lines(primitives)
    (simplified, rewrites), record = _timed(report, "simplify", lambda: simplify_with_log(primitives))
    record.text, record.notes = graph_to_python(simplified), list(rewrites)
    record.node_lines = node_lines(simplified)
    schedule, record = _timed(report, "fuse", lambda: fuse(simplified))
    record.text, record.language = describe_schedule(schedule), "text"
    report.fusion = describe_fusion(schedule)
    artifacts.update(decompose=primitives, simplify=simplified, fuse=schedule)
    try:
        module, record = _timed(report, "codegen", lambda: generate(schedule, backend))
    except CodegenError as error:
        if strict:
            raise
        # Correct before fast: a graph the backend cannot generate still runs, with torch ops.
        report.fallback = f"{backend} codegen failed: {error}"
        return CompiledGraph(run_with_torch(graph), report, artifacts)
    record.text, record.language = module.source, "python"
    report.kernels = describe_kernels(schedule, module)
    artifacts["codegen"] = module
    return CompiledGraph(module, report, artifacts)
