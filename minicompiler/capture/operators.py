"""Python operators (`+`, `<`, `is`, `in`, `-x`, `not`) on tracked values.

If a tensor is involved the operator becomes the matching torch function (`x + 1` is
`torch.add(x, 1)`), so it goes through the same lowering table as user calls. Otherwise both
sides are known now and the operator simply runs: `x.shape[-1] ** -0.5` is folded to a number.
"""

from __future__ import annotations

import operator
from typing import TYPE_CHECKING, Any

import torch

from minicompiler.capture.errors import Unsupported
from minicompiler.capture.float_inputs import FloatInputVariable, float_comparison, float_op, specialized
from minicompiler.capture.records_dict import DataclassDictVariable
from minicompiler.capture.tensor import TensorVariable, call_torch_function
from minicompiler.capture.variables import (
    ConstantVariable,
    DictVariable,
    ListVariable,
    SequenceVariable,
    Variable,
    constant,
)

if TYPE_CHECKING:
    from minicompiler.capture.frame import Tracer

PYTHON_BINARY = {
    "+": operator.add, "-": operator.sub, "*": operator.mul, "/": operator.truediv,
    "//": operator.floordiv, "%": operator.mod, "**": operator.pow, "@": operator.matmul,
    "&": operator.and_, "|": operator.or_, "^": operator.xor, "<<": operator.lshift, ">>": operator.rshift,
}
TENSOR_BINARY = {
    "+": torch.add, "-": torch.sub, "*": torch.mul, "/": torch.div, "//": torch.floor_divide,
    "%": torch.remainder, "**": torch.pow, "@": torch.matmul, "&": torch.bitwise_and,
    "|": torch.bitwise_or, "^": torch.bitwise_xor, "<<": torch.bitwise_left_shift,
    ">>": torch.bitwise_right_shift,
}
PYTHON_COMPARE = {
    "<": operator.lt, "<=": operator.le, "==": operator.eq,
    "!=": operator.ne, ">": operator.gt, ">=": operator.ge,
}
TENSOR_COMPARE = {
    "<": torch.lt, "<=": torch.le, "==": torch.eq, "!=": torch.ne, ">": torch.gt, ">=": torch.ge,
}
MIRRORED = {"<": ">", "<=": ">=", "==": "==", "!=": "!=", ">": "<", ">=": "<="}  # 2 < x  is  x > 2


def fold(fn: Any, *values: Variable) -> Variable:
    """Run `fn` on values known now; a Python error becomes Unsupported (eager will raise it)."""
    args = [v.as_python() for v in values]
    try:
        return constant(fn(*args))
    except Exception as e:  # any error of the user's own arithmetic
        raise Unsupported(f"{getattr(fn, '__name__', fn)}() raised {type(e).__name__}: {e}") from e


def binary_op(tx: Tracer, symbol: str, a: Variable, b: Variable) -> Variable:
    """BINARY_OP: `symbol` is "+" or, for augmented assignment, "+="."""
    in_place = symbol.endswith("=")
    op = symbol.rstrip("=")
    if isinstance(a, FloatInputVariable) or isinstance(b, FloatInputVariable):
        kept = float_op(tx, op, TENSOR_BINARY[op], PYTHON_BINARY[op], a, b) if op in TENSOR_BINARY else None
        if kept is not None:
            return kept
        a, b = specialized(a), specialized(b)
    if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):
        result = call_torch_function(tx, TENSOR_BINARY[op], [a, b], {})
        if in_place and isinstance(a, TensorVariable):  # x += y changes x itself
            return tx.state.mutate(a, result.node, f"`{symbol}`")
        return result
    if isinstance(a, SequenceVariable) and op in ("+", "*"):
        return _sequence_op(tx, op, a, b, in_place)
    return fold(PYTHON_BINARY[op], a, b)


def _sequence_op(tx: Tracer, op: str, a: SequenceVariable, b: Variable, in_place: bool) -> Variable:
    if op == "+":
        items = a.items + b.iterate(tx)
    else:
        items = a.items * b.as_python()
    if in_place and isinstance(a, ListVariable):  # list += ... extends the same list
        a.check_mutable()
        a.items[:] = items
        return a
    return type(a)(items)


def compare_op(tx: Tracer, symbol: str, a: Variable, b: Variable) -> Variable:
    if isinstance(a, FloatInputVariable) or isinstance(b, FloatInputVariable):
        if isinstance(a, TensorVariable) or isinstance(b, TensorVariable):  # an elementwise comparison
            kept = float_op(tx, symbol, TENSOR_COMPARE[symbol], PYTHON_COMPARE[symbol], a, b)
            assert kept is not None
            return kept
        compared = float_comparison(tx.state, symbol, PYTHON_COMPARE[symbol], a, b)
        if compared is not None:
            return compared
        a, b = specialized(a), specialized(b)  # a Python bool: control flow needs the number
    if isinstance(a, TensorVariable):
        return call_torch_function(tx, TENSOR_COMPARE[symbol], [a, b], {})
    if isinstance(b, TensorVariable):
        return call_torch_function(tx, TENSOR_COMPARE[MIRRORED[symbol]], [b, a], {})
    return fold(PYTHON_COMPARE[symbol], a, b)


def is_op(a: Variable, b: Variable) -> bool:
    """`a is b`: for values known at capture time compare the real objects (`bias is None`),
    otherwise the tracked values themselves (a tensor is itself and nothing else)."""
    if a is b:
        return True
    if a.has_tensor() or b.has_tensor() or isinstance(a, SequenceVariable) or isinstance(b, SequenceVariable):
        return False
    try:
        return a.as_python() is b.as_python()
    except Unsupported:
        return False


def contains_op(tx: Tracer, item: Variable, container: Variable) -> bool:
    if isinstance(container, DictVariable):  # keys are constants, whatever the values are
        return item.as_python() in container.items
    if isinstance(container, DataclassDictVariable):
        return item.as_python() in container.keys()
    if not (item.has_tensor() or container.has_tensor()):
        return item.as_python() in container.as_python()
    if any(member is item for member in container.iterate(tx)):
        return True
    raise Unsupported("`in` with tensors compares tensor values")


def unary_op(tx: Tracer, symbol: str, a: Variable) -> Variable:
    if symbol == "not":
        return ConstantVariable(not a.truth())
    if isinstance(a, FloatInputVariable) and symbol in ("-", "+"):
        return a if symbol == "+" else float_op(tx, "*", torch.mul, operator.mul, a, ConstantVariable(-1))
    a = specialized(a)
    if isinstance(a, TensorVariable):
        if symbol == "+":
            return a
        return call_torch_function(tx, torch.neg if symbol == "-" else torch.bitwise_not, [a], {})
    fn = {"-": operator.neg, "+": operator.pos, "~": operator.invert}[symbol]
    return fold(fn, a)
