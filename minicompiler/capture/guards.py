"""Guards: the assumptions a captured graph was specialised on.

A graph is only valid for calls that look like the one it was captured from: same tensor
shapes, strides, dtypes and devices (generated kernels bake them in), same Python constants,
the same modules and globals. Each `Guard` re-reads one value through its `Source` and
checks it. The runtime checks every guard on every call, so each check is one closure
comparing tuples; all text is made once, when the guard is made.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import torch

from minicompiler.capture.sources import Bind, Source
from minicompiler.ir import TensorMeta

CheckCode = Callable[[str, Bind], str]  # (the value's code, bind) -> a condition's code


@dataclass(frozen=True)
class Guard:
    kind: str  # "tensor" | "constant" | "predicate" | "id" | "type" | "len" | "alias"
    description: str  # "x: float32[1024] strides=(1,) cpu requires_grad=False"
    source: str  # "args[0]"
    predicate: Callable[[Any], bool] = field(compare=False, repr=False)
    fetch: Callable[[tuple, dict], Any] = field(compare=False, repr=False)
    origin: Source | None = field(default=None, compare=False, repr=False)  # what `fetch` reads
    check_code: CheckCode | None = field(default=None, compare=False, repr=False)  # `predicate` as text
    # or, for a guard on several values (`fetch` answers a tuple of them), what each is read from
    origins: tuple[Source, ...] | None = field(default=None, compare=False, repr=False)
    # a tensor of fixed dtype, device, shape, strides and requires_grad: the generated guards check
    # all such tensors in one call (runtime/guard_code.py)
    static_tensor: bool = field(default=False, compare=False, repr=False)

    def check(self, args: tuple, kwargs: dict) -> bool:
        try:
            return self.predicate(self.fetch(args, kwargs))
        except (AttributeError, IndexError, KeyError, TypeError):
            return False  # the value is not even there any more

    def __str__(self) -> str:
        return self.description


def first_failing_guard(guards: Sequence[Guard], args: tuple, kwargs: dict) -> Guard | None:
    for guard in guards:
        if not guard.check(args, kwargs):
            return guard
    return None


def tensor_guard(source: Source, tensor: torch.Tensor, dynamic_dims: Sequence[int] = ()) -> Guard:
    """Exact dtype, shape, strides, device and requires_grad; except that a dynamic dim may have
    any size >= 2 (a contiguous tensor's strides then follow from its sizes)."""
    dtype, shape, strides = tensor.dtype, tuple(tensor.shape), tuple(tensor.stride())
    device, requires_grad = tensor.device, tensor.requires_grad
    static_dims = [d for d in range(tensor.ndim) if d not in dynamic_dims]

    def predicate(t: Any) -> bool:
        return (
            isinstance(t, torch.Tensor)
            and t.dtype == dtype
            and t.shape == shape
            and t.stride() == strides
            and t.device == device
            and t.requires_grad == requires_grad
        )

    static_sizes = [shape[d] for d in static_dims]

    def dynamic_predicate(t: Any) -> bool:
        return (
            isinstance(t, torch.Tensor)
            and t.dtype == dtype
            and t.ndim == len(shape)
            and [t.shape[d] for d in static_dims] == static_sizes
            and min([t.shape[d] for d in dynamic_dims]) >= 2
            and t.is_contiguous()
            and t.device == device
            and t.requires_grad == requires_grad
        )

    meta = TensorMeta.of(tensor)
    layout = "contiguous" if tensor.is_contiguous() else f"strides={strides}"
    who = source.label if source.path.startswith(("args[", "kwargs[")) else source.path  # "x", "self.w"
    text = f"{who}: {meta} {layout} {device} requires_grad={requires_grad}"
    if dynamic_dims:
        text += f" (dims {', '.join(map(str, dynamic_dims))} dynamic: any size >= 2)"
        return Guard("tensor", text, source.path, dynamic_predicate, source.get, source)
    return Guard("tensor", text, source.path, predicate, source.get, source, static_tensor=True)


def constant_guard(source: Source, value: Any) -> Guard:
    kind = type(value)
    if value is None:
        return Guard("constant", f"{source} is None", source.path, lambda v: v is None, source.get, source,
                     lambda v, bind: f"{v} is None")
    return Guard("constant", f"{source} == {value!r}", source.path,
                 lambda v: type(v) is kind and v == value, source.get, source,
                 lambda v, bind: _equals_code(v, value, bind))


def _equals_code(v: str, value: Any, bind: Bind) -> str:
    """`type(v) is T and v == value` as short as it can be written: `s3 is False`, `s4 == 2.0`."""
    if type(value) is bool:
        return f"{v} is {value}"
    if type(value) in (int, str) or (type(value) is float and math.isfinite(value)):
        return f"type({v}) is {type(value).__name__} and {v} == {value!r}"
    return f"type({v}) is {bind(type(value))} and {v} == {bind(value)}"


def predicate_guard(source: Source, text: str, holds: Callable[[Any], bool]) -> Guard:
    """A condition on a value rather than the value itself (`s > 1` is True): a float graph input
    that Python compared keeps its graph for every value on the same side."""
    return Guard("predicate", text, source.path, holds, source.get, source)


def id_guard(source: Source, value: Any) -> Guard:
    """The very same object (a module, a function, a global)."""
    return Guard("id", f"id({source}) == {id(value)}", source.path, lambda v: v is value, source.get, source,
                 lambda v, bind: f"{v} is {bind(value)}")


def same_object_guard(source: Source, first: Source) -> Guard:
    """Two sources still hold one object (a tensor passed twice, tied weights)."""
    get_first = first.get
    text = f"{source} is {first}"

    def check_both(args: tuple, kwargs: dict) -> Any:
        return source.get(args, kwargs) is get_first(args, kwargs)

    return Guard("id", text, source.path, lambda same: same, check_both)


def type_guard(source: Source, kind: type) -> Guard:
    return Guard("type", f"type({source}) is {kind.__qualname__}", source.path,
                 lambda v: type(v) is kind, source.get, source, lambda v, bind: f"type({v}) is {bind(kind)}")


def len_guard(source: Source, length: int) -> Guard:
    return Guard("len", f"len({source}) == {length}", source.path, lambda v: len(v) == length, source.get,
                 source, lambda v, bind: f"len({v}) == {length}")


def keys_guard(source: Source, keys: list[Any]) -> Guard:
    """A dict with the same keys in the same order."""
    return Guard("len", f"list({source}) == {keys!r}", source.path, lambda v: list(v) == keys, source.get,
                 source)


def separate_memory_guard(changed: Sequence[Source], inputs: Sequence[Source]) -> Guard:
    """The inputs the graph changes in place share no memory with any other input: the graph
    reads every input's old value, which is only right if changing one leaves the others alone.
    Its value is the tuple of the inputs, which generated guard code reads once for the inputs
    and this check alike (runtime/guard_code.py)."""
    changed_paths = {s.path for s in changed}
    is_changed = [s.path in changed_paths for s in inputs]
    getters = [s.get for s in inputs]
    text = f"{', '.join(s.path for s in changed)} share no memory with other inputs"

    def predicate(tensors: tuple[torch.Tensor, ...]) -> bool:
        changed_ptrs, other_ptrs = [], set()
        for changes, tensor in zip(is_changed, tensors, strict=True):
            if (ptr := tensor.untyped_storage().data_ptr()) != 0:  # 0: an empty tensor
                (changed_ptrs.append(ptr) if changes else other_ptrs.add(ptr))
        return len(set(changed_ptrs)) == len(changed_ptrs) and not other_ptrs.intersection(changed_ptrs)

    return Guard("alias", text, ", ".join(sorted(changed_paths)), predicate,
                 lambda args, kwargs: tuple(get(args, kwargs) for get in getters), origins=tuple(inputs))


def call_shape_guard(args: tuple, kwargs: dict) -> Guard:
    """The call passes as many positional arguments and the same keyword names: a keyword left
    out (attention_mask=None by default) changes which code runs."""
    shape = (len(args), sorted(kwargs))
    return Guard("predicate", f"{len(args)} positional arguments, keywords {shape[1]}", "call",
                 lambda call: call == shape, lambda a, k: (len(a), sorted(k)))
