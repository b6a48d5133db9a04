"""The bytecode listing of a capture: every instruction, and what happened to it; and the trace,
the interpreter's state after each instruction it ran.

The report shows it beside the source: which instructions became graph nodes ("captured"),
which only computed Python values at capture time ("constant"), which one broke the graph
("break"), and which never ran ("not reached", e.g. the other side of an `if`).
"""

from __future__ import annotations

import dis
import types
from dataclasses import dataclass
from typing import TYPE_CHECKING

from minicompiler.ir import Node
from minicompiler.ir.printer import format_call
from minicompiler.report import TraceStep

if TYPE_CHECKING:
    from minicompiler.capture.frame import Frame
    from minicompiler.capture.variables import Variable

# A loop runs an instruction many times; the listing shows its most telling status.
STATUS_RANK = {"not reached": 0, "constant": 1, "captured": 2, "break": 3}


@dataclass
class InstructionRecord:
    offset: int
    opname: str
    argrepr: str
    lineno: int | None
    status: str  # "captured" | "constant" | "break" | "not reached"
    function: str  # qualified name of the function; inlined callees have their own records

    def mark(self, status: str) -> None:
        if STATUS_RANK[status] > STATUS_RANK[self.status]:
            self.status = status


class BytecodeLog:
    """Records for each code object the capture ran, the captured function's first."""

    def __init__(self) -> None:
        self.records: list[InstructionRecord] = []
        self._by_code: dict[types.CodeType, dict[int, InstructionRecord]] = {}

    def records_for(self, code: types.CodeType,
                    instructions: list[dis.Instruction]) -> dict[int, InstructionRecord]:
        """The records of `code`, by offset; made (all "not reached") the first time it runs."""
        if code not in self._by_code:
            by_offset = {}
            for inst in instructions:
                lineno = inst.positions.lineno if inst.positions is not None else None
                record = InstructionRecord(inst.offset, inst.opname, inst.argrepr, lineno, "not reached",
                                           code.co_qualname)
                by_offset[inst.offset] = record
                self.records.append(record)
            self._by_code[code] = by_offset
        return self._by_code[code]


# -- the step-by-step trace (the notebook's bytecode stepper replays it) -------------------------
MAX_TRACE_STEPS = 2000  # a long unrolled loop would make the report huge: stop recording there


class TraceLog:
    """One `TraceStep` per instruction run, in every frame (inlined callees too): the symbolic
    stack and locals after it, the guards so far and the graph so far."""

    def __init__(self) -> None:
        self.steps: list[TraceStep] = []
        self.truncated = False  # True when the function ran more than MAX_TRACE_STEPS instructions
        self._node_lines: dict[Node, str] = {}  # each node is printed once, however many steps show it
        self._shown: list[Node] = []  # the graph the last step showed, and its lines
        self._shown_lines: list[str] = []

    def record(self, frame: Frame, inst: dis.Instruction, lineno: int | None, status: str) -> None:
        if len(self.steps) >= MAX_TRACE_STEPS:
            self.truncated = True
            return
        state = frame.state
        self.steps.append(TraceStep(
            offset=inst.offset, opname=inst.opname, argrepr=inst.argrepr, lineno=lineno,
            function=frame.code.co_qualname,
            stack=[short(v) for v in frame.stack],
            locals={name: short(v) for name, v in frame.locals.items()},
            guards=[g.description for g in state.guards],
            graph_nodes=self._graph_lines(state.graph.nodes),
            status=status,
        ))

    def _graph_lines(self, nodes: list[Node]) -> list[str]:
        """The graph so far, a line per node. Capture only adds nodes: where the last node the
        step before showed is where it was, nothing was put before it, and only the nodes after it
        are new (a line per node per step made a long capture quadratic: 0.15 s of ResNet-18's)."""
        shown = self._shown
        if shown and (len(nodes) < len(shown) or nodes[len(shown) - 1] is not shown[-1]):
            shown.clear()
            self._shown_lines.clear()
        for node in nodes[len(shown):]:
            shown.append(node)
            self._shown_lines.append(self._line(node))
        return list(self._shown_lines)

    def _line(self, node: Node) -> str:
        if node not in self._node_lines:
            if node.op == "placeholder":
                self._node_lines[node] = f"{node.name}: {node.meta}  (input)"
            else:
                self._node_lines[node] = f"{node.name} = {format_call(node)}  # {node.meta}"
        return self._node_lines[node]


def short(value: Variable) -> str:
    """A symbolic value in a few words: `cos: float32[8]` for a tensor (the node that will hold
    it), `2` for a constant, the describe() text for anything else."""
    node = getattr(value, "node", None)
    if isinstance(node, Node):
        return f"{node.name}: {node.meta}"
    text = value.describe()
    return text if len(text) <= 60 else text[:57] + "..."
