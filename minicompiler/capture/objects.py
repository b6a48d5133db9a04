"""Callables and objects: user functions (inlined), torch functions, builtins, modules.

- `UserFunctionVariable`: a Python function written by the user; calling it runs its
  bytecode in a nested translator (inlining), so its tensor ops land in the same graph.
- `TorchFunctionVariable`: `torch.cos`, `F.gelu`, ...: lowered through the op tables.
- `BuiltinVariable`: `len`, `range`, `math.sqrt`, ...: see `builtins.py`.
- `ObjectVariable`: any other object (a config, a class); attributes are read for real and
  guarded. `NNModuleVariable` adds parameters, submodules and calling `forward`.
- `PythonModuleVariable`: a Python module such as `torch` or `math` used as a namespace.
"""

from __future__ import annotations

import inspect
import os
import types
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, cast

import torch
from torch import nn

from minicompiler.capture.builtins import call_builtin
from minicompiler.capture.errors import Unsupported
from minicompiler.capture.nn_modules import MODULE_LOWERINGS, ChildrenVariable, check_no_hooks
from minicompiler.capture.records_dict import DataclassDictVariable, is_dataclass_dict
from minicompiler.capture.side_effects import DeferredCallVariable, is_logger_effect
from minicompiler.capture.sources import Source, cell_source, fixed_source
from minicompiler.capture.tensor import call_torch_function
from minicompiler.capture.torch_ops import TORCH_FUNCTIONS
from minicompiler.capture.user_objects import UserObjectVariable, can_create
from minicompiler.capture.variables import (
    CellVariable,
    ConstantVariable,
    DictVariable,
    MethodVariable,
    TupleVariable,
    Variable,
)

if TYPE_CHECKING:
    from minicompiler.capture.frame import Frame, Tracer

_LIBRARIES = {
    "torch", "math", "operator", "numpy", "builtins", "functools", "itertools", "typing", "collections",
}


class UserFunctionVariable(Variable):
    """A Python function to inline. `self_var` makes it a bound method; `closure` holds the
    cells of a function made by MAKE_FUNCTION inside the captured code."""

    def __init__(self, fn: types.FunctionType, self_var: Variable | None = None,
                 closure: list[CellVariable] | None = None) -> None:
        self.fn, self.self_var, self.closure = fn, self_var, closure

    def python_type(self) -> type:
        return types.FunctionType if self.self_var is None else types.MethodType

    def describe(self) -> str:
        return f"the function {self.fn.__qualname__}"

    def as_python(self) -> Any:
        if self.self_var is not None:  # a bound method, as Python would hand it out
            return types.MethodType(self.fn, self.self_var.as_python())
        return self.fn

    def call(self, tx: Tracer, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return tx.inline_call(self, args, kwargs)

    def getattr(self, tx: Tracer, name: str) -> Variable:
        # A function's own attributes (__code__, __name__, __wrapped__, __module__, ...) are
        # fixed once the function exists, and the function itself is guarded by identity.
        if self.self_var is None and name != "__closure__" and hasattr(self.fn, name):
            return tx.state.wrap(getattr(self.fn, name), None)
        if self.self_var is not None and name in ("__func__", "__self__"):
            return self.self_var if name == "__self__" else UserFunctionVariable(self.fn)
        if self.self_var is not None and hasattr(self.fn, name):
            return tx.state.wrap(getattr(self.fn, name), None)
        return super().getattr(tx, name)

    def bind(self, tx: Tracer, args: list[Variable], kwargs: dict[str, Variable]) -> dict[str, Variable]:
        """The callee's starting locals: Python's own argument binding, defaults included."""
        if self.self_var is not None:
            args = [self.self_var, *args]
        signature = inspect.signature(self.fn, follow_wrapped=False)
        try:
            bound = signature.bind(*args, **kwargs)
        except TypeError as e:
            raise Unsupported(f"calling {self.describe()}: {e}") from e
        bound.apply_defaults()
        code_names = self.fn.__code__.co_varnames
        local: dict[str, Variable] = {}
        for name, value in bound.arguments.items():
            kind = signature.parameters[name].kind
            if kind is inspect.Parameter.VAR_POSITIONAL:
                value = TupleVariable([self._tracked(tx, v) for v in value])
            elif kind is inspect.Parameter.VAR_KEYWORD:
                value = DictVariable({k: self._tracked(tx, v) for k, v in value.items()})
            else:
                value = self._tracked(tx, value)
            # inspect renames a comprehension's hidden `.0` argument to `implicit0`
            local[name if name in code_names else "." + name.removeprefix("implicit")] = value
        return local

    def _tracked(self, tx: Tracer, value: Any) -> Variable:
        if isinstance(value, Variable):
            return value
        # a default argument value: fixed for the function's lifetime (the function is guarded)
        return tx.state.wrap(value, fixed_source(value, f"{self.fn.__qualname__}.__defaults__"))

    def closure_cells(self) -> dict[str, CellVariable]:
        names = self.fn.__code__.co_freevars
        if self.closure is not None:
            return dict(zip(names, self.closure, strict=True))
        cells = self.fn.__closure__ or ()
        return {name: CellVariable(real_cell=cell, source=cell_source(cell, name, self.fn.__qualname__))
                for name, cell in zip(names, cells, strict=True)}


class TorchFunctionVariable(Variable):
    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def python_type(self) -> type:
        return type(self.fn)

    def describe(self) -> str:
        return f"the torch function {getattr(self.fn, '__name__', self.fn)}"

    def as_python(self) -> Any:
        return self.fn

    def call(self, tx: Tracer, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return call_torch_function(tx, self.fn, args, kwargs)


class BuiltinVariable(Variable):
    def __init__(self, fn: Callable[..., Any]) -> None:
        self.fn = fn

    def python_type(self) -> type:
        return type(self.fn)

    def describe(self) -> str:
        return f"the builtin {getattr(self.fn, '__name__', self.fn)}"

    def as_python(self) -> Any:
        return self.fn

    def call(self, tx: Tracer, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return call_builtin(tx, self.fn, args, kwargs)


class OptimizerStepVariable(MethodVariable):
    """`opt.step` inside a captured function: a graph break with the reason and the way out (the
    break runs the real `opt.step`, rebuilt as an attribute of `opt`)."""

    def call(self, tx: Tracer, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        raise Unsupported(f"{self.obj.describe()}.step() runs torch's own step at a graph break (its "
                          "bookkeeping is not captured); for fused update kernels, step with "
                          "minicompiler.compile(opt.step) outside the compiled function")


class ObjectVariable(Variable):
    """An object known at capture time; reading its attributes reads the real ones."""

    def __init__(self, value: Any, source: Source | None = None) -> None:
        self.value, self.source = value, source

    def python_type(self) -> type:
        return type(self.value)

    def describe(self) -> str:
        name = self.value.__name__ if isinstance(self.value, type) else type(self.value).__name__
        return f"{self.source} ({name})" if self.source is not None else f"a {name}"

    def as_python(self) -> Any:
        return self.value

    def getattr(self, tx: Tracer, name: str) -> Variable:
        if isinstance(self.value, _READ_ONLY_MAPPINGS) and name in _PURE_CONTAINER_METHODS:
            return PureMethodVariable(getattr(type(self.value), name), self)  # os.environ.get(...)
        if isinstance(self.value, torch.optim.Optimizer) and name == "step":
            return OptimizerStepVariable(self, "step")
        if is_logger_effect(self.value, name):  # logger.warning(...): made after the graph
            return DeferredCallVariable(getattr(self.value, name), f"{self.describe()}.{name}")
        written = tx.state.side_effects.lookup(self.value, name)
        if written is not None:  # assigned earlier in this capture (replayed after the graph)
            return written
        try:
            static = inspect.getattr_static(self.value, name)
        except AttributeError:
            if not _computes_attributes(type(self.value)) or not hasattr(self.value, name):
                raise Unsupported(f"{self.describe()} has no attribute {name!r}") from None
            # a class that maps names itself (a config's attribute_map): read for real, guarded
            return tx.state.wrap(getattr(self.value, name), self.source.attr(name) if self.source else None)
        if not isinstance(self.value, type):  # methods and properties are looked up on the class
            if isinstance(static, property) and static.fget is not None:
                return UserFunctionVariable(static.fget, self_var=self).call(tx, [], {})
            if isinstance(static, types.FunctionType) and name not in getattr(self.value, "__dict__", {}):
                return UserFunctionVariable(static, self_var=self)
        if isinstance(static, classmethod):
            owner = self.value if isinstance(self.value, type) else type(self.value)
            return UserFunctionVariable(static.__func__, self_var=tx.state.wrap(owner, None))
        return tx.state.wrap(getattr(self.value, name), self.source.attr(name) if self.source else None)

    def getitem(self, tx: Tracer, key: Variable) -> Variable:
        return self._dunder(tx, "__getitem__", [key], lambda: super(ObjectVariable, self).getitem(tx, key))

    def length(self) -> int:
        # a builtin __len__ (a mappingproxy, a dict subclass) reads the object as it is now
        if not isinstance(inspect.getattr_static(type(self.value), "__len__", None), (types.FunctionType, type(None))):
            return len(self.value)
        return super().length()

    def _dunder(self, tx: Tracer, name: str, args: list[Variable], otherwise: Callable[[], Variable]) -> Variable:
        """obj[key] and friends on a user class: inline the class's own Python method."""
        method = inspect.getattr_static(type(self.value), name, None)
        if isinstance(method, types.FunctionType) and not isinstance(self.value, type):
            return UserFunctionVariable(method, self_var=self).call(tx, args, {})
        return otherwise()

    def setattr(self, tx: Tracer, name: str, value: Variable) -> None:
        setter = hasattr(inspect.getattr_static(type(self.value), name, None), "__set__")  # a property, a slot
        if isinstance(self.value, (type, nn.Module)) or not hasattr(self.value, "__dict__") or setter:
            super().setattr(tx, name, value)  # (a setter is code to run)
        tx.state.side_effects.record_write(self.value, name, value)

    def call(self, tx: Tracer, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if is_dataclass_dict(self.value):  # a ModelOutput
            return DataclassDictVariable.create(self.value, args, kwargs)
        if isinstance(self.value, type) and can_create(self.value):
            return UserObjectVariable.create(tx, self.value, args, kwargs)
        if isinstance(self.value, type):
            raise Unsupported(f"creating a {self.value.__name__} object inside the function")
        call = inspect.getattr_static(type(self.value), "__call__", None)
        if isinstance(call, types.FunctionType):
            return UserFunctionVariable(call, self_var=self).call(tx, args, kwargs)
        return super().call(tx, args, kwargs)


def _computes_attributes(cls: type) -> bool:
    """The class answers some attribute reads with code (__getattribute__ or __getattr__)."""
    return cls.__getattribute__ is not object.__getattribute__ or hasattr(cls, "__getattr__")


class SuperVariable(Variable):
    """`super()` in a method: attributes are looked up in the classes after `cls` in `obj`'s MRO."""

    def __init__(self, cls: type, obj: Variable) -> None:
        self.cls, self.obj = cls, obj

    @staticmethod
    def of_frame(tx: Tracer) -> SuperVariable:
        """Zero-argument `super()`: the method's `__class__` cell and its first argument."""
        frame = cast("Frame", tx)
        cls = frame.cell("__class__").load(tx).as_python()
        return SuperVariable(cls, frame.load_local(frame.code.co_varnames[0]))

    def describe(self) -> str:
        return f"super({self.cls.__name__}, ...)"

    def getattr(self, tx: Tracer, name: str) -> Variable:
        mro = self.obj.python_type().__mro__
        for klass in mro[mro.index(self.cls) + 1:]:
            if name in klass.__dict__:
                attr = klass.__dict__[name]
                if klass is nn.Module and name == "__call__" and isinstance(self.obj, NNModuleVariable):
                    return MethodOfVariable(self.obj.call_forward)
                if isinstance(attr, types.FunctionType):
                    return UserFunctionVariable(attr, self_var=self.obj)
                if klass is object and name == "__init__":  # object.__init__() does nothing
                    return BuiltinVariable(_do_nothing)
                if klass in (dict, list, tuple) and name in _PURE_CONTAINER_METHODS:
                    return PureMethodVariable(attr, self.obj)
                break
        raise Unsupported(f"reading super().{name}")


# Methods of the builtin containers that only read: on an object known at capture time (a
# registry that subclasses dict), calling them for real is as good as reading an attribute.
_PURE_CONTAINER_METHODS = {"get", "keys", "values", "items", "__getitem__", "__contains__", "__len__",
                           "copy", "index", "count"}


class MethodOfVariable(Variable):
    """A capture-time method standing for a Python one (super().__call__ of a module: its forward)."""

    def __init__(self, method: Callable[[Tracer, list[Variable], dict[str, Variable]], Variable]) -> None:
        self.method = method

    def call(self, tx: Tracer, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return self.method(tx, args, kwargs)


def _do_nothing(*args: Any, **kwargs: Any) -> None:
    return None


# Mappings whose reads are read for real (the environment is read when the graph is made)
_READ_ONLY_MAPPINGS = (type(os.environ), types.MappingProxyType)


class PureMethodVariable(Variable):
    """A builtin container's read-only method bound to an object known at capture time:
    calling it calls the real method and tracks the result."""

    def __init__(self, method: Any, obj: Variable) -> None:
        self.method, self.obj = method, obj

    def describe(self) -> str:
        return f"the method {self.method.__qualname__} of {self.obj.describe()}"

    def call(self, tx: Tracer, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        real_args = [a.as_python() for a in args]
        real_kwargs = {k: v.as_python() for k, v in kwargs.items()}
        return tx.state.wrap(self.method(self.obj.as_python(), *real_args, **real_kwargs), None)


class PythonModuleVariable(Variable):
    """`torch`, `math`, `F`, or a user's helper module, used as a namespace."""

    def __init__(self, module: types.ModuleType) -> None:
        self.module = module

    def python_type(self) -> type:
        return types.ModuleType

    def describe(self) -> str:
        return f"the module {self.module.__name__}"

    def as_python(self) -> Any:
        return self.module

    def getattr(self, tx: Tracer, name: str) -> Variable:
        if not hasattr(self.module, name):
            raise Unsupported(f"module {self.module.__name__} has no attribute {name!r}")
        value = getattr(self.module, name)
        if self.module.__name__.split(".")[0] in _LIBRARIES:
            return tx.state.wrap(value, None)  # library contents do not change between calls
        return tx.state.wrap(value, fixed_source(self.module, self.module.__name__).attr(name))


class NNModuleVariable(ObjectVariable):
    """An nn.Module: parameters and buffers become graph inputs, submodules more modules.
    Calling a built-in module maps it to its functional form (`nn.Linear` -> `F.linear`);
    calling any other module inlines its `forward`."""

    value: nn.Module

    def getattr(self, tx: Tracer, name: str) -> Variable:
        for table in ("_parameters", "_buffers", "_modules"):
            members = getattr(self.value, table)
            if name in members:
                source = self.source.module_member(table, name) if self.source else None
                return tx.state.wrap(members[name], source)
        if name in ("children", "named_children") and getattr(type(self.value), name) is getattr(nn.Module, name):
            return ChildrenVariable(self, named=name == "named_children")  # (torch's own: a set inside)
        return super().getattr(tx, name)

    def call(self, tx: Tracer, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        module = self.value
        check_no_hooks(module, str(self.source))
        lowering = MODULE_LOWERINGS.get(type(module))
        if lowering is not None:
            return lowering(tx, self, *args, **kwargs)
        if "forward" in module.__dict__:
            raise Unsupported(f"{self.describe()} replaces forward")
        call = inspect.getattr_static(type(module), "__call__")
        if call is not nn.Module.__call__:  # a class's own __call__ (it may call super().__call__())
            if not isinstance(call, types.FunctionType):
                raise Unsupported(f"{self.describe()} replaces __call__")
            return UserFunctionVariable(call, self_var=self).call(tx, args, kwargs)
        return self.call_forward(tx, args, kwargs)

    def setattr(self, tx: Tracer, name: str, value: Variable) -> None:
        # `self.shift_size = 0` in a forward (Swin's): a plain attribute, written after the graph
        members = (*self.value._parameters, *self.value._buffers, *self.value._modules, "training")
        if (name in members or isinstance(value, NNModuleVariable) or value.has_tensor()
                or hasattr(inspect.getattr_static(type(self.value), name, None), "__set__")):
            Variable.setattr(self, tx, name, value)
        tx.state.side_effects.record_write(self.value, name, value)

    def call_forward(self, tx: Tracer, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        """What nn.Module.__call__ does without hooks: run forward."""
        return UserFunctionVariable(type(self.value).forward, self_var=self).call(tx, args, kwargs)

    def children(self) -> list[tuple[str, nn.Module]]:
        if not isinstance(self.value, (nn.Sequential, nn.ModuleList, nn.ModuleDict)):
            raise Unsupported(f"iterating over {self.describe()}")
        return list(self.value._modules.items())

    def iterate(self, tx: Tracer) -> list[Variable]:
        if isinstance(self.value, nn.ModuleDict):
            return [ConstantVariable(name) for name, _ in self.children()]
        return [self.getattr(tx, name) for name, _ in self.children()]

    def length(self) -> int:
        return len(self.children())

    def getitem(self, tx: Tracer, key: Variable) -> Variable:
        names = [name for name, _ in self.children()]
        k = key.as_python()
        if isinstance(self.value, nn.ModuleDict):
            return self.getattr(tx, k)
        if isinstance(k, slice):  # layers[:n]: the submodules, for a loop (not a new ModuleList object)
            return TupleVariable([self.getattr(tx, name) for name in names[k]])
        if not isinstance(k, int) or not -len(names) <= k < len(names):
            raise Unsupported(f"indexing {self.describe()} with {key.describe()}")
        return self.getattr(tx, names[k])


# torch functions written in Python with torch ops, read by capture as user code is: then the ops
# they call are lowered one by one (torch.signal.windows.hann is a cosine of an arange)
TRACED_TORCH_MODULES = ("torch.signal.windows",)
# and single such functions: one that calls a function the user gave (triplet_margin_with_distance_loss's
# `distance_function`, which capture then inlines too), and nn.MultiheadAttention's general path (its
# attention is then the ops it is made of: projections, scaled_dot_product_attention, ...). The
# private helpers of torch.nn.functional such code calls (`_canonical_mask`, `_in_projection_packed`,
# `_check_key_padding_mask`, ...) are read too: they check and reshape arguments, or return None.
TRACED_TORCH_FUNCTIONS = frozenset({torch.nn.functional.triplet_margin_with_distance_loss,
                                    torch.nn.functional.multi_head_attention_forward})


def _private_functional_helper(value: Any, module: str) -> bool:
    # (F.threshold is named `_threshold` too, but capture lowers it: a lowering wins)
    return (module == "torch.nn.functional" and value.__name__.startswith("_")
            and isinstance(value, types.FunctionType) and value not in TORCH_FUNCTIONS)


def is_torch_function(value: Any) -> bool:
    """torch.cos, F.gelu, torch.nn.functional.layer_norm, torch.special.erf, ..."""
    if not isinstance(value, (types.FunctionType, types.BuiltinFunctionType)):
        return False
    module = getattr(value, "__module__", None) or ""
    if module.startswith("torch.testing") and value.__name__ == "<lambda>":
        return False  # OpInfo's `lambda x: x.double()` is plain Python naming a method: capture reads it
    if module.startswith(TRACED_TORCH_MODULES) or value in TRACED_TORCH_FUNCTIONS or _private_functional_helper(
            value, module):
        return False
    return module == "torch" or (module.startswith("torch.") and not module.startswith("torch.nn.modules"))
