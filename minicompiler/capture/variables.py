"""The values the translator tracks, one small class per family (TorchDynamo's VariableTrackers).

The symbolic interpreter never holds real tensors: its stack and locals hold `Variable`s.
This file has the plain-Python families: constants, tuples/lists/dicts, iterators, closure
cells and the NULL marker the CALL convention needs. Tensors are in `tensor.py`;
functions, modules and other objects in `objects.py`.

Each family answers the questions the opcodes ask (`getattr`, `call`, `iterate`, `getitem`,
`truth`, ...); the base class answers "unsupported" with a reason that names the value.
"""

from __future__ import annotations

import types
from typing import TYPE_CHECKING, Any

import torch

from minicompiler.capture.errors import Unsupported
from minicompiler.capture.sources import Source
from minicompiler.ir.printer import format_value
from minicompiler.ir.symbolic import SymSize, is_symbolic

if TYPE_CHECKING:
    from minicompiler.capture.frame import Tracer

_CONSTANT_TYPES = (
    type(None), bool, int, float, complex, str, bytes, torch.dtype, torch.device, torch.Size,
    torch.layout, torch.memory_format, range, slice, type(Ellipsis), type(NotImplemented), types.CodeType,
    SymSize,  # a symbolic size (x.shape[1] with dynamic shapes): Python arithmetic on it stays symbolic
)


def is_constant(value: Any) -> bool:
    """Immutable values known at capture time: they can be folded and baked into the graph."""
    if type(value) in (tuple, frozenset):
        return all(is_constant(v) for v in value)
    return isinstance(value, _CONSTANT_TYPES)


class Variable:
    """A Python value as the translator sees it."""

    source: Source | None = None  # where to re-read it on the next call, when it came from outside

    def python_type(self) -> type:
        return object

    def describe(self) -> str:
        return f"a {self.python_type().__name__}"

    def as_python(self) -> Any:
        """The real Python value, for values known at capture time."""
        raise Unsupported(f"{self.describe()} has no value at capture time")

    def has_tensor(self) -> bool:
        return False

    def truth(self) -> bool:
        return True  # objects are truthy unless their family says otherwise

    def length(self) -> int:
        raise Unsupported(f"len() of {self.describe()}")

    def getattr(self, tx: Tracer, name: str) -> Variable:
        raise Unsupported(f"reading `.{name}` of {self.describe()}")

    def call(self, tx: Tracer, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        raise Unsupported(f"calling {self.describe()}")

    def setattr(self, tx: Tracer, name: str, value: Variable) -> None:
        raise Unsupported(f"assigning the attribute .{name} of {self.describe()} (a side effect on an object)")

    def call_method(self, tx: Tracer, name: str, args: list[Variable],
                    kwargs: dict[str, Variable]) -> Variable:
        raise Unsupported(f"calling `.{name}()` on {self.describe()}")

    def iterate(self, tx: Tracer) -> list[Variable]:
        raise Unsupported(f"iterating over {self.describe()}")

    def getitem(self, tx: Tracer, key: Variable) -> Variable:
        raise Unsupported(f"indexing {self.describe()}")


class NullVariable(Variable):
    """The NULL that CALL's stack convention puts beside a callable (PUSH_NULL)."""

    def describe(self) -> str:
        return "NULL"


NULL = NullVariable()


class ConstantVariable(Variable):
    """None, numbers, strings, dtypes, torch.Size, slices, ...: folded at capture time."""

    def __init__(self, value: Any) -> None:
        self.value = value

    def python_type(self) -> type:
        return type(self.value)

    def describe(self) -> str:
        text = format_value(self.value) if is_symbolic(self.value) else repr(self.value)  # sizes as `s0`
        return text if len(text) < 40 else f"a {type(self.value).__name__}"

    def as_python(self) -> Any:
        return self.value

    def truth(self) -> bool:
        return bool(self.value)

    def length(self) -> int:
        return len(self.value)

    def getattr(self, tx: Tracer, name: str) -> Variable:
        if not hasattr(self.value, name):
            raise Unsupported(f"{self.describe()} has no attribute {name!r}")
        attr = getattr(self.value, name)
        if is_constant(attr):
            return ConstantVariable(attr)
        if callable(attr):
            return MethodVariable(self, name)
        raise Unsupported(f"reading `.{name}` of {self.describe()}")

    def call_method(self, tx: Tracer, name: str, args: list[Variable],
                    kwargs: dict[str, Variable]) -> Variable:
        # Constants are immutable, so their methods (str.format, torch.Size.numel) are pure.
        result = getattr(self.value, name)(*python_values(args), **python_values(kwargs))
        return constant(result)

    def iterate(self, tx: Tracer) -> list[Variable]:
        return [ConstantVariable(v) for v in self.value]

    def getitem(self, tx: Tracer, key: Variable) -> Variable:
        return constant(self.value[key.as_python()])


def constant(value: Any) -> Variable:
    """A Variable for a value computed at capture time (by folding, or a pure call)."""
    if type(value) is list:  # "a,b".split(","), sorted(...)
        return ListVariable([constant(v) for v in value])
    if type(value) is dict:
        return DictVariable({k: constant(v) for k, v in value.items()})
    if not is_constant(value):
        raise Unsupported(f"a {type(value).__name__} value cannot be tracked as a constant")
    return ConstantVariable(value)


def python_values(values: Any) -> Any:
    """`as_python()` of every Variable in a list or dict."""
    if isinstance(values, dict):
        return {k: v.as_python() for k, v in values.items()}
    return [v.as_python() for v in values]


class MethodVariable(Variable):
    """`obj.name` where `name` is a method: calling it asks `obj` to run the method."""

    def __init__(self, obj: Variable, name: str) -> None:
        self.obj, self.name = obj, name

    def describe(self) -> str:
        return f"the method .{self.name}() of {self.obj.describe()}"

    def call(self, tx: Tracer, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return self.obj.call_method(tx, self.name, args, kwargs)


class SequenceVariable(Variable):
    """What tuples and lists share: indexing, iterating, len, truth."""

    def __init__(self, items: list[Variable], source: Source | None = None) -> None:
        self.items, self.source = list(items), source

    def as_python(self) -> Any:
        return self.python_type()(python_values(self.items))

    def has_tensor(self) -> bool:
        return any(item.has_tensor() for item in self.items)

    def truth(self) -> bool:
        return bool(self.items)

    def length(self) -> int:
        return len(self.items)

    def iterate(self, tx: Tracer) -> list[Variable]:
        return list(self.items)

    def getitem(self, tx: Tracer, key: Variable) -> Variable:
        index = key.as_python()
        if isinstance(index, slice):
            return type(self)(self.items[index])
        try:
            return self.items[index]
        except (IndexError, TypeError) as e:
            raise Unsupported(f"indexing {self.describe()} with {key.describe()}: {e}") from e

    def getattr(self, tx: Tracer, name: str) -> Variable:
        if name in ("index", "count"):
            return MethodVariable(self, name)
        return super().getattr(tx, name)

    def call_method(self, tx: Tracer, name: str, args: list[Variable],
                    kwargs: dict[str, Variable]) -> Variable:
        return constant(getattr(self.as_python(), name)(*python_values(args)))


class TupleVariable(SequenceVariable):
    """A tuple; `names` makes it a named tuple (torch.max(x, dim).values)."""

    def __init__(self, items: list[Variable], source: Source | None = None,
                 names: tuple[str, ...] | None = None) -> None:
        super().__init__(items, source)
        self.names = names

    def python_type(self) -> type:
        return tuple

    def getattr(self, tx: Tracer, name: str) -> Variable:
        if self.names is not None and name in self.names:
            return self.items[self.names.index(name)]
        return super().getattr(tx, name)


class ListVariable(SequenceVariable):
    """A list. Lists made inside the function may be changed; lists passed in may not
    (the change would be a side effect the graph cannot replay)."""

    def python_type(self) -> type:
        return list

    def check_mutable(self) -> None:
        if self.source is not None:
            raise Unsupported(f"changing the list {self.source} that was passed in (a side effect)")

    def getattr(self, tx: Tracer, name: str) -> Variable:
        if name in ("append", "extend", "insert", "pop", "reverse", "copy"):
            return MethodVariable(self, name)
        return super().getattr(tx, name)

    def call_method(self, tx: Tracer, name: str, args: list[Variable],
                    kwargs: dict[str, Variable]) -> Variable:
        if name in ("index", "count"):
            return super().call_method(tx, name, args, kwargs)
        if name == "copy":
            return ListVariable(self.items)
        self.check_mutable()
        if name == "append":
            self.items.append(args[0])
        elif name == "extend":
            self.items.extend(args[0].iterate(tx))
        elif name == "insert":
            self.items.insert(args[0].as_python(), args[1])
        elif name == "reverse":
            self.items.reverse()
        elif name == "pop":
            return self.items.pop(*python_values(args))
        return ConstantVariable(None)

    def setitem(self, key: Variable, value: Variable) -> None:
        self.check_mutable()
        self.items[key.as_python()] = value


class DictVariable(Variable):
    """A dict with constant keys (strings, ints) and tracked values."""

    def __init__(self, items: dict[Any, Variable], source: Source | None = None) -> None:
        self.items, self.source = dict(items), source

    def python_type(self) -> type:
        return dict

    def as_python(self) -> Any:
        return python_values(self.items)

    def has_tensor(self) -> bool:
        return any(v.has_tensor() for v in self.items.values())

    def truth(self) -> bool:
        return bool(self.items)

    def length(self) -> int:
        return len(self.items)

    def iterate(self, tx: Tracer) -> list[Variable]:
        return [ConstantVariable(k) for k in self.items]

    default_factory: Variable | None = None  # set for a collections.defaultdict

    def getitem(self, tx: Tracer, key: Variable) -> Variable:
        k = key.as_python()
        if k not in self.items and self.default_factory is not None:  # defaultdict: made and kept
            self.setitem(key, self.default_factory.call(tx, [], {}))
        if k not in self.items:
            raise Unsupported(f"the key {k!r} is not in the dict")
        return self.items[k]

    def setitem(self, key: Variable, value: Variable) -> None:
        self.check_mutable()
        self.items[key.as_python()] = value

    def check_mutable(self) -> None:
        if self.source is not None:
            raise Unsupported(f"changing the dict {self.source} that was passed in (a side effect)")

    _READERS = ("keys", "values", "items", "get", "copy", "__contains__", "__getitem__")
    _WRITERS = ("pop", "setdefault", "update", "clear", "popitem", "__setitem__")

    def getattr(self, tx: Tracer, name: str) -> Variable:
        if name in self._READERS or name in self._WRITERS:
            return MethodVariable(self, name)
        return super().getattr(tx, name)

    def call_method(self, tx: Tracer, name: str, args: list[Variable],
                    kwargs: dict[str, Variable]) -> Variable:
        # The dict's own methods, run on its items (Variables) with constant keys.
        if name in self._WRITERS:
            self.check_mutable()
        # the key, for the methods that take one (update's argument is a dict, with tensors perhaps)
        keys = [a.as_python() for a in args[:1]] if name in ("__contains__", "get", "pop", "setdefault") else []
        if name == "keys":
            return TupleVariable(self.iterate(tx))
        if name == "values":
            return TupleVariable(list(self.items.values()))
        if name == "items":
            return TupleVariable([TupleVariable([ConstantVariable(k), v]) for k, v in self.items.items()])
        if name == "copy":
            return DictVariable(self.items)
        if name == "__contains__":
            return ConstantVariable(keys[0] in self.items)
        if name == "__getitem__":
            return self.getitem(tx, args[0])
        if name == "__setitem__":
            self.setitem(args[0], args[1])
        elif name in ("get", "pop", "setdefault"):
            if name == "pop" and len(args) == 1 and keys[0] not in self.items:
                raise Unsupported(f"dict.pop of the missing key {keys[0]!r} (a KeyError)")
            default = args[1] if len(args) > 1 else ConstantVariable(None)
            return getattr(self.items, name)(keys[0], default)
        elif name == "update":
            other = args[0].items if args and isinstance(args[0], DictVariable) else {}
            if args and not isinstance(args[0], DictVariable):
                other = {k.as_python(): v for k, v in (pair.iterate(tx) for pair in args[0].iterate(tx))}
            self.items.update(other, **kwargs)
        elif name == "clear":
            self.items.clear()
        elif name == "popitem":
            k, v = self.items.popitem()
            return TupleVariable([ConstantVariable(k), v])
        return ConstantVariable(None)


class IteratorVariable(Variable):
    """What GET_ITER makes: the items are all known up front (loops are unrolled)."""

    def __init__(self, items: list[Variable]) -> None:
        self.items, self.position = items, 0

    def next_item(self) -> Variable | None:
        if self.position == len(self.items):
            return None
        self.position += 1
        return self.items[self.position - 1]

    def iterate(self, tx: Tracer) -> list[Variable]:
        rest, self.position = self.items[self.position:], len(self.items)
        return rest


class CellVariable(Variable):
    """A closure cell. Cells made by the captured code hold a Variable; cells of functions
    defined outside hold a real value, read (and guarded) the first time it is used."""

    def __init__(self, content: Variable | None = None, real_cell: Any = None,
                 source: Source | None = None) -> None:
        self.content, self.real_cell, self.source = content, real_cell, source

    def load(self, tx: Tracer) -> Variable:
        if self.content is None and self.real_cell is not None:
            try:
                value = self.real_cell.cell_contents
            except ValueError:
                raise Unsupported(f"the closure variable {self.source} is not set yet") from None
            self.content = tx.state.wrap(value, self.source)
        if self.content is None:
            raise Unsupported("a closure variable is read before it is assigned")
        return self.content

    def store(self, value: Variable) -> None:
        if self.real_cell is not None:
            raise Unsupported(f"assigning to {self.source}, a variable of an outer function (a side effect)")
        self.content = value


class PartialVariable(Variable):
    """A `functools.partial` made outside the captured code (Hugging Face's tanh GELU is
    `partial(F.gelu, approximate="tanh")`): calling it calls its function with its own arguments
    first, as Python does. The partial is guarded by identity, its parts as any value."""

    def __init__(self, fn: Variable, args: list[Variable], kwargs: dict[str, Variable], value: Any) -> None:
        self.fn, self.args, self.kwargs, self.value = fn, args, kwargs, value

    def python_type(self) -> type:
        return type(self.value)

    def describe(self) -> str:
        return f"a functools.partial of {self.fn.describe()}"

    def as_python(self) -> Any:
        return self.value

    def call(self, tx: Tracer, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return self.fn.call(tx, [*self.args, *args], {**self.kwargs, **kwargs})
