"""One generated function per cache entry: check its guards and fetch its graph's inputs.

Checking guards one `Guard` object at a time costs a method call, a `try` and a loop step per
guard, and the graph's inputs are then read a second time through their sources. A ResNet-18
has ~460 guards (its modules' identities and `training` flags, every parameter's shape) and
123 inputs: that loop cost more than a millisecond per call on a small CPU, more than the GPU
needs for the whole model. TorchDynamo compiles its guards into one function (in C++ now);
here the guards become one straight-line Python function per entry, printed for the learner:

    def check_and_fetch(args, kwargs):
        try:
            v0 = fetch_0(args, kwargs)  # self.training == False
            if not holds_0(v0): return None
            v1 = fetch_1(args, kwargs)  # x: float32[8, 64] contiguous cpu requires_grad=False
            if not holds_1(v1): return None
            ...
        except (AttributeError, IndexError, KeyError, TypeError):
            return None  # a value is not even there any more: a failed guard
        return [v1, ...]  # the graph's inputs: each read once, by its own tensor guard

A value a tensor guard has read is the input itself (the guard and the input share one
getter), so it is not fetched again. The function answers what `first_failing_guard` answers
(None exactly when some guard fails); which guard failed is asked of the Guard objects only
when a call misses, to write the recompile reason.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import torch

from minicompiler.capture import Guard
from minicompiler.capture.sources import Source

CheckAndFetch = Callable[[tuple, dict], "list[torch.Tensor] | None"]


def guard_function(guards: Sequence[Guard], input_sources: Sequence[Source]) -> tuple[CheckAndFetch, str]:
    """(the generated function, its source text)."""
    namespace: dict[str, Any] = {}
    lines = ["def check_and_fetch(args, kwargs):", "    try:"]
    read: dict[int, str] = {}  # id of a getter -> the local holding what it read
    for number, guard in enumerate(guards):
        namespace[f"fetch_{number}"], namespace[f"holds_{number}"] = guard.fetch, guard.predicate
        comment = guard.description.replace("\n", " ")
        lines.append(f"        v{number} = fetch_{number}(args, kwargs)  # {comment}")
        lines.append(f"        if not holds_{number}(v{number}): return None")
        read.setdefault(id(guard.fetch), f"v{number}")
    values = []
    for number, source in enumerate(input_sources):
        if id(source.get) not in read:  # an input no guard reads (a fixed object's tensor, say)
            namespace[f"input_{number}"] = source.get
            lines.append(f"        i{number} = input_{number}(args, kwargs)  # {source.path}")
            read[id(source.get)] = f"i{number}"
        values.append(read[id(source.get)])
    lines += ["    except (AttributeError, IndexError, KeyError, TypeError):",
              "        return None  # a value is not even there any more: a failed guard",
              f"    return [{', '.join(values)}]"]
    text = "\n".join(lines) + "\n"
    exec(compile(text, "<minicompiler guards>", "exec"), namespace)
    return namespace["check_and_fetch"], text
