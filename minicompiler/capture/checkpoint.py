"""`torch.utils.checkpoint.checkpoint(fn, *args, use_reentrant=...)` inside a captured function.

Eager checkpointing runs `fn` without keeping its intermediates and runs it again in the
backward. Captured, the call is inlined like any other function, and every node it adds is
tagged `checkpoint` (a region number). The values are the same; what changes is the partition
(autograd/partition.py): a tagged value is never saved for the backward unless code after the
region reads it, so the backward recomputes the region from its inputs, as eager does.

Both forms are captured. The reentrant form (`use_reentrant=True`, torch's default when the
argument is left out) gives no gradient at all when no tensor argument requires grad; that case
is refused, so the call runs eagerly and behaves exactly as torch's.
"""

from __future__ import annotations

import itertools
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
    if own.get("use_reentrant") is not False:  # None means True, as in torch
        if kwargs:
            raise Unsupported("reentrant checkpoint() with keyword arguments (torch raises ValueError)")
        if not any(isinstance(a, TensorVariable) and needs_grad(a.node) for a in args):
            raise Unsupported("reentrant checkpoint() where no tensor argument requires grad: "
                              "torch gives its parameters no gradient")
    graph = tx.state.graph
    before = set(graph.nodes)
    result = fn.call(tx, list(args), kwargs)
    region = next(_regions)
    for node in graph.nodes:
        if node not in before and node.op != "placeholder":  # parameters first read inside stay inputs
            node.tags[CHECKPOINT] = region  # the partition's promise to recompute
    return result
