"""The symbolic bytecode interpreter: runs a function's CPython bytecode on Variables.

`InstructionTranslator` interprets one frame with CPython's own loop: fetch the instruction
at `ip`, advance `ip`, run the method named after the opcode (`LOAD_FAST`, `CALL`, ...).
The opcode methods come in three families: `opcodes_locals.py` (moving values),
`opcodes_flow.py` (jumps, loops, returns) and `opcodes_values.py` (operators, containers,
calls). Opcode differences between 3.11, 3.12 and 3.13 are handled where they occur.

Keeping `ip` and the stack explicit is what makes graph breaks resumable: in the compiled
function's own frame (depth 1), an instruction that cannot be captured rewinds the frame to
just before it and raises `FrameBreak`; capture ends the graph there, and the runtime runs
that instruction for real and resumes capturing after it (`resume.py`, `concrete.py`).
"""

from __future__ import annotations

import dis
import linecache
import types

from minicompiler.capture.builder import CaptureState
from minicompiler.capture.concrete import can_run
from minicompiler.capture.errors import Unsupported
from minicompiler.capture.opcodes_flow import FlowOpcodes
from minicompiler.capture.opcodes_locals import LocalsOpcodes
from minicompiler.capture.opcodes_values import ValueOpcodes
from minicompiler.capture.snapshot import FrameSnapshot
from minicompiler.capture.variables import Variable
from minicompiler.ir import SourceLoc

# Instructions that may run user code (an inlined call) which changes values before it fails.
_CALLS = {"CALL", "CALL_KW", "CALL_FUNCTION_EX"}


class FrameBreak(Exception):  # noqa: N818 - a control-flow signal, not an error
    """The compiled function's own frame stopped at `index`, an instruction it can resume after."""

    def __init__(self, frame: InstructionTranslator, index: int, error: Unsupported) -> None:
        super().__init__(str(error))
        self.frame, self.index, self.error = frame, index, error


class InstructionTranslator(LocalsOpcodes, FlowOpcodes, ValueOpcodes):
    def __init__(self, state: CaptureState, fn: types.FunctionType, local: dict[str, Variable],
                 depth: int) -> None:
        super().__init__(state, depth, fn, local)
        self.records = state.log.records_for(self.code, self.instructions)
        # Only the compiled function's own frame may break and resume: a break in a frame it
        # called makes that whole call the break. The first frame to run is that frame.
        if state.root_frame is None:
            state.root_frame = self
        # A try body (or `with` body) is captured as if nothing raises; a break inside one cannot
        # resume, because the real instruction might raise into a handler capture never saw.
        self.inside_try = self._offsets_inside_try()
        self._locs: dict[int, SourceLoc] = {}

    def run(self) -> Variable:
        while self.return_value is None:
            inst = self.instructions[self.ip]
            self.ip += 1
            if self.state.root_frame is self and self.state.allow_breaks:  # the compiled function's frame
                self._step_or_break(inst)
            else:
                self.step(inst)
        return self.return_value

    def _step_or_break(self, inst: dis.Instruction) -> None:
        before = FrameSnapshot(self, deep=inst.opname in _CALLS)
        try:
            self.step(inst)
        except Unsupported as error:  # when an inlined call failed, the whole call is the break
            if not can_run(inst) or inst.offset in self.inside_try:
                raise
            before.restore(self)
            raise FrameBreak(self, self.ip - 1, error) from error

    def step(self, inst: dis.Instruction) -> None:
        loc = self.source_loc(inst)
        record = self.records[inst.offset]
        self.saw_tensor = False
        try:
            self.state.count_instruction()
            handler = getattr(self, inst.opname, None)
            if handler is None:
                raise Unsupported(f"the {inst.opname} instruction is not supported yet")
            with self.state.graph.provenance(loc):  # every node made here points at this line
                handler(inst)
        except Unsupported as e:
            e.locate(loc, inst.opname)
            record.mark("break")
            self.state.trace.record(self, inst, loc.lineno, "break")
            raise
        status = "captured" if self.saw_tensor else "constant"
        record.mark(status)
        self.state.trace.record(self, inst, loc.lineno, status)

    def source_loc(self, inst: dis.Instruction) -> SourceLoc:
        if inst.offset not in self._locs:
            lineno = inst.positions.lineno if inst.positions and inst.positions.lineno else None
            lineno = lineno or self.code.co_firstlineno
            line = linecache.getline(self.code.co_filename, lineno).strip()
            self._locs[inst.offset] = SourceLoc(self.code.co_filename, lineno, line, inst.offset,
                                                self.code.co_qualname)
        return self._locs[inst.offset]

    def _offsets_inside_try(self) -> set[int]:
        """Offsets covered by a `try` (its handler starts with PUSH_EXC_INFO). Since 3.11 a
        try body runs like any other code, so only the exception table tells."""
        inside: set[int] = set()
        for entry in dis.Bytecode(self.code).exception_entries:
            if self.instructions[self.index_of[entry.target]].opname == "PUSH_EXC_INFO":
                inside.update(range(entry.start, entry.end))
        return inside
