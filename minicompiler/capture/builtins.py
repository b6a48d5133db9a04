"""Python builtins (`len`, `range`, `isinstance`, `zip`, `min`, ...) and pure library functions.

Builtins that look at containers or tensors have a handler here. Pure functions of
constants (`math.sqrt`, `int`, `round`, `operator.mul`, ...) just run at capture time.
Builtins with side effects (`print`, `open`, `setattr`) are not in these tables, so calling
them is Unsupported; logging and `warnings.warn` are made after the graph (side_effects.py).
"""

from __future__ import annotations

import builtins
import collections
import functools
import inspect
import warnings
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch

from minicompiler.capture import side_effects
from minicompiler.capture.checkpoint import checkpoint, checkpoint_sequential
from minicompiler.capture.errors import Unsupported
from minicompiler.capture.grad_mode import GradModeVariable
from minicompiler.capture.operators import binary_op, fold
from minicompiler.capture.tensor import TensorVariable, call_torch_function
from minicompiler.capture.user_objects import UserObjectVariable
from minicompiler.capture.variables import (
    ConstantVariable,
    DictVariable,
    ListVariable,
    TupleVariable,
    Variable,
    constant,
    python_values,
)

if TYPE_CHECKING:
    from minicompiler.capture.frame import Tracer

Handler = Callable[..., Variable]
HANDLERS: dict[Callable[..., Any], Handler] = {}

# Run for real when every argument is a constant.
PURE_BUILTINS = {
    builtins.abs, builtins.bool, builtins.chr, builtins.divmod, builtins.float,
    builtins.format, builtins.int, builtins.max, builtins.min, builtins.ord, builtins.pow, builtins.repr,
    builtins.round, builtins.sorted, builtins.str, builtins.sum, builtins.hash,
}
PURE_MODULES = ("math", "_operator")  # math.sqrt, operator.mul, ...


def handles(*fns: Callable[..., Any]) -> Callable[[Handler], Handler]:
    def register(handler: Handler) -> Handler:
        for fn in fns:
            HANDLERS[fn] = handler
        return handler

    return register


def is_builtin(value: Any) -> bool:
    try:
        if value in HANDLERS or value in PURE_BUILTINS:
            return True
    except TypeError:  # unhashable
        return False
    return callable(value) and getattr(value, "__module__", None) in PURE_MODULES


def call_builtin(tx: Tracer, fn: Callable[..., Any], args: list[Variable],
                 kwargs: dict[str, Variable]) -> Variable:
    if fn in HANDLERS:
        try:
            return HANDLERS[fn](tx, *args, **kwargs)
        except TypeError as e:  # arguments the builtin does not take
            raise Unsupported(f"{getattr(fn, '__name__', fn)}(): {e}") from e
    name = getattr(fn, "__name__", repr(fn))
    if any(v.has_tensor() for v in [*args, *kwargs.values()]):
        raise Unsupported(f"{name}() of a tensor reads the tensor's value")
    if kwargs:
        return fold(functools.partial(fn, **python_values(kwargs)), *args)
    return fold(fn, *args)


@handles(builtins.len)
def _len(tx: Tracer, obj: Variable) -> Variable:
    if isinstance(obj, UserObjectVariable):  # its class's own __len__, inlined
        return obj.call_method(tx, "__len__", [], {})
    return ConstantVariable(obj.length())


@handles(builtins.isinstance)
def _isinstance(tx: Tracer, obj: Variable, classinfo: Variable) -> Variable:
    return ConstantVariable(issubclass(obj.python_type(), classinfo.as_python()))


@handles(builtins.type)
def _type(tx: Tracer, obj: Variable) -> Variable:
    # type(x) with one argument (three arguments would make a class: not handled)
    return tx.state.wrap(obj.python_type(), None)


@handles(inspect.signature)
def _signature(tx: Tracer, fn: Variable, **options: Variable) -> Variable:
    # a function's signature is fixed once it exists: computed for real (inspect's own code
    # builds partial objects and caches, which capture need not step through)
    return tx.state.wrap(inspect.signature(fn.as_python(), **python_values(options)), None)


@handles(builtins.callable)
def _callable(tx: Tracer, obj: Variable) -> Variable:
    if obj.has_tensor():
        return ConstantVariable(False)
    return ConstantVariable(callable(obj.as_python()))


@handles(builtins.all)
def _all(tx: Tracer, iterable: Variable) -> Variable:
    # items one by one (a generator expression's too); a tensor's truth breaks as in `if`
    return ConstantVariable(all(item.truth() for item in iterable.iterate(tx)))


@handles(builtins.any)
def _any(tx: Tracer, iterable: Variable) -> Variable:
    return ConstantVariable(any(item.truth() for item in iterable.iterate(tx)))


@handles(collections.defaultdict)
def _defaultdict(tx: Tracer, factory: Variable | None = None, mapping: Variable | None = None) -> Variable:
    made = _dict(tx, mapping) if mapping is not None else DictVariable({})
    made.default_factory = factory if factory is not None and factory.as_python() is not None else None
    return made


@handles(builtins.range)
def _range(tx: Tracer, *args: Variable) -> Variable:
    return ConstantVariable(range(*python_values(args)))


@handles(builtins.enumerate)
def _enumerate(tx: Tracer, iterable: Variable, start: Variable | None = None) -> Variable:
    first = start.as_python() if start is not None else 0
    return TupleVariable([TupleVariable([ConstantVariable(first + i), item])
                          for i, item in enumerate(iterable.iterate(tx))])


@handles(builtins.zip)
def _zip(tx: Tracer, *iterables: Variable, strict: Variable | None = None) -> Variable:
    columns = [it.iterate(tx) for it in iterables]
    if strict is not None and strict.as_python() and len({len(c) for c in columns}) > 1:
        raise Unsupported("zip(strict=True) of iterables of different lengths")
    groups = zip(*columns)  # noqa: B905 - Python's own zip semantics: stop at the shortest
    return TupleVariable([TupleVariable(list(group)) for group in groups])


@handles(builtins.reversed)
def _reversed(tx: Tracer, sequence: Variable) -> Variable:
    return TupleVariable(list(reversed(sequence.iterate(tx))))


@handles(builtins.list)
def _list(tx: Tracer, iterable: Variable | None = None) -> Variable:
    return ListVariable(iterable.iterate(tx) if iterable is not None else [])


@handles(builtins.tuple)
def _tuple(tx: Tracer, iterable: Variable | None = None) -> Variable:
    return TupleVariable(iterable.iterate(tx) if iterable is not None else [])


@handles(builtins.dict)
def _dict(tx: Tracer, mapping: Variable | None = None, **kwargs: Variable) -> Variable:
    if mapping is None or isinstance(mapping, DictVariable):
        items = dict(mapping.items) if mapping is not None else {}
    else:  # pairs: dict(zip(keys, values)), dict([("a", x)])
        items = {k.as_python(): v for k, v in (pair.iterate(tx) for pair in mapping.iterate(tx))}
    return DictVariable({**items, **kwargs})


@handles(builtins.getattr)
def _getattr(tx: Tracer, obj: Variable, name: Variable, *default: Variable) -> Variable:
    if default and not _hasattr(tx, obj, name).as_python():
        return default[0]
    return obj.getattr(tx, name.as_python())


@handles(builtins.hasattr)
def _hasattr(tx: Tracer, obj: Variable, name: Variable) -> Variable:
    if isinstance(obj, TensorVariable):
        return ConstantVariable(hasattr(torch.Tensor, name.as_python()))
    if isinstance(obj, UserObjectVariable):
        return ConstantVariable(obj.has_attribute(name.as_python()))
    return ConstantVariable(hasattr(obj.as_python(), name.as_python()))


@handles(builtins.sorted)
def _sorted(tx: Tracer, iterable: Variable, key: Variable | None = None,
            reverse: Variable | None = None) -> Variable:
    """sorted(d) of a dict holding tensors sorts its (constant) keys."""
    values = python_values(iterable.iterate(tx))
    fn = key.as_python() if key is not None else None
    return constant(sorted(values, key=fn, reverse=reverse.as_python() if reverse is not None else False))


@handles(builtins.abs)
def _abs(tx: Tracer, x: Variable) -> Variable:
    return call_torch_function(tx, torch.abs, [x], {}) if isinstance(x, TensorVariable) else fold(abs, x)


@handles(builtins.pow)
def _pow(tx: Tracer, x: Variable, y: Variable) -> Variable:
    return binary_op(tx, "**", x, y)


@handles(builtins.sum)
def _sum(tx: Tracer, iterable: Variable, start: Variable | None = None) -> Variable:
    total = start if start is not None else ConstantVariable(0)
    for item in iterable.iterate(tx):  # sum(losses) over tensors becomes a chain of adds
        total = binary_op(tx, "+", total, item)
    return total


@handles(builtins.print)
def _print(tx: Tracer, *args: Variable, **kwargs: Variable) -> Variable:
    raise Unsupported("print() writes output (a side effect the graph cannot replay)")


# Logging and warnings: recorded, and made after the graph (see side_effects.py)
handles(warnings.warn)(side_effects.warn)


def _logs_after_the_graph(fn: Callable[..., Any]) -> Handler:
    return lambda tx, *args, **kwargs: tx.state.side_effects.record_call(f"logging.{fn.__name__}()", fn,
                                                                         list(args), kwargs)


for _fn in side_effects.LOGGING_FUNCTIONS:
    HANDLERS[_fn] = _logs_after_the_graph(_fn)


@handles(builtins.super)
def _super(tx: Tracer, *args: Variable) -> Variable:
    from minicompiler.capture.objects import SuperVariable  # objects.py is built on this module

    if args:  # super(Class, obj)
        return SuperVariable(args[0].as_python(), args[1])
    return SuperVariable.of_frame(tx)


@handles(torch.no_grad)
def _no_grad(tx: Tracer) -> Variable:
    return GradModeVariable(enabled=False)


@handles(torch.enable_grad)
def _enable_grad(tx: Tracer) -> Variable:
    return GradModeVariable(enabled=True)


handles(torch.utils.checkpoint.checkpoint)(checkpoint)  # inlined, its region recomputed in the backward
handles(torch.utils.checkpoint.checkpoint_sequential)(checkpoint_sequential)


@handles(builtins.iter)
def _iter(tx: Tracer, iterable: Variable) -> Variable:
    return ListVariable(iterable.iterate(tx))  # iterating a list gives the same items


@handles(torch.is_tensor)
def _is_tensor(tx: Tracer, obj: Variable) -> Variable:
    return ConstantVariable(isinstance(obj, TensorVariable))


@handles(torch.Size)
def _size(tx: Tracer, sizes: Variable) -> Variable:
    return constant(torch.Size(sizes.as_python()))
