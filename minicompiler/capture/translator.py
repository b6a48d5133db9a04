"""The symbolic bytecode interpreter: runs a function's CPython bytecode on Variables.

`InstructionTranslator` interprets one frame with CPython's own loop: fetch the instruction
at `ip`, advance `ip`, run the method named after the opcode (`LOAD_FAST`, `CALL`, ...).
The opcode methods come in three families: `opcodes_locals.py` (moving values),
`opcodes_flow.py` (jumps, loops, returns) and `opcodes_values.py` (operators, containers,
calls). Opcode differences between 3.11, 3.12 and 3.13 are handled where they occur.

Keeping `ip` and the stack explicit is what lets a later version stop at an unsupported
instruction, emit the graph so far, and resume the rest in Python (a graph break).
"""

from __future__ import annotations

import dis
import linecache
import types

from minicompiler.capture.builder import CaptureState
from minicompiler.capture.errors import Unsupported
from minicompiler.capture.opcodes_flow import FlowOpcodes
from minicompiler.capture.opcodes_locals import LocalsOpcodes
from minicompiler.capture.opcodes_values import ValueOpcodes
from minicompiler.capture.variables import Variable
from minicompiler.ir import SourceLoc


class InstructionTranslator(LocalsOpcodes, FlowOpcodes, ValueOpcodes):
    def __init__(self, state: CaptureState, fn: types.FunctionType, local: dict[str, Variable],
                 depth: int) -> None:
        super().__init__(state, depth, fn, local)
        self.records = state.log.records_for(self.code, self.instructions)
        self.inside_try = self._offsets_inside_try()
        self._locs: dict[int, SourceLoc] = {}

    def run(self) -> Variable:
        while self.return_value is None:
            inst = self.instructions[self.ip]
            self.ip += 1
            self.step(inst)
        return self.return_value

    def step(self, inst: dis.Instruction) -> None:
        loc = self.source_loc(inst)
        record = self.records[inst.offset]
        self.saw_tensor = False
        try:
            self.state.count_instruction()
            if inst.offset in self.inside_try:
                raise Unsupported("try/except and try/finally blocks are not captured yet")
            handler = getattr(self, inst.opname, None)
            if handler is None:
                raise Unsupported(f"the {inst.opname} instruction is not supported yet")
            with self.state.graph.provenance(loc):  # every node made here points at this line
                handler(inst)
        except Unsupported as e:
            e.locate(loc, inst.opname)
            record.mark("break")
            raise
        record.mark("captured" if self.saw_tensor else "constant")

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
