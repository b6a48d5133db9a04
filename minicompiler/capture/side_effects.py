"""Attribute writes on objects that outlive the call, replayed after the graph runs.

`self.compiling = True` on an object from outside the function (a library's global state) is a
side effect the graph cannot hold. Capture records the write instead (later reads in the same
capture see the new value) and the runtime makes the same writes, in order, after each run of the
graph — TorchDynamo's SideEffects, for attributes whose values are plain Python.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from minicompiler.capture.errors import Unsupported
from minicompiler.capture.variables import Variable


@dataclass
class AttributeWrites:
    """obj.name = value, for objects known at capture time, in program order."""

    writes: dict[tuple[int, str], tuple[Any, str, Variable]] = field(default_factory=dict)

    def record(self, obj: Any, name: str, value: Variable) -> None:
        if value.has_tensor():
            raise Unsupported(f"storing a tensor in the attribute .{name} of an object from outside")
        self.writes.pop((id(obj), name), None)  # the last write wins, and goes last
        self.writes[(id(obj), name)] = (obj, name, value)

    def lookup(self, obj: Any, name: str) -> Variable | None:
        write = self.writes.get((id(obj), name))
        return write[2] if write is not None else None

    def final_values(self) -> list[tuple[Any, str, Any]]:
        """(object, attribute, value) to set after each run of the graph."""
        replay = []
        for obj, name, value in self.writes.values():
            if value.has_tensor():  # a container stored earlier that received a tensor later
                raise Unsupported(f"the attribute .{name} of an object from outside ends up holding a tensor")
            replay.append((obj, name, value.as_python()))
        return replay


def replay(writes: list[tuple[Any, str, Any]]) -> None:
    for obj, name, value in writes:
        setattr(obj, name, value)
