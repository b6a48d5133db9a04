"""The IR: Graph and Node, the op table, printer, verifier and reference interpreter."""

from minicompiler.ir import (  # noqa: F401  (fill the op table with prod/argmax/argmin, the scans, store_at, ...)
    recorded_calls,
    reductions,
    scans,
    scatter,
)
from minicompiler.ir.graph import Graph, Node, SourceLoc, TensorMeta, flatten, map_structure
from minicompiler.ir.interpreter import run_graph
from minicompiler.ir.ops import OPS, OpDef, infer_meta, is_primitive
from minicompiler.ir.printer import compile_printed, graph_to_python
from minicompiler.ir.transform import copy_graph, rewrite
from minicompiler.ir.verifier import GraphVerificationError, verify

__all__ = [
    "OPS", "Graph", "GraphVerificationError", "Node", "OpDef", "SourceLoc", "TensorMeta",
    "compile_printed", "copy_graph", "flatten", "graph_to_python", "infer_meta", "is_primitive",
    "map_structure", "rewrite", "run_graph", "verify",
]
