"""One generated function per cache entry: check its guards and fetch its graph's inputs.

Checking guards one `Guard` object at a time costs a method call, a `try` and a loop step per
guard, and every guard walks its own path from the arguments again: `self.blocks.0.attn.weight`
goes through four modules before its check. A ResNet-18 has ~460 guards (its modules'
identities and `training` flags, every parameter's shape) and 123 inputs: that cost more than a
millisecond per call on a small CPU, more than the GPU needs for the whole model. TorchDynamo
compiles its guards into one function (in C++ now); here the guards become one straight-line
Python function per entry, printed for the learner:

    def check_and_fetch(args, kwargs):
        try:
            s0 = c0._modules['blocks']  # self.blocks
            if not (s0 is c1): return None  # id(self.blocks) == 140...
            s1 = s0._modules['0']  # self.blocks.0
            ...
            s7 = s1._parameters['weight']  # self.blocks.0.weight
            if not holds_7(s7): return None  # self.blocks.0.weight: float32[8, 64] contiguous cpu ...
        except (AttributeError, IndexError, KeyError, TypeError):
            return None  # a value is not even there any more: a failed guard
        return [s7, ...]  # the graph's inputs, read by their guards

Each path is read once into a local (`s1`, the module `self.blocks.0`, serves every guard and
input below it), simple checks are written inline. The tensors' checks come last, all in one
call to torch's own C++ tensor check (`TensorGuards`, what TorchDynamo's guards use), which learns
the tensors' dtypes, devices, shapes, strides and requires_grad from a call that passed each
tensor's own guard; until it has, or when it fails, each tensor's guard is checked as before:

        if not tensors.check(s7, s9, ...):  # 123 tensors: ~20 us instead of ~120 us of Python
            if not holds_7(s7): return None  # self.blocks.0.weight: float32[8, 64] contiguous cpu ...
            ...
            tensors.learn(s7, s9, ...)

The function answers what `first_failing_guard` answers (None exactly when some guard fails);
which guard failed is asked of the Guard objects only when a call misses, to write the
recompile reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from minicompiler.capture import Guard
from minicompiler.capture.sources import Source

CheckAndFetch = Callable[[tuple, dict], "list[torch.Tensor] | None"]


try:
    from torch._C._dynamo.guards import TensorGuards
except ImportError:  # not in this torch: each tensor's guard is checked in Python
    TensorGuards = None


class TensorsSeen:
    """One check of many tensors against those of the last call whose tensors passed their guards.
    It checks what their guards check, and more (the dispatch keys): where it passes, every
    tensor guard passes; where it fails, the guards are asked."""

    def __init__(self) -> None:
        self.guards: Any = None

    def check(self, *tensors: torch.Tensor) -> bool:
        return self.guards is not None and self.guards.check(*tensors)

    def learn(self, *tensors: torch.Tensor) -> None:
        if TensorGuards is None:
            return
        try:
            self.guards = TensorGuards(*tensors, dynamic_dims_sizes=[list(t.shape) for t in tensors],
                                       dynamic_dims_strides=[list(t.stride()) for t in tensors])
        except (RuntimeError, TypeError):  # a tensor it cannot describe (sparse, say): the guards answer
            self.guards = None


class _Writer:
    """The function's lines and namespace: a local per path read, a name per object referred to."""

    def __init__(self) -> None:
        self.lines = ["def check_and_fetch(args, kwargs):", "    try:"]
        self.namespace: dict[str, Any] = {"torch": torch}
        self.bound: dict[int, str] = {}  # id of an object -> its name in the namespace
        self.local_of: dict[str, str] = {}  # code that reads a value -> the local holding it
        self.read_by: dict[int, str] = {}  # id of a getter called as a function -> its local
        self.tensor_checks: list[tuple[str, str]] = []  # (local, its guard's line): static tensors, checked last

    def bind(self, value: Any) -> str:
        if id(value) not in self.bound:
            self.bound[id(value)] = name = f"c{len(self.bound)}"
            self.namespace[name] = value
        return self.bound[id(value)]

    def read(self, source: Source) -> str:
        """The local holding `source`'s value, reading it (and its parents first) if not yet read."""
        if source.step is None or (source.parent is not None and source.parent.step is None):
            return self.call(source.get, f"f{len(self.read_by)}", str(source))
        parent = self.read(source.parent) if source.parent is not None else ""
        code = source.code(parent, self.bind)
        if code not in self.local_of:
            self.local_of[code] = local = f"s{len(self.local_of)}"
            self.emit(f"{local} = {code}", str(source))
        return self.local_of[code]

    def call(self, getter: Callable[[tuple, dict], Any], name: str, comment: str) -> str:
        """A value read by calling its getter (one that cannot be written as code)."""
        if id(getter) not in self.read_by:
            self.read_by[id(getter)] = local = f"v{len(self.read_by)}"
            self.namespace[name] = getter
            self.emit(f"{local} = {name}(args, kwargs)", comment)
        return self.read_by[id(getter)]

    def check(self, number: int, guard: Guard) -> None:
        if guard.origins is not None:  # several values: read as locals, checked as a tuple
            value = f"({''.join(self.read(source) + ', ' for source in guard.origins)})"
        else:
            value = self.read(guard.origin) if guard.origin is not None else self.call(
                guard.fetch, f"fetch_{number}", guard.source)
        if guard.check_code is not None:
            condition = guard.check_code(value, self.bind)
        else:
            self.namespace[f"holds_{number}"] = guard.predicate
            condition = f"holds_{number}({value})"
        if guard.static_tensor:
            line = f"            if not ({condition}): return None  # {_one_line(guard.description)}"
            self.tensor_checks.append((value, line))
        else:
            self.emit(f"if not ({condition}): return None", guard.description)

    def check_tensors(self) -> None:
        """The static tensor guards: one call to `tensors.check`, each guard only if that fails."""
        if not self.tensor_checks:
            return
        values = ", ".join(value for value, _ in self.tensor_checks)
        self.namespace["tensors"] = TensorsSeen()
        self.emit(f"if not tensors.check({values}):", "every tensor below in one call, once it has seen them")
        self.lines += [line for _, line in self.tensor_checks]
        self.lines.append(f"            tensors.learn({values})")

    def emit(self, code: str, comment: str) -> None:
        self.lines.append(f"        {code}  # {_one_line(comment)}")


def _one_line(comment: str) -> str:
    """A comment is one line whatever the text it quotes (a key may hold a newline)."""
    return " ".join(comment.splitlines())


def guard_function(guards: Sequence[Guard], input_sources: Sequence[Source]) -> tuple[CheckAndFetch, str]:
    """(the generated function, its source text)."""
    writer = _Writer()
    for number, guard in enumerate(guards):
        writer.check(number, guard)
    writer.check_tensors()
    values = [writer.read(source) for source in input_sources]
    writer.lines += ["    except (AttributeError, IndexError, KeyError, TypeError):",
                     "        return None  # a value is not even there any more: a failed guard",
                     f"    return [{', '.join(values)}]"]
    text = "\n".join(writer.lines) + "\n"
    exec(compile(text, "<minicompiler guards>", "exec"), writer.namespace)
    return writer.namespace["check_and_fetch"], text
