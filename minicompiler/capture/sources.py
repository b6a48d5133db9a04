"""Where a value came from, so it can be read again on the next call.

A `Source` is a path from the call's `(args, kwargs)` to a value: `args[0]`,
`kwargs['mask']`, `self.layers.0.weight`, `globals()['W']`. Guards re-read their value
through it on every call, and `CaptureResult.fetch_inputs` re-reads each graph input
through it, so a parameter updated by an optimizer is seen without recompiling.

`get` is a chain of small closures built once at capture time: no string parsing on
the hot path. Each source can also write itself as Python text (`code`), from its parent's
text: the runtime compiles all of a graph's guards into one function, where a path shared
by many sources (`self.layers.0`) is read once into a local (runtime/guard_code.py).
"""

from __future__ import annotations

import keyword
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

Getter = Callable[[tuple, dict], Any]
Bind = Callable[[Any], str]  # an object the code refers to -> the name it is bound to
Step = Callable[[str, Bind], str]  # (the parent's code, bind) -> this source's code
LITERAL_KEYS = (int, str, bool, type(None))  # their repr() is Python source for the same value


@dataclass(frozen=True)
class Source:
    path: str  # as Python-like text, for people: "self.layers.0.weight"
    label: str  # a short name for a graph placeholder: "layers_0_weight"
    get: Getter = field(compare=False, repr=False)
    fixed: bool = False  # always the same object (the module being compiled): nothing to guard
    parent: Source | None = field(default=None, compare=False, repr=False)
    step: Step | None = field(default=None, compare=False, repr=False)  # None: readable only through `get`

    def __str__(self) -> str:
        return self.path

    def code(self, parent_code: str, bind: Bind) -> str:
        """Python text for this value, given the text that reads its parent (ignored by a root):
        names and keys are written as literals (`getattr(m, 'odd name')`, `d['k\\n']`), never
        pasted in raw, and anything else it needs is bound to a name by `bind`."""
        assert self.step is not None, f"{self.path} has no code"
        return self.step(parent_code, bind)

    def _child(self, path: str, label: str, get: Getter, step: Step) -> Source:
        return Source(path, label, get, parent=self, step=step)

    def attr(self, name: str) -> Source:
        get = self.get
        label = f"{self.label}_{name}" if self.label else name
        plain = name.isidentifier() and not keyword.iskeyword(name)
        return self._child(f"{self.path}.{name}", label, lambda args, kwargs: getattr(get(args, kwargs), name),
                           lambda p, bind: f"{p}.{name}" if plain else f"getattr({p}, {name!r})")

    def module_member(self, table: str, name: str) -> Source:
        """`module.name` for a parameter, buffer or submodule, read straight from the module's
        `table` (`_parameters`, `_buffers`, `_modules`): the value getattr gives, without the
        slow trip through nn.Module.__getattr__ on every guard check."""
        get = self.get
        label = f"{self.label}_{name}" if self.label else name
        return self._child(f"{self.path}.{name}", label, lambda args, kwargs: getattr(get(args, kwargs), table)[name],
                           lambda p, bind: f"{p}.{table}[{name!r}]")

    def as_tensor(self) -> Source:
        """A NumPy array read as a tensor sharing its memory (what the graph takes as input)."""
        get = self.get
        return self._child(f"torch.from_numpy({self.path})", self.label,
                           lambda args, kwargs: torch.from_numpy(get(args, kwargs)),
                           lambda p, bind: f"torch.from_numpy({p})")

    def as_float_tensor(self, device: torch.device) -> Source:
        """A Python float read as a 0-d float64 tensor on `device` (a graph input: float_inputs.py)."""
        get = self.get
        return self._child(f"torch.tensor({self.path})", self.label,
                           lambda args, kwargs: torch.tensor(get(args, kwargs), dtype=torch.float64, device=device),
                           lambda p, bind: f"torch.tensor({p}, dtype=torch.float64, device={bind(device)})")

    def item(self, key: Any) -> Source:
        get = self.get
        label = f"{self.label}_{key}"
        return self._child(f"{self.path}[{key!r}]", label, lambda args, kwargs: get(args, kwargs)[key],
                           lambda p, bind: f"{p}[{key!r}]" if type(key) in LITERAL_KEYS else f"{p}[{bind(key)}]")


def arg_source(index: int, label: str) -> Source:
    return Source(f"args[{index}]", label, lambda args, kwargs: args[index], step=lambda p, bind: f"args[{index}]")


def kwarg_source(name: str) -> Source:
    return Source(f"kwargs[{name!r}]", name, lambda args, kwargs: kwargs[name],
                  step=lambda p, bind: f"kwargs[{name!r}]")


def global_source(f_globals: dict[str, Any], name: str) -> Source:
    return Source(f"globals()[{name!r}]", name, lambda args, kwargs: f_globals[name],
                  step=lambda p, bind: f"{bind(f_globals)}[{name!r}]")


def cell_source(cell: Any, name: str, function: str) -> Source:
    """A variable a closure captured from its enclosing function."""
    return Source(f"{function}.<closure {name}>", name, lambda args, kwargs: cell.cell_contents,
                  step=lambda p, bind: f"{bind(cell)}.cell_contents")


def fixed_source(value: Any, path: str, label: str = "") -> Source:
    """An object fixed for the compiled function's lifetime (the module being compiled)."""
    return Source(path, label, lambda args, kwargs: value, fixed=True, step=lambda p, bind: bind(value))
