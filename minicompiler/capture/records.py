"""The bytecode listing of a capture: every instruction, and what happened to it.

The report shows it beside the source: which instructions became graph nodes ("captured"),
which only computed Python values at capture time ("constant"), which one broke the graph
("break"), and which never ran ("not reached", e.g. the other side of an `if`).
"""

from __future__ import annotations

import dis
import types
from dataclasses import dataclass

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
