"""Python floats read as graph inputs (TorchDynamo's unspecialized floats).

After a graph break at `s = x.max().item()`, the next segment starts from a frame that holds
`s`, a Python float. Baked into the graph as a constant (and guarded by value), every new value
would recompile that segment, kernels and all. So, as Dynamo does on a recompile, a float slot
whose value guard failed is read as a graph input from then on: a 0-d float64 tensor on the
frame's device, one more argument of the same compiled program.

Arithmetic keeps it in the graph: `x / s` (with `s` first converted to the dtype eager would
compute in, so results match eager's promotion of a Python float), `s * 2`, `s + t`, `-s`.
A comparison of the input with a number (`if s > 1:`) guards only its outcome. Anything else
that needs the number itself (`range(int(s))`, a torch argument that must be a number, division
between two floats, which may raise ZeroDivisionError in Python) *specializes*: the value is
guarded, as a plain float would be, and capture carries on with it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from minicompiler.capture.guards import constant_guard, predicate_guard, type_guard
from minicompiler.capture.sources import Source
from minicompiler.capture.tensor import TensorVariable, call_torch_function
from minicompiler.capture.variables import ConstantVariable, Variable

if TYPE_CHECKING:
    from minicompiler.capture.builder import CaptureState
    from minicompiler.capture.frame import Tracer

# float (op) number stays in the graph for these; the others specialize (see the docstring)
GRAPH_ARITHMETIC = frozenset({"+", "-", "*"})


class FloatInputVariable(Variable):
    """A float computed in the graph from float inputs: its `tensor` (0-d float64), its value in
    this capture, and the inputs it came from (`roots`: what a specialization guards)."""

    def __init__(self, state: CaptureState, tensor: TensorVariable, value: float,
                 roots: tuple[tuple[Source, float], ...]) -> None:
        self.state, self.tensor, self.value, self.roots = state, tensor, value, roots

    def python_type(self) -> type:
        return float

    def describe(self) -> str:
        return f"the float {self.value} (a graph input)"

    def as_python(self) -> float:
        """Specialize: the number, valid only while every input it came from keeps its value."""
        for source, value in self.roots:
            self.state.add_guard(constant_guard(source, value), source)
        return self.value

    def truth(self) -> bool:
        return bool(self.as_python())

    def getattr(self, tx: Tracer, name: str) -> Variable:
        return ConstantVariable(self.as_python()).getattr(tx, name)

    def call_method(self, tx: Tracer, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return ConstantVariable(self.as_python()).call_method(tx, name, args, kwargs)


def float_input(state: CaptureState, value: float, source: Source, device: torch.device) -> FloatInputVariable:
    """The frame slot `source` (a float now) as a graph input on `device`."""
    state.add_guard(type_guard(source, float), source)
    tensor = state.float_input(source.as_float_tensor(device), device)
    var = FloatInputVariable(state, tensor, value, ((source, value),))
    var.source = source  # re-read as it is, if it is alive at a later break
    return var


def float_op(tx: Tracer, op: str, tensor_fn: Any, python_fn: Any, a: Variable, b: Variable) -> Variable | None:
    """`a op b` where a side is a FloatInputVariable, kept in the graph (`tensor_fn` on graph
    values, `python_fn` for the value in this capture); None when it must specialize instead."""
    tensor = next((v for v in (a, b) if isinstance(v, TensorVariable)), None)
    if tensor is not None:
        return call_torch_function(tx, tensor_fn, [_operand_beside(tx, v, tensor) for v in (a, b)], {})
    if op not in GRAPH_ARITHMETIC or not all(_is_number(v) for v in (a, b)):
        return None
    result = call_torch_function(tx, tensor_fn, [v.tensor if isinstance(v, FloatInputVariable) else v
                                                 for v in (a, b)], {})
    assert isinstance(result, TensorVariable)
    roots = tuple(dict.fromkeys(r for v in (a, b) if isinstance(v, FloatInputVariable) for r in v.roots))
    return FloatInputVariable(tx.state, result, python_fn(_value(a), _value(b)), roots)


def float_comparison(state: CaptureState, symbol: str, python_fn: Any, a: Variable, b: Variable) -> Variable | None:
    """`s > 1` on a float input as it came (not computed from one), against a number: a Python
    bool whose outcome is guarded instead of the value; None when it must specialize instead."""
    float_side, other = (a, b) if isinstance(a, FloatInputVariable) else (b, a)
    if float_side.source is None or isinstance(other, FloatInputVariable) or not _is_number(other):
        return None
    bound, on_left = _value(other), float_side is a
    outcome = python_fn(_value(a), _value(b))

    def holds(value: Any) -> bool:
        return type(value) is float and python_fn(*((value, bound) if on_left else (bound, value))) == outcome

    sides = (float_side.source.path, repr(bound)) if on_left else (repr(bound), float_side.source.path)
    text = f"({sides[0]} {symbol} {sides[1]}) is {outcome}"
    state.add_guard(predicate_guard(float_side.source, text, holds), float_side.source)
    return ConstantVariable(outcome)


def specialized(var: Variable) -> Variable:
    return ConstantVariable(var.as_python()) if isinstance(var, FloatInputVariable) else var


def _operand_beside(tx: Tracer, var: Variable, tensor: TensorVariable) -> Variable:
    """A float input next to a tensor, in the dtype eager computes with a Python float there: the
    result's dtype, or float32 for float16 / bfloat16 results (eager's "opmath": half-precision
    ops compute in float32, and a 0-d float32 operand does not change a half tensor's dtype)."""
    if not isinstance(var, FloatInputVariable):
        return var
    dtype = torch.result_type(torch.empty((), dtype=tensor.node.meta.dtype), 1.0)
    if dtype in (torch.float16, torch.bfloat16):
        dtype = torch.float32
    return tx.state.wrap_result(tx.state.graph.call("convert", var.tensor.node, dtype))


def _is_number(var: Variable) -> bool:
    return isinstance(var, FloatInputVariable) or (
        isinstance(var, ConstantVariable) and type(var.value) in (int, float, bool))


def _value(var: Variable) -> Any:
    return var.value if isinstance(var, FloatInputVariable) else var.as_python()
