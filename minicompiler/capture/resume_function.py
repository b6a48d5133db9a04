"""The rest of a function, from a graph break on, as a real Python function (Dynamo's resume functions).

Most graph breaks resume by capturing the next segment (`capture_resume`). When that capture
fails too (the next segment breaks where it cannot resume, e.g. inside a `try` body), the code
before the break has already run, so the call cannot start again eagerly. It can carry on for
real, though: CPython runs the remaining bytecode if it is handed a frame in the same state.

A resume function is the original code with a short prologue in front:

    RESUME 0
    COPY_FREE_VARS n            # a closure: the same cells as the original function
    LOAD_CONST <value>          # each local bound at the break (a cell variable: its very cell)
    STORE_FAST x
    LOAD_CONST <value>          # the value stack at the break, bottom first
    PUSH_NULL                   # (a NULL slot of a pending CALL)
    JUMP_FORWARD <target>       # on into the original code, where the break left off

The values ride in the new code's constants (the function is made for one call and dropped), so
no local changes its slot. The original code follows unchanged, so its (relative) jumps still
land right; the exception table and the line table are shifted past the prologue, so `try`
blocks still catch and tracebacks name the user's lines.
"""

from __future__ import annotations

import dis
import inspect
import types
from collections.abc import Iterator
from typing import Any


def resume_function(function: types.FunctionType, offset: int, stack: list[Any],
                    local: dict[str, Any], null: Any) -> types.FunctionType:
    """A function of no arguments that runs `function`'s code from byte `offset` with this value
    stack (`null` marks a NULL slot) and these locals (cell variables given as their cells).
    (Not for generators: capture refuses those whole.)"""
    code = function.__code__
    consts = list(code.co_consts)

    def load(value: Any) -> tuple[str, int]:
        consts.append(value)
        return "LOAD_CONST", len(consts) - 1

    ops: list[tuple[str, int]] = [("RESUME", 0)]
    if code.co_freevars:
        ops.append(("COPY_FREE_VARS", len(code.co_freevars)))
    for slot, name in enumerate(_slot_names(code)):
        if name in code.co_cellvars:  # the cell itself goes in the slot (what MAKE_CELL would put)
            ops += [load(local.get(name, types.CellType())), ("STORE_FAST", slot)]
        elif name in local:
            ops += [load(local[name]), ("STORE_FAST", slot)]
    ops += [("PUSH_NULL", 0) if value is null else load(value) for value in stack]
    ops.append(("JUMP_FORWARD", offset // 2))  # counted in code units from the end of the prologue
    prologue = b"".join(_encode(dis.opmap[op], arg) for op, arg in ops)
    units = len(prologue) // 2
    new_code = code.replace(
        co_code=prologue + code.co_code,
        co_consts=tuple(consts),
        co_argcount=0,
        co_posonlyargcount=0,
        co_kwonlyargcount=0,
        co_flags=code.co_flags & ~(inspect.CO_VARARGS | inspect.CO_VARKEYWORDS),
        co_exceptiontable=_shifted_exception_table(code.co_exceptiontable, units),
        co_linetable=_no_location(units) + code.co_linetable,
        co_name=f"{code.co_name}_resume",
        co_qualname=f"{code.co_qualname}_resume",
    )
    return types.FunctionType(new_code, function.__globals__, new_code.co_name, None, function.__closure__)


def _slot_names(code: types.CodeType) -> list[str]:
    """The frame's local slots before the free variables: locals (arguments first), then cell
    variables that are not also arguments or locals."""
    return [*code.co_varnames, *(name for name in code.co_cellvars if name not in code.co_varnames)]


def _encode(opcode: int, arg: int) -> bytes:
    """One instruction, with EXTENDED_ARG prefixes for an argument over 255."""
    prefixes = []
    high = arg >> 8
    while high:
        prefixes.append(high & 0xFF)
        high >>= 8
    extended = b"".join(bytes((dis.opmap["EXTENDED_ARG"], byte)) for byte in reversed(prefixes))
    return extended + bytes((opcode, arg & 0xFF))


# -- the exception table (CPython's Objects/exception_handling_notes.txt) ------------------
def _read_varint(data: Iterator[int], first: int) -> int:
    value = first & 63
    byte = first
    while byte & 64:
        byte = next(data)
        value = (value << 6) | (byte & 63)
    return value


def _write_varint(value: int, start: bool = False) -> bytes:
    chunks = [value & 63]
    value >>= 6
    while value:
        chunks.append(value & 63)
        value >>= 6
    chunks.reverse()
    out = bytearray(chunk | 64 for chunk in chunks[:-1]) + bytes([chunks[-1]])
    if start:
        out[0] |= 128
    return bytes(out)


def _shifted_exception_table(table: bytes, units: int) -> bytes:
    """Each entry is (start, length, handler, depth and lasti), in code units: starts and
    handlers move past the prologue."""
    data, out = iter(table), bytearray()
    for first in data:
        start = _read_varint(data, first)
        length, handler, depth_lasti = (_read_varint(data, next(data)) for _ in range(3))
        out += _write_varint(start + units, start=True) + _write_varint(length)
        out += _write_varint(handler + units) + _write_varint(depth_lasti)
    return bytes(out)


def _no_location(units: int) -> bytes:
    """Line-table entries saying "no source line" for the prologue (PEP 626 format, code 15),
    at most 8 code units each; they leave the line the following entries count from alone."""
    entries = []
    while units:
        n = min(units, 8)
        entries.append(0x80 | (15 << 3) | (n - 1))
        units -= n
    return bytes(entries)
