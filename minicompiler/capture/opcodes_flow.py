"""Opcodes that move the instruction pointer: jumps, `if`, loops, `return`, and the ones
that end a capture. Mixed into `InstructionTranslator`.

A jump on a Python value is simply taken or not, so the graph holds one path; a jump on a
tensor's value would need both and raises Unsupported (in `TensorVariable.truth`). Loops
run to the end at capture time: the graph holds the loop unrolled.
"""

from __future__ import annotations

import dis
import importlib.util
import sys

from minicompiler.capture.errors import Unsupported
from minicompiler.capture.frame import PY312, PY313, Frame
from minicompiler.capture.grad_mode import GradModeVariable
from minicompiler.capture.variables import NULL, ConstantVariable, IteratorVariable, Variable


class FlowOpcodes(Frame):
    def JUMP_FORWARD(self, inst: dis.Instruction) -> None:
        self.jump(inst)

    JUMP_BACKWARD = JUMP_BACKWARD_NO_INTERRUPT = JUMP = JUMP_FORWARD

    def POP_JUMP_IF_FALSE(self, inst: dis.Instruction) -> None:
        if not self.pop().truth():
            self.jump(inst)

    def POP_JUMP_IF_TRUE(self, inst: dis.Instruction) -> None:
        if self.pop().truth():
            self.jump(inst)

    def POP_JUMP_IF_NONE(self, inst: dis.Instruction) -> None:
        if _is_none(self.pop()):
            self.jump(inst)

    def POP_JUMP_IF_NOT_NONE(self, inst: dis.Instruction) -> None:
        if not _is_none(self.pop()):
            self.jump(inst)

    # 3.11 spells the direction out
    POP_JUMP_FORWARD_IF_FALSE = POP_JUMP_BACKWARD_IF_FALSE = POP_JUMP_IF_FALSE
    POP_JUMP_FORWARD_IF_TRUE = POP_JUMP_BACKWARD_IF_TRUE = POP_JUMP_IF_TRUE
    POP_JUMP_FORWARD_IF_NONE = POP_JUMP_BACKWARD_IF_NONE = POP_JUMP_IF_NONE
    POP_JUMP_FORWARD_IF_NOT_NONE = POP_JUMP_BACKWARD_IF_NOT_NONE = POP_JUMP_IF_NOT_NONE

    def JUMP_IF_FALSE_OR_POP(self, inst: dis.Instruction) -> None:  # 3.11: `a and b`
        if not self.stack[-1].truth():
            self.jump(inst)
        else:
            self.pop()

    def JUMP_IF_TRUE_OR_POP(self, inst: dis.Instruction) -> None:  # 3.11: `a or b`
        if self.stack[-1].truth():
            self.jump(inst)
        else:
            self.pop()

    # -- loops ----------------------------------------------------------------------------
    def GET_ITER(self, inst: dis.Instruction) -> None:
        iterable = self.pop()
        if not isinstance(iterable, IteratorVariable):
            iterable = IteratorVariable(iterable.iterate(self))
        self.push(iterable)

    def FOR_ITER(self, inst: dis.Instruction) -> None:
        iterator = self.stack[-1]
        assert isinstance(iterator, IteratorVariable)
        item = iterator.next_item()
        if item is not None:
            self.push(item)
            return
        # Exhausted. 3.11 pops the iterator and jumps past the loop. 3.12+ jump to END_FOR,
        # which pops the iterator and (as documented) one more value: we push a stand-in.
        if PY312:
            self.push(NULL)
        else:
            self.pop()
        self.jump(inst)

    def END_FOR(self, inst: dis.Instruction) -> None:
        self.pop_n(1 if PY313 else 2)  # 3.13 follows END_FOR with a POP_TOP of its own

    # -- returns --------------------------------------------------------------------------
    def RETURN_VALUE(self, inst: dis.Instruction) -> None:
        self.return_value = self.pop()

    def RETURN_CONST(self, inst: dis.Instruction) -> None:
        self.return_value = self.state.wrap(inst.argval, None)

    # -- what ends a capture --------------------------------------------------------------
    def RAISE_VARARGS(self, inst: dis.Instruction) -> None:
        raise Unsupported("a `raise` statement was reached")

    def LOAD_ASSERTION_ERROR(self, inst: dis.Instruction) -> None:
        raise Unsupported("an assert failed at capture time")

    # -- generators (run to the end by `Tracer.inline_call`) -------------------------------
    def RETURN_GENERATOR(self, inst: dis.Instruction) -> None:
        if self.yielded is None:
            raise Unsupported("a generator outside a call")
        self.push(ConstantVariable(None))  # what the generator is first resumed with

    def YIELD_VALUE(self, inst: dis.Instruction) -> None:
        assert self.yielded is not None
        self.yielded.append(self.pop())
        self.push(ConstantVariable(None))  # what `send` would pass back: nothing

    # -- `with` ---------------------------------------------------------------------------
    def BEFORE_WITH(self, inst: dis.Instruction) -> None:
        manager = self.pop()
        if isinstance(manager, GradModeVariable):
            self.push(manager.exit_variable())
            self.push(manager.enter(self))
            return
        # any other manager (e.g. contextlib.nullcontext, a library's own class): its __enter__ and
        # __exit__ are inlined like other methods, or the `with` breaks with the reason they give
        try:
            exit_method = manager.getattr(self, "__exit__")
            entered = manager.call_method(self, "__enter__", [], {})
        except Unsupported as error:
            raise Unsupported(f"`with` on {manager.describe()} is not captured: {error}") from error
        self.push(exit_method)
        self.push(entered)

    def IMPORT_NAME(self, inst: dis.Instruction) -> None:
        # `import a.b` inside a function: a module already imported is a constant (the import
        # statement only looks it up in sys.modules); a first import would run code, so it breaks.
        fromlist, level = self.pop().as_python(), self.pop().as_python()
        name = inst.argval
        if level:
            name = importlib.util.resolve_name("." * level + name, self.f_globals.get("__package__") or "")
        if name not in sys.modules:
            raise Unsupported(f"`import {name}` would import it for the first time (it runs the module)")
        # `import a.b` binds `a`; `from a.b import c` needs `a.b` itself
        module = sys.modules[name] if fromlist or level else sys.modules[name.partition(".")[0]]
        self.push(self.state.wrap(module, None))

    def IMPORT_FROM(self, inst: dis.Instruction) -> None:
        module = self.stack[-1].as_python()
        submodule = sys.modules.get(f"{module.__name__}.{inst.argval}")
        if not hasattr(module, inst.argval) and submodule is None:
            raise Unsupported(f"cannot import {inst.argval!r} from {module.__name__}")
        self.push(self.stack[-1].getattr(self, inst.argval) if submodule is None
                  else self.state.wrap(submodule, None))


def _is_none(value: Variable) -> bool:
    return value.python_type() is type(None)
