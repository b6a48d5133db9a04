"""What captured code does to the world outside the graph, made again after each run of the graph.

Two kinds of effect, kept in program order (TorchDynamo's SideEffects and its reorderable
logging calls, in miniature):

- `self.compiling = True` on an object from outside the function (a library's global state):
  capture records the write (later reads in the same capture see the new value), and the
  runtime makes it after the graph. The last write to an attribute is the one made.
- calls made only for their effect: `logger.warning(...)`, transformers' `logger.warning_once(...)`,
  `logging.info(...)`, `warnings.warn(...)`. They return None and nothing in the function reads
  what they did, so capture records the call with its (capture-time) arguments instead of
  breaking the graph, and the runtime makes the real call after the graph: the logger's level,
  handlers and `warning_once`'s cache decide then, as they would have in eager.
"""

from __future__ import annotations

import functools
import itertools
import logging
import warnings
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from minicompiler.capture.errors import Unsupported
from minicompiler.capture.variables import ConstantVariable, Variable, python_values

if TYPE_CHECKING:
    from minicompiler.capture.frame import Frame, Tracer

Effect = Callable[[], object]  # one effect, made by calling it

# Logger methods that answer a question: the only ones whose result the code may use
_LOGGER_QUERIES = {"isEnabledFor", "getEffectiveLevel", "getChild", "getChildren", "hasHandlers", "findCaller",
                   "makeRecord", "filter", "handle", "callHandlers"}
# logging's module-level functions that log to the root logger
LOGGING_FUNCTIONS = (logging.debug, logging.info, logging.warning, logging.error, logging.exception,
                     logging.critical, logging.log)


@dataclass
class SideEffects:
    """Attribute writes and effect-only calls, in program order."""

    _effects: dict[Any, tuple[Any, ...]] = field(default_factory=dict)  # key -> effect, insertion ordered
    _calls: itertools.count = field(default_factory=itertools.count)

    def record_write(self, obj: Any, name: str, value: Variable) -> None:
        if value.has_tensor():
            raise Unsupported(f"storing a tensor in the attribute .{name} of an object from outside")
        self._effects.pop((id(obj), name), None)  # the last write wins, and goes last
        self._effects[(id(obj), name)] = ("write", obj, name, value)

    def lookup(self, obj: Any, name: str) -> Variable | None:
        write = self._effects.get((id(obj), name))
        return write[3] if write is not None else None

    def record_call(self, what: str, fn: Callable[..., Any], args: list[Variable],
                    kwargs: dict[str, Variable]) -> Variable:
        """`fn(*args, **kwargs)`, made after the graph; its result (None) is what the code sees."""
        if any(v.has_tensor() for v in [*args, *kwargs.values()]):
            raise Unsupported(f"{what} is given a tensor (its value exists only once the graph has run)")
        self._effects[("call", next(self._calls))] = ("call", fn, python_values(args), python_values(kwargs))
        return ConstantVariable(None)

    def final_effects(self) -> list[Effect]:
        """The effects to make after each run of the graph, in order."""
        effects: list[Effect] = []
        for kind, *rest in self._effects.values():
            if kind == "call":
                fn, args, kwargs = rest
                effects.append(functools.partial(fn, *args, **kwargs))
                continue
            obj, name, value = rest
            if value.has_tensor():  # a container stored earlier that received a tensor later
                raise Unsupported(f"the attribute .{name} of an object from outside ends up holding a tensor")
            effects.append(functools.partial(setattr, obj, name, value.as_python()))
        return effects


def replay(effects: list[Effect]) -> None:
    for effect in effects:
        effect()


# -- effect-only calls -----------------------------------------------------------------------------
def is_logger_effect(obj: Any, name: str) -> bool:
    """Is `obj.name(...)` a logging call (a Logger method other than a question)? Methods that
    libraries add to Logger (transformers' warning_once) count too."""
    return isinstance(obj, logging.Logger) and name not in _LOGGER_QUERIES and not name.startswith("_")


class DeferredCallVariable(Variable):
    """A callable whose calls are recorded and made after the graph (see the module docstring)."""

    def __init__(self, fn: Callable[..., Any], what: str) -> None:
        self.fn, self.what = fn, what

    def describe(self) -> str:
        return self.what

    def call(self, tx: Tracer, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        return tx.state.side_effects.record_call(f"{self.what}()", self.fn, args, kwargs)


def warn(tx: Tracer, message: Variable, category: Variable | None = None, stacklevel: Variable | None = None,
         source: Variable | None = None) -> Variable:
    """`warnings.warn(...)`, made after the graph with `warn_explicit` at the place eager would name
    (the line `stacklevel` frames up; capture knows its inlined frames, the outermost one at most)."""
    frame = _frame_up(tx, 1 if stacklevel is None else stacklevel.as_python())
    index = max(frame.ip - 1, 0)  # the CALL running now (in a caller: the call that led here)
    lineno = frame.instructions[index].positions.lineno or frame.code.co_firstlineno
    f_globals = frame.f_globals
    registry = f_globals.setdefault("__warningregistry__", {})
    kind = ConstantVariable(UserWarning) if category is None or category.as_python() is None else category
    arguments = [message, kind, ConstantVariable(frame.code.co_filename), ConstantVariable(lineno),
                 ConstantVariable(f_globals.get("__name__", "<string>")), ConstantVariable(registry),
                 ConstantVariable(f_globals)]
    extra = {} if source is None else {"source": source}
    return tx.state.side_effects.record_call("warnings.warn()", warnings.warn_explicit, arguments, extra)


def _frame_up(tx: Tracer, levels: int) -> Frame:
    frame = tx
    for _ in range(levels - 1):
        if getattr(frame, "caller", None) is None:
            break
        frame = frame.caller
    return frame  # type: ignore[return-value]
