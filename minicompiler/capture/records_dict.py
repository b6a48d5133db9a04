"""Dataclasses that are also ordered dicts, made inside the captured code (Hugging Face's ModelOutput).

`BaseModelOutput(last_hidden_state=h, pooler_output=p)` is a dataclass whose fields are also
its dict items (the fields that are not None, in field order) and, through `to_tuple()` and
integer indexing, a tuple. Its `__post_init__` walks its own fields with dict machinery; capture
models the result instead of stepping through it (as TorchDynamo does): the fields are tracked
Variables, the object is rebuilt after the graph by calling the class with them.
"""

from __future__ import annotations

import dataclasses
import inspect
from typing import TYPE_CHECKING, Any

from minicompiler.capture.errors import Unsupported
from minicompiler.capture.variables import ConstantVariable, MethodVariable, TupleVariable, Variable

if TYPE_CHECKING:
    from minicompiler.capture.frame import Tracer


def is_dataclass_dict(cls: Any) -> bool:
    """A dataclass type that subclasses dict and reads as a tuple too (ModelOutput's protocol)."""
    return (isinstance(cls, type) and dataclasses.is_dataclass(cls) and issubclass(cls, dict)
            and callable(getattr(cls, "to_tuple", None)))


class DataclassDictVariable(Variable):
    """An instance of a dataclass-dict made by the captured code: fields by name, items by key."""

    def __init__(self, cls: type, fields: dict[str, Variable]) -> None:
        self.cls, self.fields = cls, fields

    @staticmethod
    def create(cls: type, args: list[Variable], kwargs: dict[str, Variable]) -> DataclassDictVariable:
        try:
            bound = inspect.signature(cls).bind(*args, **kwargs)
        except TypeError as e:
            raise Unsupported(f"creating a {cls.__name__}: {e}") from e
        bound.apply_defaults()
        fields = {name: v if isinstance(v, Variable) else ConstantVariable(v) for name, v in bound.arguments.items()}
        names = list(fields)
        if len(names) > 1 and all(_is_none(fields[n]) for n in names[1:]) and not fields[names[0]].has_tensor():
            # ModelOutput reads a lone first field that is a dict or an iterator as the items themselves
            raise Unsupported(f"creating a {cls.__name__} from one non-tensor value")
        return DataclassDictVariable(cls, fields)

    def python_type(self) -> type:
        return self.cls

    def describe(self) -> str:
        return f"a {self.cls.__name__}"

    def has_tensor(self) -> bool:
        return any(v.has_tensor() for v in self.fields.values())

    def keys(self) -> list[str]:
        return [name for name, v in self.fields.items() if not _is_none(v)]

    def truth(self) -> bool:
        return bool(self.keys())

    def length(self) -> int:
        return len(self.keys())

    def iterate(self, tx: Tracer) -> list[Variable]:
        return [ConstantVariable(k) for k in self.keys()]

    def to_tuple(self) -> TupleVariable:
        return TupleVariable([self.fields[k] for k in self.keys()])

    def getattr(self, tx: Tracer, name: str) -> Variable:
        if name in self.fields:
            return self.fields[name]
        if name in ("to_tuple", "keys", "values", "items", "get", "__contains__"):
            return MethodVariable(self, name)
        raise Unsupported(f"reading `.{name}` of {self.describe()}")

    def getitem(self, tx: Tracer, key: Variable) -> Variable:
        k = key.as_python()
        if isinstance(k, str):
            if k not in self.keys():
                raise Unsupported(f"the key {k!r} is not in {self.describe()}")
            return self.fields[k]
        return self.to_tuple().getitem(tx, key)

    def call_method(self, tx: Tracer, name: str, args: list[Variable],
                    kwargs: dict[str, Variable]) -> Variable:
        keys = self.keys()
        if name == "to_tuple" or name == "values":
            return self.to_tuple()
        if name == "keys":
            return TupleVariable([ConstantVariable(k) for k in keys])
        if name == "items":
            return TupleVariable([TupleVariable([ConstantVariable(k), self.fields[k]]) for k in keys])
        if name == "__contains__":
            return ConstantVariable(args[0].as_python() in keys)
        key = args[0].as_python()  # get(key, default=None)
        return self.fields[key] if key in keys else (args[1] if len(args) > 1 else ConstantVariable(None))

    def setitem(self, key: Variable, value: Variable) -> None:
        self._set(key.as_python(), value)

    def setattr(self, tx: Tracer, name: str, value: Variable) -> None:
        self._set(name, value)

    def _set(self, name: Any, value: Variable) -> None:
        if name not in self.fields:  # ModelOutput allows only its fields
            raise Unsupported(f"setting {name!r}, not a field of {self.describe()}")
        self.fields[name] = value


def _is_none(var: Variable) -> bool:
    return isinstance(var, ConstantVariable) and var.value is None

