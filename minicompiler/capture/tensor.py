"""Tensors in the symbolic interpreter, and the calls that turn torch code into graph nodes.

A `TensorVariable` stands for a tensor that will exist when the graph runs: it holds the
graph `Node` that computes it. Calling a torch function or a Tensor method on one looks the
callable up in the lowering tables (`torch_ops.py`, `torch_views.py`); anything else in the
torch namespace becomes an extern `torch_call` node if it can run on meta tensors.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from minicompiler.capture.errors import Unsupported
from minicompiler.capture.numpy_ops import mark_numpy, numpy_attribute, numpy_method
from minicompiler.capture.torch_gathers import assigned
from minicompiler.capture.torch_ops import TENSOR_METHODS, TORCH_FUNCTIONS, InPlace, Lowering, Updates, extern
from minicompiler.capture.torch_views import TENSOR_PROPERTIES, index, needs_grad, select
from minicompiler.capture.variables import (
    ConstantVariable,
    DictVariable,
    MethodVariable,
    SequenceVariable,
    Variable,
)
from minicompiler.ir import Graph, Node

if TYPE_CHECKING:
    from minicompiler.capture.frame import Tracer


class TensorVariable(Variable):
    """A tensor: the `node` that computes it, and the `storage` it lives in.

    Tensors that share memory (a tensor and its views) share a `storage` number; the capture
    state uses it to decide when an in-place op may be captured as a new value.
    In-place ops replace `node`, so every reference to this object sees the new value."""

    def __init__(self, node: Node, storage: int) -> None:
        self.node, self.storage = node, storage
        self.numpy = False  # an ndarray in the user's code (see numpy_ops.py)

    def python_type(self) -> type:
        return torch.Tensor

    def describe(self) -> str:
        return f"a tensor {self.node.meta}"

    def has_tensor(self) -> bool:
        return True

    def truth(self) -> bool:
        raise Unsupported("branching on a tensor's value (data-dependent control flow)")

    def length(self) -> int:
        if not self.node.meta.shape:
            raise Unsupported("len() of a 0-d tensor")
        return self.node.meta.shape[0]

    def getattr(self, tx: Tracer, name: str) -> Variable:
        if self.numpy and (attribute := numpy_attribute(tx, self, name)) is not None:
            return attribute
        if name in TENSOR_PROPERTIES:
            return apply_lowering(tx, TENSOR_PROPERTIES[name], f"Tensor.{name}", [self], {})
        if name == "requires_grad" and not needs_grad(self.node):
            return ConstantVariable(False)  # made from no input that requires grad: known now
        if name in ("grad", "data", "grad_fn", "requires_grad", "is_leaf"):
            raise Unsupported(f"reading Tensor.{name} (autograd state) inside the function")
        if not callable(getattr(torch.Tensor, name, None)):
            raise Unsupported(f"Tensor has no attribute {name!r} that capture knows")
        return MethodVariable(self, name)

    def call_method(self, tx: Tracer, name: str, args: list[Variable],
                    kwargs: dict[str, Variable]) -> Variable:
        if self.numpy:
            return numpy_method(tx, self, name, args, kwargs)
        lowering = method_lowering(name)
        if lowering is None and name.endswith("_") and (base := method_lowering(name[:-1])) is not None:
            # x.add_(y): compute x.add(y), then make it x's new value (if that is safe)
            lowering = _in_place(base)
        if lowering is None:
            raise Unsupported(f"Tensor.{name}() is not supported")
        return apply_lowering(tx, lowering, f"Tensor.{name}()", [self, *args], kwargs)

    def iterate(self, tx: Tracer) -> list[Variable]:
        return [apply_lowering(tx, select, "iterating over a tensor", [self, ConstantVariable(0),
                                                                        ConstantVariable(i)], {})
                for i in range(self.length())]

    def getitem(self, tx: Tracer, key: Variable) -> Variable:
        return apply_lowering(tx, index, "indexing a tensor", [self, key], {})

    def setitem(self, tx: Tracer, key: Variable, value: Variable) -> None:
        """`x[mask] = value` with a boolean mask of x's shape: x becomes where(mask, value, x).
        With a basic key (ints, slices, ...), value is written into that part of x (`assigned`).
        Other index assignments are not captured."""
        mask = key.node.meta if isinstance(key, TensorVariable) else None
        if mask is not None and mask.dtype == torch.bool and mask.shape == self.node.meta.shape:
            apply_lowering(tx, _masked_fill, "x[mask] = value", [self, key, value], {})
        elif mask is None:
            apply_lowering(tx, _assign, "x[key] = value", [self, key, value], {})
        else:
            raise Unsupported("assigning into a tensor through a tensor index (`x[idx] = value`)")


class UnboundTensorMethodVariable(Variable):
    """`torch.Tensor.add` or `torch.Tensor.__radd__`, called with the tensor first:
    `torch.Tensor.__radd__(x, 1)` is `x.__radd__(1)`, so the call goes to the tensor's method."""

    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn, self.name = fn, fn.__name__

    def python_type(self) -> type:
        return type(self.fn)

    def describe(self) -> str:
        return f"the method torch.Tensor.{self.name}"

    def as_python(self) -> Any:
        return self.fn

    def call(self, tx: Tracer, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if not args or not isinstance(args[0], TensorVariable):
            raise Unsupported(f"torch.Tensor.{self.name} called without a tensor first")
        return args[0].call_method(tx, self.name, args[1:], kwargs)


def is_unbound_tensor_method(value: Any) -> bool:
    """torch.Tensor's own methods: C ones (`__radd__`, `add`) and those torch writes in Python
    (`__rsub__`, in torch/_tensor.py, whose module would otherwise make them look like torch.*
    functions). Properties and classes are not methods."""
    name = getattr(value, "__name__", None)
    if not callable(value) or isinstance(value, type) or not isinstance(name, str):
        return False
    return getattr(torch.Tensor, name, None) is value or getattr(torch._C.TensorBase, name, None) is value


def method_lowering(name: str) -> Lowering | None:
    """The lowering for `x.name(...)`: from the table, else torch.name(x, ...) kept whole
    (or the method itself, for methods with no torch.* twin such as `x.repeat`)."""
    if name in TENSOR_METHODS:
        return TENSOR_METHODS[name]
    if name.startswith("_") or name.endswith("_"):
        return None
    fn = getattr(torch, name, None)
    method = getattr(torch.Tensor, name, None)
    if not callable(fn) or isinstance(fn, type):
        fn = method
    if not callable(fn) or isinstance(fn, type):
        return None

    def kept_whole(g: Graph, *args: Any, **kwargs: Any) -> Node:
        try:
            return extern(g, fn, *args, **kwargs)
        except TypeError:  # x.flip(0): a method may take as separate arguments what torch.flip takes as a tuple
            if method is None or method is fn:
                raise
            return extern(g, method, *args, **kwargs)

    return kept_whole


def _masked_fill(g: Graph, x: Node, mask: Node, value: Any) -> InPlace:
    return InPlace(g.call("where", mask, value, x))


def _assign(g: Graph, x: Node, key: Any, value: Any) -> InPlace:
    return InPlace(assigned(g, x, key, value))


def _in_place(lowering: Lowering) -> Lowering:
    return lambda g, *args, **kwargs: InPlace(lowering(g, *args, **kwargs))


# Usage logging that torch and torchvision call on every use (torchvision's stochastic depth, in each
# ConvNeXt and EfficientNet block): nothing for a compiled program to do, as in Dynamo. It used to
# break the graph there, and the rest of the model ran eagerly.
SKIPPED_TORCH_FUNCTIONS = frozenset({torch._C._log_api_usage_once})


def call_torch_function(tx: Tracer, fn: Callable[..., Any], args: list[Variable],
                        kwargs: dict[str, Variable]) -> Variable:
    if fn in SKIPPED_TORCH_FUNCTIONS:
        return ConstantVariable(None)
    name = f"{getattr(fn, '__module__', None) or 'torch'}.{getattr(fn, '__name__', fn)}"
    what = f"{name.replace('torch._C._nn', 'torch.nn.functional')}()"
    lowering = TORCH_FUNCTIONS.get(fn)
    if lowering is None:
        if getattr(fn, "__name__", "").endswith("_"):
            raise Unsupported(f"{what} changes its argument in place and is not in the op table")
        lowering = lambda g, *a, **k: extern(g, fn, *a, **k)
    return apply_lowering(tx, lowering, what, args, kwargs)


def to_argument(var: Variable, what: str) -> Any:
    """A Variable as a lowering sees it: tensors as their Node, containers and constants as
    Python values."""
    if isinstance(var, TensorVariable):
        return var.node
    if isinstance(var, SequenceVariable):
        items = [to_argument(item, what) for item in var.items]
        return items if var.python_type() is list else tuple(items)
    if isinstance(var, DictVariable):
        return {k: to_argument(v, what) for k, v in var.items.items()}
    if isinstance(var, ConstantVariable):
        return var.value
    if var.python_type() is float:  # a float graph input where a number is needed: specialized
        return var.as_python()
    from minicompiler.capture.objects import TorchFunctionVariable  # objects.py is built on this module

    if isinstance(var, TorchFunctionVariable):  # torch's own functions never change: a constant
        return var.fn  # (torch.testing's wrapper_set_seed(F.dropout, x) runs whole)
    raise Unsupported(f"{what} was given {var.describe()}")


def apply_lowering(tx: Tracer, lowering: Lowering, what: str, args: list[Variable],
                   kwargs: dict[str, Variable]) -> Variable:
    values = [to_argument(a, what) for a in args]
    kw_values = {k: to_argument(v, what) for k, v in kwargs.items()}
    try:
        result = lowering(tx.state.graph, *values, **kw_values)
    except Unsupported:
        raise
    except (RuntimeError, TypeError, ValueError, IndexError, KeyError) as e:
        # torch (running on meta tensors) or Python argument binding rejected the call;
        # eager will raise the same error with the user's own traceback.
        raise Unsupported(f"{what} failed at capture time: {e}") from e
    if isinstance(result, InPlace):
        return tx.state.mutate(args[0], result.node, what)
    if isinstance(result, Updates):
        for var in [*args, *kwargs.values()]:
            if isinstance(var, TensorVariable) and var.node in result.new_values:
                tx.state.mutate(var, result.new_values[var.node], what)
        result = result.result
    wrapped = tx.state.wrap_result(result)
    if any(isinstance(v, TensorVariable) and v.numpy for v in [*args, *kwargs.values()]):
        mark_numpy(wrapped)  # computed from an ndarray: an ndarray too
    return wrapped
