"""Capture: turn a Python function or nn.Module into a Graph of torch-level ops, plus guards.

A symbolic interpreter of CPython bytecode (TorchDynamo's job, in miniature). Read in order:
`api.py` (the entry point), `frame.py` and `translator.py` (the frame and its loop), the
`opcodes_*.py` families, the tracked values (`variables.py`, `tensor.py`, `objects.py`),
`torch_ops.py` / `torch_views.py` (torch calls -> graph ops), `builder.py` and `guards.py`
(graph inputs and the guards on them), then graph breaks: `resume.py` (the frame at a break)
and `concrete.py` (running the breaking instruction for real).
"""

from minicompiler.capture import (  # noqa: F401  (fill the tables)
    torch_aten_internals,
    torch_class_losses,
    torch_factories,
    torch_formulas,
    torch_gathers,
    torch_losses,
    torch_masked,
    torch_norms,
    torch_pooling,
    torch_products,
    torch_reductions,
    torch_resizing,
    torch_scatters,
    torch_searches,
    torch_special,
    torch_splits,
)
from minicompiler.capture.api import CaptureResult, capture, capture_resume
from minicompiler.capture.concrete import RealFrame, run_instruction
from minicompiler.capture.errors import Unsupported, break_kind
from minicompiler.capture.guards import Guard, first_failing_guard
from minicompiler.capture.records import InstructionRecord
from minicompiler.capture.resume import ResumePoint
from minicompiler.capture.sources import Source

__all__ = [
    "CaptureResult", "Guard", "InstructionRecord", "RealFrame", "ResumePoint", "Source", "Unsupported",
    "break_kind", "capture", "capture_resume", "first_failing_guard", "run_instruction",
]
