"""Where a value came from, so it can be read again on the next call.

A `Source` is a path from the call's `(args, kwargs)` to a value: `args[0]`,
`kwargs['mask']`, `self.layers.0.weight`, `globals()['W']`. Guards re-read their value
through it on every call, and `CaptureResult.fetch_inputs` re-reads each graph input
through it, so a parameter updated by an optimizer is seen without recompiling.

`get` is a chain of small closures built once at capture time: no string parsing on
the hot path.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

Getter = Callable[[tuple, dict], Any]


@dataclass(frozen=True)
class Source:
    path: str  # as Python-like text, for people: "self.layers.0.weight"
    label: str  # a short name for a graph placeholder: "layers_0_weight"
    get: Getter = field(compare=False, repr=False)
    fixed: bool = False  # always the same object (the module being compiled): nothing to guard

    def __str__(self) -> str:
        return self.path

    def attr(self, name: str) -> Source:
        get = self.get
        label = f"{self.label}_{name}" if self.label else name
        return Source(f"{self.path}.{name}", label, lambda args, kwargs: getattr(get(args, kwargs), name))

    def module_member(self, table: str, name: str) -> Source:
        """`module.name` for a parameter, buffer or submodule, read straight from the module's
        `table` (`_parameters`, `_buffers`, `_modules`): the value getattr gives, without the
        slow trip through nn.Module.__getattr__ on every guard check."""
        get = self.get
        label = f"{self.label}_{name}" if self.label else name
        return Source(f"{self.path}.{name}", label,
                      lambda args, kwargs: getattr(get(args, kwargs), table)[name])

    def as_tensor(self) -> Source:
        """A NumPy array read as a tensor sharing its memory (what the graph takes as input)."""
        get = self.get
        return Source(f"torch.from_numpy({self.path})", self.label,
                      lambda args, kwargs: torch.from_numpy(get(args, kwargs)))

    def as_float_tensor(self, device: torch.device) -> Source:
        """A Python float read as a 0-d float64 tensor on `device` (a graph input: float_inputs.py)."""
        get = self.get
        return Source(f"torch.tensor({self.path})", self.label,
                      lambda args, kwargs: torch.tensor(get(args, kwargs), dtype=torch.float64, device=device))

    def item(self, key: Any) -> Source:
        get = self.get
        label = f"{self.label}_{key}"
        return Source(f"{self.path}[{key!r}]", label, lambda args, kwargs: get(args, kwargs)[key])


def arg_source(index: int, label: str) -> Source:
    return Source(f"args[{index}]", label, lambda args, kwargs: args[index])


def kwarg_source(name: str) -> Source:
    return Source(f"kwargs[{name!r}]", name, lambda args, kwargs: kwargs[name])


def global_source(f_globals: dict[str, Any], name: str) -> Source:
    return Source(f"globals()[{name!r}]", name, lambda args, kwargs: f_globals[name])


def cell_source(cell: Any, name: str, function: str) -> Source:
    """A variable a closure captured from its enclosing function."""
    return Source(f"{function}.<closure {name}>", name, lambda args, kwargs: cell.cell_contents)


def fixed_source(value: Any, path: str, label: str = "") -> Source:
    """An object fixed for the compiled function's lifetime (the module being compiled)."""
    return Source(path, label, lambda args, kwargs: value, fixed=True)
