"""Running one instruction for real: the eager Python between two graphs of a graph break.

After a segment's graph has run and the frame is rebuilt with real values (`resume.py`),
the instruction that broke the graph runs here on those values, exactly as CPython would:
a CALL calls the real function with the real arguments (so `print` prints, `.item()` reads
the number, `out.append(y)` appends once), a jump on a tensor asks `bool(tensor)`. Then
capture resumes at the instruction this one leads to.

Only instructions listed in `RUNNABLE` can break resumably; any other break runs the whole
call eagerly.
"""

from __future__ import annotations

import dis
import operator
import sys
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from minicompiler.capture.opcodes_values import COMPARE_SHIFT, COMPARE_TO_BOOL
from minicompiler.capture.resume import REAL_NULL, ResumePoint

PY313 = sys.version_info >= (3, 13)


@dataclass
class RealFrame:
    """The frame with real values: its stack, its locals, and where it goes next."""

    stack: list[Any]
    locals: dict[str, Any]
    index: int  # the next instruction to run

    def arguments(self) -> tuple[Any, ...]:
        """The frame as the next segment's arguments: the stack bottom first, then the locals."""
        return (*self.stack, *self.locals.values())

    def labels(self) -> list[str]:
        return [*(f"stack{i}" for i in range(len(self.stack))), *self.locals]

    def shape_key(self) -> tuple[int, int, tuple[str, ...]]:
        """Frames with the same key line up with the same arguments."""
        return self.index, len(self.stack), tuple(self.locals)

    def pop_n(self, n: int) -> list[Any]:
        values = self.stack[len(self.stack) - n:]
        del self.stack[len(self.stack) - n:]
        return values

    def pop_callable(self) -> tuple[Any, Any]:
        """(callable, self or NULL), from the two slots below a CALL's arguments."""
        below, top = self.pop_n(2)
        if PY313:
            return below, top
        return (top, REAL_NULL) if below is REAL_NULL else (below, top)


def run_instruction(point: ResumePoint, frame: RealFrame) -> None:
    """Run the breaking instruction on `frame`; afterwards `frame.index` is the next instruction."""
    inst = point.instruction
    frame.index = point.index + 1
    RUNNABLE[inst.opname](point, inst, frame)


def can_run(inst: dis.Instruction) -> bool:
    return inst.opname in RUNNABLE


# -- calls -------------------------------------------------------------------------------------
def _call(frame: RealFrame, fn: Any, self_arg: Any, args: list[Any], names: tuple[str, ...]) -> None:
    if self_arg is not REAL_NULL:
        args = [self_arg, *args]
    split = len(args) - len(names)
    frame.stack.append(fn(*args[:split], **dict(zip(names, args[split:], strict=True))))


def _CALL(point: ResumePoint, inst: dis.Instruction, frame: RealFrame) -> None:
    args = frame.pop_n(inst.arg)
    fn, self_arg = frame.pop_callable()
    _call(frame, fn, self_arg, args, point.kw_names)


def _CALL_KW(point: ResumePoint, inst: dis.Instruction, frame: RealFrame) -> None:  # 3.13
    names = frame.stack.pop()
    args = frame.pop_n(inst.arg)
    fn, self_arg = frame.pop_callable()
    _call(frame, fn, self_arg, args, names)


def _CALL_FUNCTION_EX(point: ResumePoint, inst: dis.Instruction, frame: RealFrame) -> None:
    kwargs = frame.stack.pop() if inst.arg & 1 else {}
    args = list(frame.stack.pop())
    fn, self_arg = frame.pop_callable()
    _call(frame, fn, self_arg, [*args, *kwargs.values()], tuple(kwargs))


# -- a branch on a tensor's value ----------------------------------------------------------------
def _jump_if(when: bool) -> Callable[[ResumePoint, dis.Instruction, RealFrame], None]:
    def jump(point: ResumePoint, inst: dis.Instruction, frame: RealFrame) -> None:
        if bool(frame.stack.pop()) is when:
            frame.index = next(i for i, other in enumerate(point.instructions) if other.offset == inst.argval)

    return jump


_COMPARISONS = {"<": operator.lt, "<=": operator.le, "==": operator.eq, "!=": operator.ne, ">": operator.gt,
                ">=": operator.ge}


def _COMPARE_OP(point: ResumePoint, inst: dis.Instruction, frame: RealFrame) -> None:
    # 3.13 breaks here, not at the jump: its COMPARE_OP also turns the result into a bool
    b, a = frame.stack.pop(), frame.stack.pop()
    result = _COMPARISONS[dis.cmp_op[inst.arg >> COMPARE_SHIFT]](a, b)
    frame.stack.append(bool(result) if COMPARE_TO_BOOL and inst.arg & 16 else result)


def _UNARY_NOT(point: ResumePoint, inst: dis.Instruction, frame: RealFrame) -> None:
    frame.stack.append(not frame.stack.pop())


def _TO_BOOL(point: ResumePoint, inst: dis.Instruction, frame: RealFrame) -> None:
    frame.stack.append(bool(frame.stack.pop()))


# -- side effects on objects ---------------------------------------------------------------------
def _STORE_ATTR(point: ResumePoint, inst: dis.Instruction, frame: RealFrame) -> None:
    obj, value = frame.stack.pop(), frame.stack.pop()
    setattr(obj, inst.argval, value)


def _BINARY_SUBSCR(point: ResumePoint, inst: dis.Instruction, frame: RealFrame) -> None:
    key, obj = frame.stack.pop(), frame.stack.pop()
    frame.stack.append(obj[key])  # e.g. x[mask]: a shape only the values decide


def _STORE_SUBSCR(point: ResumePoint, inst: dis.Instruction, frame: RealFrame) -> None:
    key, obj, value = frame.stack.pop(), frame.stack.pop(), frame.stack.pop()
    operator.setitem(obj, key, value)


RUNNABLE: dict[str, Callable[[ResumePoint, dis.Instruction, RealFrame], None]] = {
    "CALL": _CALL,
    "CALL_KW": _CALL_KW,
    "CALL_FUNCTION_EX": _CALL_FUNCTION_EX,
    "POP_JUMP_IF_TRUE": _jump_if(True),
    "POP_JUMP_IF_FALSE": _jump_if(False),
    "POP_JUMP_FORWARD_IF_TRUE": _jump_if(True),  # 3.11 spells out the direction
    "POP_JUMP_FORWARD_IF_FALSE": _jump_if(False),
    "POP_JUMP_BACKWARD_IF_TRUE": _jump_if(True),
    "POP_JUMP_BACKWARD_IF_FALSE": _jump_if(False),
    "COMPARE_OP": _COMPARE_OP,
    "UNARY_NOT": _UNARY_NOT,
    "TO_BOOL": _TO_BOOL,
    "STORE_ATTR": _STORE_ATTR,
    "BINARY_SUBSCR": _BINARY_SUBSCR,
    "STORE_SUBSCR": _STORE_SUBSCR,
}
