"""`Tracer` and `Frame`: what calls need, and the state of one function being interpreted.

A `Tracer` holds the capture state every frame shares and inlines calls to Python
functions: calling one runs its bytecode in a new frame, into the same graph. The outermost
call of a capture (the user's function itself) is made from a bare Tracer.

A `Frame` is CPython's frame holding Variables: an instruction pointer `ip`, a value
`stack`, and `locals` (closure cells are locals too, as in CPython 3.11+). The opcode
families (`opcodes_locals.py`, `opcodes_flow.py`, `opcodes_values.py`) are written against
it, and `InstructionTranslator` (translator.py) puts them together with the loop.
"""

from __future__ import annotations

import dis
import inspect
import sys
import types
from typing import TYPE_CHECKING

from minicompiler.capture.errors import Unsupported
from minicompiler.capture.variables import NULL, CellVariable, IteratorVariable, Variable

if TYPE_CHECKING:
    from minicompiler.capture.builder import CaptureState
    from minicompiler.capture.objects import UserFunctionVariable

PY312 = sys.version_info >= (3, 12)
PY313 = sys.version_info >= (3, 13)
MAX_INLINE_DEPTH = 32
_NOT_INLINABLE = inspect.CO_COROUTINE | inspect.CO_ASYNC_GENERATOR


class Tracer:
    def __init__(self, state: CaptureState, depth: int = 0) -> None:
        self.state, self.depth = state, depth

    def inline_call(self, fn: UserFunctionVariable, args: list[Variable],
                    kwargs: dict[str, Variable]) -> Variable:
        from minicompiler.capture.translator import InstructionTranslator  # built on this module

        code = fn.fn.__code__
        if code.co_flags & _NOT_INLINABLE:
            raise Unsupported(f"{fn.describe()} is a coroutine")
        if self.depth >= MAX_INLINE_DEPTH:
            raise Unsupported(f"calls nest more than {MAX_INLINE_DEPTH} deep (recursion?)")
        local = {**fn.bind(self, args, kwargs), **fn.closure_cells()}
        translator = InstructionTranslator(self.state, fn.fn, local, self.depth + 1)
        translator.caller = self if isinstance(self, Frame) else None
        if code.co_flags & inspect.CO_GENERATOR:
            # A generator runs to its end at once; what it yields is all known then, which is
            # what `sum(x * k for k in ks)` needs. (Loops are unrolled the same way.)
            translator.yielded = []
            translator.run()
            return IteratorVariable(translator.yielded)
        return translator.run()


class Frame(Tracer):
    def __init__(self, state: CaptureState, depth: int, fn: types.FunctionType,
                 local: dict[str, Variable]) -> None:
        super().__init__(state, depth)
        self.fn, self.code, self.f_globals = fn, fn.__code__, fn.__globals__
        self.instructions = list(dis.get_instructions(self.code))
        self.index_of = {inst.offset: i for i, inst in enumerate(self.instructions)}
        self.locals = local
        self.stack: list[Variable] = []
        self.ip = 0  # index of the next instruction
        self.kw_names: tuple[str, ...] = ()  # set by KW_NAMES for the next CALL (3.11, 3.12)
        self.return_value: Variable | None = None
        self.saw_tensor = False  # did the current instruction move a tensor? (for the listing)
        self.yielded: list[Variable] | None = None  # a generator's values, when running one
        self.caller: Frame | None = None  # the inlined frame that called this one (warnings' stacklevel)

    def push(self, value: Variable) -> None:
        self.saw_tensor = self.saw_tensor or value.has_tensor()
        self.stack.append(value)

    def pop(self) -> Variable:
        value = self.stack.pop()
        self.saw_tensor = self.saw_tensor or value.has_tensor()
        return value

    def pop_n(self, n: int) -> list[Variable]:
        """The top `n` values, deepest first."""
        return list(reversed([self.pop() for _ in range(n)]))

    def push_callable(self, fn: Variable) -> None:
        """A callable with the NULL that CALL expects beside it: [NULL, fn] up to 3.12,
        [fn, NULL] from 3.13."""
        if PY313:
            self.push(fn)
            self.push(NULL)
        else:
            self.push(NULL)
            self.push(fn)

    def pop_callable(self) -> tuple[Variable, Variable]:
        """The two slots below CALL's arguments, as (callable, self or NULL)."""
        below, top = self.pop_n(2)
        if PY313:
            return below, top
        return (top, NULL) if below is NULL else (below, top)

    def jump(self, inst: dis.Instruction) -> None:
        self.ip = self.index_of[inst.argval]  # dis resolves every jump's target to an offset

    def load_local(self, name: str) -> Variable:
        if name not in self.locals:
            raise Unsupported(f"local variable {name!r} is read before it is assigned")
        return self.locals[name]

    def store_local(self, name: str, value: Variable) -> None:
        if value is NULL:  # restoring a variable that was unset before a 3.12+ comprehension
            self.locals.pop(name, None)
        else:
            self.locals[name] = value

    def cell(self, name: str) -> CellVariable:
        cell = self.load_local(name)
        assert isinstance(cell, CellVariable), f"{name} is not a cell"
        return cell
