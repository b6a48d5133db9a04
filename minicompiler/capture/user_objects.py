"""Objects of user classes created inside the captured code (a cache, a small config).

`cache = DynamicCache(config=config)` runs `__init__` inlined on a new `UserObjectVariable`:
its attributes live in a dict of Variables, so reads and writes are tracked like locals, and
tensors stored in it stay graph values. Methods are the class's functions bound to it, inlined
when called. If the object outlives the graph (returned, or alive at a break), it is made again
for real: `cls.__new__(cls)` with its attributes set (TorchDynamo's UserDefinedObjectVariable).
"""

from __future__ import annotations

import abc
import collections.abc
import inspect
import types
from typing import TYPE_CHECKING, Any

import torch
from torch import nn

from minicompiler.capture.errors import Unsupported
from minicompiler.capture.variables import ConstantVariable, Variable

if TYPE_CHECKING:
    from minicompiler.capture.frame import Tracer

# Classes whose objects carry state that a dict of attributes cannot hold
_NOT_PLAIN = (nn.Module, torch.Tensor, dict, list, tuple, set, BaseException)


def can_create(cls: type) -> bool:
    """A plain Python class: made by object.__new__, attributes in its __dict__."""
    return (type(cls) in (type, abc.ABCMeta) and not issubclass(cls, _NOT_PLAIN) and cls.__new__ is object.__new__
            and "__slots__" not in vars(cls) and not inspect.isabstract(cls))


class UserObjectVariable(Variable):
    """An object the captured code made, with tracked attributes."""

    def __init__(self, cls: type) -> None:
        self.cls = cls
        self.attrs: dict[str, Variable] = {}

    @staticmethod
    def create(tx: Tracer, cls: type, args: list[Variable], kwargs: dict[str, Variable]) -> UserObjectVariable:
        from minicompiler.capture.objects import UserFunctionVariable

        obj = UserObjectVariable(cls)
        init = inspect.getattr_static(cls, "__init__")
        if isinstance(init, types.FunctionType):
            UserFunctionVariable(init, self_var=obj).call(tx, args, kwargs)
        elif args or kwargs:
            raise Unsupported(f"creating a {cls.__name__}: its __init__ is not Python code")
        return obj

    def python_type(self) -> type:
        return self.cls

    def describe(self) -> str:
        return f"a {self.cls.__name__} made inside the function"

    def has_tensor(self) -> bool:
        return any(v.has_tensor() for v in self.attrs.values())

    def getattr(self, tx: Tracer, name: str) -> Variable:
        from minicompiler.capture.objects import UserFunctionVariable

        if name in self.attrs:
            return self.attrs[name]
        if name == "__class__":
            return tx.state.wrap(self.cls, None)
        try:
            static = inspect.getattr_static(self.cls, name)
        except AttributeError:
            raise Unsupported(f"{self.describe()} has no attribute {name!r}") from None
        if isinstance(static, types.FunctionType):
            return UserFunctionVariable(static, self_var=self)
        if isinstance(static, property) and static.fget is not None:
            return UserFunctionVariable(static.fget, self_var=self).call(tx, [], {})
        if isinstance(static, classmethod):
            return UserFunctionVariable(static.__func__, self_var=tx.state.wrap(self.cls, None))
        if isinstance(static, staticmethod):
            return tx.state.wrap(static.__func__, None)
        return tx.state.wrap(getattr(self.cls, name), None)  # a class attribute

    def has_attribute(self, name: str) -> bool:
        # a property counts as there (hasattr would say False only if its getter raised AttributeError)
        return name in self.attrs or hasattr(self.cls, name)

    def setattr(self, tx: Tracer, name: str, value: Variable) -> None:
        if hasattr(inspect.getattr_static(self.cls, name, None), "__set__"):
            raise Unsupported(f"assigning .{name} of {self.describe()} runs a property's setter")
        self.attrs[name] = value

    def getitem(self, tx: Tracer, key: Variable) -> Variable:
        return self.call_method(tx, "__getitem__", [key], {})

    def iterate(self, tx: Tracer) -> list[Variable]:
        # a Sequence (len and getitem written in Python, abc's __iter__): item by item
        sequence = collections.abc.Sequence
        if not (issubclass(self.cls, sequence) and self.cls.__iter__ is sequence.__iter__):
            raise Unsupported(f"iterating over {self.describe()}")
        count = self.call_method(tx, "__len__", [], {}).as_python()
        return [self.getitem(tx, ConstantVariable(i)) for i in range(count)]

    def truth(self) -> bool:
        if hasattr(self.cls, "__bool__") or hasattr(self.cls, "__len__"):
            raise Unsupported(f"the truth of {self.describe()} runs its __bool__ or __len__")
        return True

    def call_method(self, tx: Tracer, name: str, args: list[Variable],
                    kwargs: dict[str, Variable]) -> Variable:
        return self.getattr(tx, name).call(tx, args, kwargs)


def make_for_real(cls: type, attrs: dict[str, Any]) -> Any:
    """The object again, after the graph: a bare instance with the attributes capture tracked."""
    obj = cls.__new__(cls)
    obj.__dict__.update(attrs)
    return obj

