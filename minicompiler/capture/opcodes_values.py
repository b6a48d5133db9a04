"""Opcodes that compute values: operators, subscripts, building and unpacking containers,
f-strings, making functions, and calls. Mixed into `InstructionTranslator`.

Everything here pops its operands, asks the Variables to do the work (`operators.py`,
`Variable.call`, ...), and pushes the result.
"""

from __future__ import annotations

import dis
import types

from minicompiler.capture.errors import Unsupported
from minicompiler.capture.frame import PY312, PY313, Frame
from minicompiler.capture.objects import UserFunctionVariable
from minicompiler.capture.operators import binary_op, compare_op, contains_op, is_op, unary_op
from minicompiler.capture.tensor import TensorVariable
from minicompiler.capture.variables import (
    NULL,
    CellVariable,
    ConstantVariable,
    DictVariable,
    ListVariable,
    TupleVariable,
    Variable,
    constant,
    python_values,
)

# COMPARE_OP's argument holds the comparison in its high bits: 3.12 shifts by 4, 3.13 by 5
# (3.13 uses bit 4 for "convert the result to bool").
COMPARE_SHIFT = 5 if PY313 else 4 if PY312 else 0
COMPARE_TO_BOOL = PY313
_CONVERSIONS = {0: None, 1: str, 2: repr, 3: ascii}  # f"{x!s}", f"{x!r}", f"{x!a}"
_INTRINSIC_UNARY_POSITIVE, _INTRINSIC_LIST_TO_TUPLE = 5, 6


class ValueOpcodes(Frame):
    # -- operators ------------------------------------------------------------------------
    def BINARY_OP(self, inst: dis.Instruction) -> None:
        b = self.pop()
        a = self.pop()
        self.push(binary_op(self, inst.argrepr, a, b))  # argrepr is the operator: "+", "@", "+="

    def COMPARE_OP(self, inst: dis.Instruction) -> None:
        b = self.pop()
        a = self.pop()
        result = compare_op(self, dis.cmp_op[inst.arg >> COMPARE_SHIFT], a, b)
        if COMPARE_TO_BOOL and inst.arg & 16:  # the comparison feeds a jump: make it a bool now
            result = ConstantVariable(result.truth())
        self.push(result)

    def IS_OP(self, inst: dis.Instruction) -> None:
        b = self.pop()
        a = self.pop()
        self.push(ConstantVariable(is_op(a, b) != bool(inst.arg)))  # arg 1: `is not`

    def CONTAINS_OP(self, inst: dis.Instruction) -> None:
        container = self.pop()
        item = self.pop()
        self.push(ConstantVariable(contains_op(self, item, container) != bool(inst.arg)))  # arg 1: `not in`

    def UNARY_NEGATIVE(self, inst: dis.Instruction) -> None:
        self.push(unary_op(self, "-", self.pop()))

    def UNARY_POSITIVE(self, inst: dis.Instruction) -> None:
        self.push(unary_op(self, "+", self.pop()))

    def UNARY_INVERT(self, inst: dis.Instruction) -> None:
        self.push(unary_op(self, "~", self.pop()))

    def UNARY_NOT(self, inst: dis.Instruction) -> None:
        self.push(unary_op(self, "not", self.pop()))

    def TO_BOOL(self, inst: dis.Instruction) -> None:
        self.push(ConstantVariable(self.pop().truth()))

    def CALL_INTRINSIC_1(self, inst: dis.Instruction) -> None:
        if inst.arg == _INTRINSIC_UNARY_POSITIVE:
            self.UNARY_POSITIVE(inst)
        elif inst.arg == _INTRINSIC_LIST_TO_TUPLE:
            self.LIST_TO_TUPLE(inst)
        else:
            raise Unsupported(f"the intrinsic {inst.argrepr} is not supported")

    # -- subscripts -----------------------------------------------------------------------
    def BINARY_SUBSCR(self, inst: dis.Instruction) -> None:
        key = self.pop()
        obj = self.pop()
        self.push(obj.getitem(self, key))

    def BINARY_SLICE(self, inst: dis.Instruction) -> None:  # 3.12+: x[a:b]
        end = self.pop()
        start = self.pop()
        obj = self.pop()
        self.push(obj.getitem(self, ConstantVariable(slice(start.as_python(), end.as_python()))))

    def BUILD_SLICE(self, inst: dis.Instruction) -> None:
        self.push(ConstantVariable(slice(*python_values(self.pop_n(inst.arg)))))

    def STORE_SUBSCR(self, inst: dis.Instruction) -> None:
        key = self.pop()
        obj = self.pop()
        value = self.pop()
        if isinstance(obj, TensorVariable):
            obj.setitem(self, key, value)
            return
        if not isinstance(obj, (ListVariable, DictVariable)):
            raise Unsupported(f"assigning into {obj.describe()} (`obj[key] = value`) is not captured yet")
        obj.setitem(key, value)

    # -- building and unpacking containers ------------------------------------------------
    def BUILD_TUPLE(self, inst: dis.Instruction) -> None:
        self.push(TupleVariable(self.pop_n(inst.arg)))

    def BUILD_LIST(self, inst: dis.Instruction) -> None:
        self.push(ListVariable(self.pop_n(inst.arg)))

    def BUILD_MAP(self, inst: dis.Instruction) -> None:
        flat = self.pop_n(2 * inst.arg)  # key, value, key, value, ...
        self.push(DictVariable({k.as_python(): v for k, v in zip(flat[::2], flat[1::2], strict=True)}))

    def BUILD_CONST_KEY_MAP(self, inst: dis.Instruction) -> None:
        keys = self.pop().as_python()
        self.push(DictVariable(dict(zip(keys, self.pop_n(inst.arg), strict=True))))

    def BUILD_STRING(self, inst: dis.Instruction) -> None:
        self.push(ConstantVariable("".join(python_values(self.pop_n(inst.arg)))))

    def _container(self, inst: dis.Instruction) -> ListVariable | DictVariable:
        """The list or dict a comprehension or display is filling, `inst.arg` deep."""
        container = self.stack[-inst.arg]
        assert isinstance(container, (ListVariable, DictVariable))
        return container

    def LIST_APPEND(self, inst: dis.Instruction) -> None:
        item = self.pop()
        self._container(inst).items.append(item)

    def LIST_EXTEND(self, inst: dis.Instruction) -> None:
        items = self.pop().iterate(self)
        self._container(inst).items.extend(items)

    def LIST_TO_TUPLE(self, inst: dis.Instruction) -> None:
        self.push(TupleVariable(self.pop().iterate(self)))

    def MAP_ADD(self, inst: dis.Instruction) -> None:
        value = self.pop()
        key = self.pop()
        self._container(inst).items[key.as_python()] = value

    def DICT_UPDATE(self, inst: dis.Instruction) -> None:
        mapping = self.pop()
        if not isinstance(mapping, DictVariable):
            raise Unsupported(f"`**` on {mapping.describe()}")
        self._container(inst).items.update(mapping.items)

    DICT_MERGE = DICT_UPDATE

    def UNPACK_SEQUENCE(self, inst: dis.Instruction) -> None:
        items = self.pop().iterate(self)
        if len(items) != inst.arg:
            raise Unsupported(f"cannot unpack {len(items)} values into {inst.arg} names")
        for item in reversed(items):
            self.push(item)

    def UNPACK_EX(self, inst: dis.Instruction) -> None:  # a, *rest, b = ...
        before, after = inst.arg & 0xFF, inst.arg >> 8
        items = self.pop().iterate(self)
        if len(items) < before + after:
            raise Unsupported(f"cannot unpack {len(items)} values into {before + after}+ names")
        rest = ListVariable(items[before:len(items) - after])
        for item in reversed([*items[:before], rest, *items[len(items) - after:]]):
            self.push(item)

    # -- f-strings ------------------------------------------------------------------------
    def FORMAT_VALUE(self, inst: dis.Instruction) -> None:  # 3.11, 3.12
        spec = self.pop().as_python() if inst.arg & 4 else ""
        value = self.pop().as_python()
        convert = _CONVERSIONS[inst.arg & 3]
        self.push(constant(format(convert(value) if convert else value, spec)))

    def CONVERT_VALUE(self, inst: dis.Instruction) -> None:  # 3.13
        self.push(constant(_CONVERSIONS[inst.arg](self.pop().as_python())))

    def FORMAT_SIMPLE(self, inst: dis.Instruction) -> None:  # 3.13
        self.push(constant(format(self.pop().as_python())))

    def FORMAT_WITH_SPEC(self, inst: dis.Instruction) -> None:  # 3.13
        spec = self.pop().as_python()
        self.push(constant(format(self.pop().as_python(), spec)))

    # -- functions ------------------------------------------------------------------------
    def MAKE_FUNCTION(self, inst: dis.Instruction) -> None:
        code = self.pop().as_python()
        # A real function object (so inspect can bind its arguments) with placeholder cells;
        # the tracked closure cells and defaults are kept on the Variable.
        cells = tuple(types.CellType() for _ in code.co_freevars) or None
        fn = types.FunctionType(code, self.f_globals, code.co_name, None, cells)
        fn.__qualname__ = code.co_qualname
        function = UserFunctionVariable(fn, closure=[] if cells else None)
        if not PY313:  # 3.11/3.12 pass the attributes with the flags; 3.13 uses SET_FUNCTION_ATTRIBUTE
            for flag in (0x08, 0x04, 0x02, 0x01):  # popped in this order
                if inst.arg & flag:
                    _set_function_attribute(self, function, flag, self.pop())
        self.push(function)

    def SET_FUNCTION_ATTRIBUTE(self, inst: dis.Instruction) -> None:
        function = self.pop()
        assert isinstance(function, UserFunctionVariable)
        _set_function_attribute(self, function, inst.arg, self.pop())
        self.push(function)

    # -- calls ----------------------------------------------------------------------------
    def KW_NAMES(self, inst: dis.Instruction) -> None:  # 3.11, 3.12: names of the next CALL's kwargs
        self.kw_names = self.code.co_consts[inst.arg]

    def CALL(self, inst: dis.Instruction) -> None:
        args = self.pop_n(inst.arg)
        fn, self_arg = self.pop_callable()
        names, self.kw_names = self.kw_names, ()
        self._call(fn, self_arg, args, names)

    def CALL_KW(self, inst: dis.Instruction) -> None:  # 3.13: the names tuple is on the stack
        names = self.pop().as_python()
        args = self.pop_n(inst.arg)
        fn, self_arg = self.pop_callable()
        self._call(fn, self_arg, args, names)

    def CALL_FUNCTION_EX(self, inst: dis.Instruction) -> None:  # f(*args, **kwargs)
        kwargs = self.pop() if inst.arg & 1 else DictVariable({})
        args = self.pop().iterate(self)
        fn, self_arg = self.pop_callable()
        if not isinstance(kwargs, DictVariable):
            raise Unsupported(f"`**` on {kwargs.describe()}")
        self._call(fn, self_arg, [*args, *kwargs.items.values()], tuple(kwargs.items))

    def _call(self, fn: Variable, self_arg: Variable, args: list[Variable], names: tuple[str, ...]) -> None:
        if self_arg is not NULL:
            args = [self_arg, *args]
        split = len(args) - len(names)
        kwargs = dict(zip(names, args[split:], strict=True))
        self.push(fn.call(self, args[:split], kwargs))


def _set_function_attribute(tx: Frame, function: UserFunctionVariable, flag: int, value: Variable) -> None:
    if flag == 0x01:  # defaults: kept as Variables, which inspect hands back when binding
        function.fn.__defaults__ = tuple(value.iterate(tx))
    elif flag == 0x02:
        assert isinstance(value, DictVariable)
        function.fn.__kwdefaults__ = dict(value.items)
    elif flag == 0x08:
        function.closure = [cell for cell in value.iterate(tx) if isinstance(cell, CellVariable)]
    # 0x04 (annotations) does not change what the function computes
