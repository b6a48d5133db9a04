"""Opcodes that move values: constants, locals, closure cells, globals, attributes, and
the stack shuffles. Mixed into `InstructionTranslator`."""

from __future__ import annotations

import builtins
import dis

from minicompiler.capture.errors import Unsupported
from minicompiler.capture.frame import PY312, Frame
from minicompiler.capture.objects import SuperVariable
from minicompiler.capture.sources import global_source
from minicompiler.capture.variables import NULL, CellVariable


class LocalsOpcodes(Frame):
    def NOP(self, inst: dis.Instruction) -> None:
        pass

    RESUME = PRECALL = EXTENDED_ARG = CACHE = NOP
    # The closure cells are put into `locals` when the frame is made.
    COPY_FREE_VARS = NOP

    # -- stack shuffles -------------------------------------------------------------------
    def POP_TOP(self, inst: dis.Instruction) -> None:
        self.pop()

    def PUSH_NULL(self, inst: dis.Instruction) -> None:
        self.push(NULL)

    def COPY(self, inst: dis.Instruction) -> None:
        self.push(self.stack[-inst.arg])

    def SWAP(self, inst: dis.Instruction) -> None:
        self.stack[-1], self.stack[-inst.arg] = self.stack[-inst.arg], self.stack[-1]

    # -- constants and locals -------------------------------------------------------------
    def LOAD_CONST(self, inst: dis.Instruction) -> None:
        self.push(self.state.wrap(inst.argval, None))

    def LOAD_FAST(self, inst: dis.Instruction) -> None:
        self.push(self.load_local(inst.argval))

    LOAD_FAST_CHECK = LOAD_CLOSURE = LOAD_FAST  # LOAD_CLOSURE pushes the cell itself

    def LOAD_FAST_AND_CLEAR(self, inst: dis.Instruction) -> None:
        # 3.12+ inlined comprehensions save the outer variable of the same name here
        self.push(self.locals.pop(inst.argval, NULL))

    def LOAD_FAST_LOAD_FAST(self, inst: dis.Instruction) -> None:
        for name in inst.argval:
            self.push(self.load_local(name))

    def STORE_FAST(self, inst: dis.Instruction) -> None:
        self.store_local(inst.argval, self.pop())

    def STORE_FAST_STORE_FAST(self, inst: dis.Instruction) -> None:
        first, second = inst.argval
        self.store_local(first, self.pop())
        self.store_local(second, self.pop())

    def STORE_FAST_LOAD_FAST(self, inst: dis.Instruction) -> None:
        store, load = inst.argval
        self.store_local(store, self.pop())
        self.push(self.load_local(load))

    def DELETE_FAST(self, inst: dis.Instruction) -> None:
        self.load_local(inst.argval)  # `del` of an unset name fails like reading it
        del self.locals[inst.argval]

    # -- closure cells --------------------------------------------------------------------
    def MAKE_CELL(self, inst: dis.Instruction) -> None:
        self.locals[inst.argval] = CellVariable(content=self.locals.get(inst.argval))

    def LOAD_DEREF(self, inst: dis.Instruction) -> None:
        self.push(self.cell(inst.argval).load(self))

    def STORE_DEREF(self, inst: dis.Instruction) -> None:
        self.cell(inst.argval).store(self.pop())

    # -- globals and attributes -----------------------------------------------------------
    def LOAD_GLOBAL(self, inst: dis.Instruction) -> None:
        name = inst.argval
        if name in self.f_globals:
            value = self.state.wrap(self.f_globals[name], global_source(self.f_globals, name))
        elif hasattr(builtins, name):
            value = self.state.wrap(getattr(builtins, name), None)
        else:
            raise Unsupported(f"name {name!r} is not defined")
        if inst.arg & 1:  # "push a NULL too", for a CALL
            self.push_callable(value)
        else:
            self.push(value)

    def STORE_GLOBAL(self, inst: dis.Instruction) -> None:
        raise Unsupported(f"assigning the global {inst.argval!r} (a side effect)")

    def LOAD_ATTR(self, inst: dis.Instruction) -> None:
        attr = self.pop().getattr(self, inst.argval)
        if PY312 and inst.arg & 1:  # 3.12+: LOAD_ATTR with the low bit is 3.11's LOAD_METHOD
            self.push_callable(attr)
        else:
            self.push(attr)

    def LOAD_METHOD(self, inst: dis.Instruction) -> None:
        # A bound method is a Variable of its own, so we never need CPython's unbound form.
        self.push_callable(self.pop().getattr(self, inst.argval))

    def STORE_ATTR(self, inst: dis.Instruction) -> None:
        obj = self.pop()
        obj.setattr(self, inst.argval, self.pop())

    def LOAD_SUPER_ATTR(self, inst: dis.Instruction) -> None:  # 3.12+: super().name
        owner = self.pop()
        cls = self.pop()
        self.pop()  # the global `super`
        attr = SuperVariable(cls.as_python(), owner).getattr(self, inst.argval)
        if inst.arg & 1:
            self.push_callable(attr)
        else:
            self.push(attr)
