"""Undoing a failed instruction: the compiled function's frame just before an instruction, so
that a graph break can rewind it (translator.py) and the runtime run that instruction for real."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from minicompiler.capture.tensor import TensorVariable
from minicompiler.capture.variables import (
    CellVariable,
    DictVariable,
    IteratorVariable,
    ListVariable,
    TupleVariable,
    Variable,
)

if TYPE_CHECKING:
    from minicompiler.capture.frame import Frame


class FrameSnapshot:
    """A frame just before an instruction, so a break can rewind what the instruction had done
    before it failed: popped values, and changes an inlined call made to lists, dicts, cells
    and tensors (an in-place op) that the frame can reach."""

    def __init__(self, frame: Frame, deep: bool) -> None:
        self.stack, self.locals, self.kw_names = list(frame.stack), dict(frame.locals), frame.kw_names
        self.contents: list[tuple[Variable, Any]] = []
        if deep:
            seen: set[int] = set()
            for var in [*self.stack, *self.locals.values()]:
                self._remember(var, seen)

    def _remember(self, var: Variable, seen: set[int]) -> None:
        if id(var) in seen:
            return
        seen.add(id(var))
        inner: list[Variable] = []
        if isinstance(var, (ListVariable, TupleVariable)):
            self.contents.append((var, list(var.items)))
            inner = var.items
        elif isinstance(var, DictVariable):
            self.contents.append((var, dict(var.items)))
            inner = list(var.items.values())
        elif isinstance(var, TensorVariable):
            self.contents.append((var, var.node))
        elif isinstance(var, CellVariable):
            self.contents.append((var, var.content))
            inner = [var.content] if var.content is not None else []
        elif isinstance(var, IteratorVariable):
            self.contents.append((var, var.position))
            inner = var.items
        for item in inner:
            self._remember(item, seen)

    def restore(self, frame: Frame) -> None:
        frame.stack, frame.locals, frame.kw_names = self.stack, self.locals, self.kw_names
        for var, saved in self.contents:
            if isinstance(var, TensorVariable):
                var.node = saved
            elif isinstance(var, CellVariable):
                var.content = saved
            elif isinstance(var, IteratorVariable):
                var.position = saved
            else:
                var.items = saved
