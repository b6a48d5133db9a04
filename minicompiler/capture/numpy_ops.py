"""NumPy code on tensors, as torch.compile does it: an ndarray argument becomes a tensor input
(`torch.from_numpy`, sharing its memory), NumPy functions and ndarray methods become the torch
calls that compute the same thing, and the arrays the function returns go back to NumPy.

A tensor that came from an ndarray keeps `numpy=True` (and passes it on to what is computed
from it), because NumPy spells some things differently from torch: `axis=`/`keepdims=` for
`dim=`/`keepdim=`, and `std`/`var` divide by n (`ddof=0`) where torch divides by n - 1.
Dtypes follow torch's promotion, which for float64 arrays and Python numbers is NumPy's too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from minicompiler.capture.errors import Unsupported
from minicompiler.capture.variables import ConstantVariable, SequenceVariable, Variable

if TYPE_CHECKING:
    from minicompiler.capture.frame import Tracer
    from minicompiler.capture.tensor import TensorVariable

try:
    import numpy as np
except ImportError:  # NumPy is optional: without it no value is an ndarray
    np = None

# NumPy's keyword names -> torch's
_KEYWORDS = {"axis": "dim", "keepdims": "keepdim", "ddof": "correction", "a_min": "min", "a_max": "max"}
_SPREAD = {"std", "var"}  # NumPy's default ddof is 0, torch's correction is 1
# ndarray methods (and np.<name> functions) whose torch counterpart has another name
_RENAMED = {"max": "amax", "min": "amin", "clip": "clamp", "absolute": "abs", "astype": "to", "copy": "clone",
            "dot": "matmul"}
_FUNCTION_NAMES = ["sin", "cos", "tan", "tanh", "exp", "log", "log1p", "expm1", "sqrt", "abs", "absolute",
                   "square", "sign", "floor", "ceil", "sum", "mean", "std", "var", "max", "min", "maximum",
                   "minimum", "where", "clip", "matmul", "dot", "exp2", "negative", "reciprocal"]


def is_ndarray(value: Any) -> bool:
    return np is not None and type(value) is np.ndarray


def numpy_function_name(value: Any) -> str | None:
    """`"sin"` for `np.sin`: a NumPy function capture maps to torch, else None."""
    if np is None or not callable(value):
        return None
    name = getattr(value, "__name__", None)
    return name if name in _FUNCTION_NAMES and getattr(np, name, None) is value else None


class NumpyFunctionVariable(Variable):
    """`np.sin`, `np.sum`, ...: called, it is the torch function computing the same thing."""

    def __init__(self, name: str) -> None:
        self.name = name

    def describe(self) -> str:
        return f"the NumPy function {self.name}"

    def as_python(self) -> Any:
        return getattr(np, self.name)

    def call(self, tx: Tracer, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if not args:
            raise Unsupported(f"np.{self.name}() without arguments")
        if self.name in ("maximum", "minimum") and isinstance(args[1], ConstantVariable):
            bound = "min" if self.name == "maximum" else "max"  # np.maximum(x, 0) is clamp(x, min=0)
            return call_numpy(tx, "clamp", args[:1], {bound: args[1], **kwargs})
        return call_numpy(tx, self.name, args, kwargs)


def call_numpy(tx: Tracer, name: str, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
    """NumPy's `name(*args, **kwargs)` as a torch call; the result is NumPy-flavoured."""
    from minicompiler.capture.tensor import call_torch_function  # tensor.py imports this module

    name = _RENAMED.get(name, name)
    kwargs = {_KEYWORDS.get(k, k): v for k, v in kwargs.items()}
    if "out" in kwargs or ("dtype" in kwargs and name != "to"):
        raise Unsupported(f"np.{name}() with out= or dtype=")
    if name in _SPREAD:
        kwargs.setdefault("correction", ConstantVariable(0))
    if name in ("amax", "amin", "sum", "mean", "std", "var") and "dim" in kwargs:
        kwargs["dim"] = _as_dims(kwargs["dim"])
    function = getattr(torch, name, None)
    if not callable(function):
        raise Unsupported(f"NumPy's {name}() has no torch counterpart that capture knows")
    return mark_numpy(call_torch_function(tx, function, args, kwargs))


def _as_dims(dim: Variable) -> Variable:
    """axis=None means every axis in NumPy; torch spells that as no dim at all."""
    if isinstance(dim, SequenceVariable):
        return ConstantVariable(tuple(item.as_python() for item in dim.items))
    return dim


def numpy_method(tx: Tracer, array: TensorVariable, name: str, args: list[Variable],
                 kwargs: dict[str, Variable]) -> Variable:
    """`array.name(...)` with NumPy's meaning."""
    if name == "reshape" and len(args) == 1 and isinstance(args[0], SequenceVariable):
        args = list(args[0].items)  # a.reshape((2, 3)) and a.reshape(2, 3) alike
    return call_numpy(tx, name, [array, *args], kwargs)


def numpy_attribute(tx: Tracer, array: TensorVariable, name: str) -> Variable | None:
    """The ndarray attributes whose meaning differs from the tensor's; None: same as torch."""
    meta = array.node.meta
    if name == "T":
        from minicompiler.capture.tensor import apply_lowering, method_lowering

        lowering = method_lowering("permute")
        assert lowering is not None
        reversed_dims = ConstantVariable(tuple(reversed(range(meta.ndim))))
        return mark_numpy(apply_lowering(tx, lowering, "ndarray.T", [array, reversed_dims], {}))
    if name == "size":
        return ConstantVariable(meta.numel)
    if name == "ndim":
        return ConstantVariable(meta.ndim)
    if name == "dtype":
        raise Unsupported("reading ndarray.dtype (a NumPy dtype) inside the function")
    return None


def mark_numpy(value: Variable) -> Variable:
    """Flag every tensor in `value` as an ndarray."""
    from minicompiler.capture.tensor import TensorVariable

    if isinstance(value, TensorVariable):
        value.numpy = True
    elif isinstance(value, SequenceVariable):
        for item in value.items:
            mark_numpy(item)
    return value

