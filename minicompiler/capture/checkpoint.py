"""`torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=...)` inside a captured function.

Eager checkpointing runs `fn` without keeping its intermediates and runs it again in the
backward. Captured, the call is inlined like any other function, and every node it adds is
tagged `checkpoint` (a region number). The values are the same; what changes is the partition
(autograd/partition.py): a tagged value is never saved for the backward unless code after the
region reads it, so the backward recomputes the region from its inputs, as eager does.

`checkpoint_sequential(layers, segments, x)` is the same, one region per segment.

Both forms are captured. The reentrant form (`use_reentrant=True`, torch's default when the
argument is left out) gives no gradient at all when no tensor argument requires grad; that case
is refused, so the call runs eagerly and behaves exactly as torch's.
"""

from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

import torch.utils.checkpoint

from minicompiler.autograd.partition import CHECKPOINT
from minicompiler.capture.errors import Unsupported
from minicompiler.capture.tensor import TensorVariable
from minicompiler.capture.torch_views import needs_grad
from minicompiler.capture.variables import Variable

if TYPE_CHECKING:
    from minicompiler.capture.frame import Tracer

# checkpoint()'s own keyword arguments; any other keyword goes to `fn`
_OWN_KEYWORDS = ("use_reentrant", "context_fn", "determinism_check", "debug", "early_stop", "preserve_rng_state")
_regions = itertools.count()


def checkpoint(tx: Tracer, fn: Variable, *args: Variable, **kwargs: Variable) -> Variable:
    """Inline `fn(*args, **kwargs)` and tag the nodes it adds as one checkpointed region."""
    own = {k: kwargs.pop(k).as_python() for k in _OWN_KEYWORDS if k in kwargs}
    if own.get("context_fn", torch.utils.checkpoint.noop_context_fn) is not torch.utils.checkpoint.noop_context_fn:
        raise Unsupported("checkpoint(context_fn=...): selective checkpointing policies are not captured")
    _check_reentrant(own.get("use_reentrant"), args, kwargs)
    return _recomputed_region(tx, lambda: fn.call(tx, list(args), kwargs))


def checkpoint_sequential(tx: Tracer, functions: Variable, segments: Variable, input: Variable,
                          use_reentrant: Variable | None = None, **kwargs: Variable) -> Variable:
    """torch's checkpoint_sequential: the layers split into `segments` runs of equal length, each
    run but the last one checkpointed region (the last one's values make the output anyway)."""
    if set(kwargs) - {"preserve_rng_state"}:
        raise Unsupported(f"checkpoint_sequential() with keyword arguments {sorted(kwargs)} (torch raises ValueError)")
    _check_reentrant(None if use_reentrant is None else use_reentrant.as_python(), [input], {})
    layers, count = functions.iterate(tx), segments.as_python()
    size = len(layers) // count
    end = -1
    for start in range(0, size * (count - 1), size):
        end = start + size - 1
        input = _recomputed_region(tx, functools.partial(_run_layers, tx, layers[start:end + 1], input))
    return _run_layers(tx, layers[end + 1:], input)


def _check_reentrant(use_reentrant: bool | None, args: Sequence[Variable], kwargs: dict[str, Variable]) -> None:
    if use_reentrant is False:
        return
    # None means True, as in torch
    if kwargs:
        raise Unsupported("reentrant checkpoint() with keyword arguments (torch raises ValueError)")
    if not any(isinstance(a, TensorVariable) and needs_grad(a.node) for a in args):
        raise Unsupported("reentrant checkpoint() where no tensor argument requires grad: "
                          "torch gives its parameters no gradient")


def _run_layers(tx: Tracer, layers: list[Variable], input: Variable) -> Variable:
    for layer in layers:
        input = layer.call(tx, [input], {})
    return input


def _recomputed_region(tx: Tracer, run: Callable[[], Variable]) -> Variable:
    graph = tx.state.graph
    before = set(graph.nodes)
    result = run()
    region = next(_regions)
    for node in graph.nodes:
        if node not in before and node.op != "placeholder":  # parameters first read inside stay inputs
            node.tags[CHECKPOINT] = region  # the partition's promise to recompute
    return result
