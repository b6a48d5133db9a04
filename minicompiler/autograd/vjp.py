"""The VJP rule table: for each primitive op, how a gradient flows back to its inputs.

A rule receives the gradient `g` of the op's output `y`, then the op's own arguments, and
returns one gradient per positional argument (`None`: no gradient to that argument). It
builds the backward computation as new graph nodes through `ops`, a `GraphOps` handle on the
graph being built, so a rule reads like the formula in its comment:

    @vjp("mul")  # d(a b) = b da + a db
    def vjp_mul(ops, g, y, a, b):
        return ops.mul(g, b), ops.mul(g, a)

Rules may return a gradient broadcast to the output's shape, or in the output's dtype:
`differentiate` sums it down to the input's shape (`sum_to_size`) and casts it to the
input's dtype, as torch autograd does. Python-scalar arguments never get a gradient.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import torch

from minicompiler.ir import OPS, Graph, Node

# One entry per positional argument: a gradient node, None, or (for `cat`'s list of
# tensors) a tuple of those.
Grads = tuple[Any, ...]
VJPRule = Callable[..., Grads]


class NotDifferentiable(NotImplementedError):
    """The graph reads an op that has no gradient rule; the caller should fall back to eager."""

    def __init__(self, op: str, why: str = "no VJP rule") -> None:
        super().__init__(f"cannot differentiate op {op!r}: {why}; run this graph with torch autograd")
        self.op = op


class GraphOps:
    """`ops.mul(a, b)` appends a `mul` node to the graph and returns it (any op in the table)."""

    def __init__(self, graph: Graph) -> None:
        self.graph = graph

    def __getattr__(self, op: str) -> Callable[..., Node]:
        if op not in OPS:
            raise AttributeError(f"no op {op!r} in the op table")
        return functools.partial(self.graph.call, op)


VJP_RULES: dict[str, VJPRule] = {}

# Ops whose output carries no gradient back: piecewise-constant functions (derivative 0
# almost everywhere; torch returns zeros too), boolean results, and constants.
NO_GRADIENT = frozenset({
    "floor", "ceil", "trunc", "round", "sign", "signbit", "full", "iota", "detach", "check_indices",
    "eq", "ne", "lt", "le", "gt", "ge", "logical_not", "logical_and", "logical_or",
    "argmax", "argmin", "cummax_index", "cummin_index",  # positions
})

# Ops we cannot differentiate at all.
NOT_DIFFERENTIABLE = {
    "torch_call_vjp": "it is itself a gradient (compiled code has no double backward)",
    "recorded_vjp": "it is itself a gradient (compiled code has no double backward)",
    # made from a differentiated torch_call (autograd/recorded.py), after its gradients are
    "recorded_call": "it is differentiated already: the gradients come from its recording",
}
# scans without a rule: capture keeps them torch calls where their input needs a gradient
NOT_DIFFERENTIABLE.update(dict.fromkeys(("cummax", "cummin", "logcumsumexp"), "no VJP rule yet"))


def vjp(*ops: str) -> Callable[[VJPRule], VJPRule]:
    """Register the decorated function as the VJP rule of each op in `ops`."""

    def register(rule: VJPRule) -> VJPRule:
        for op in ops:
            VJP_RULES[op] = rule
        return rule

    return register


def rule_for(op: str) -> VJPRule | None:
    """The op's VJP rule; None if no gradient flows through it; NotDifferentiable if unknown."""
    if op in NO_GRADIENT:
        return None
    if op in NOT_DIFFERENTIABLE:
        raise NotDifferentiable(op, NOT_DIFFERENTIABLE[op])
    if op in OPS and not OPS[op].is_primitive:
        raise NotDifferentiable(op, "not a primitive (decompose the graph first)")
    if op not in VJP_RULES:
        raise NotDifferentiable(op)
    return VJP_RULES[op]


# --- helpers shared by the rules and by `differentiate` -----------------------------------
def zeros(ops: GraphOps, shape: tuple[int, ...], dtype: torch.dtype, device: torch.device) -> Node:
    return ops.full(shape, 0.0, dtype, device=str(device))


def sum_to_size(ops: GraphOps, grad: Node, shape: tuple[int, ...]) -> Node:
    """Undo broadcasting: sum `grad` over the dims that broadcasting added or stretched from 1."""
    if grad.meta.shape == shape:
        return grad
    lead = grad.meta.ndim - len(shape)  # dims broadcasting put in front
    stretched = [lead + i for i, size in enumerate(shape) if size == 1 and grad.meta.shape[lead + i] != 1]
    summed = ops.sum(grad, (*range(lead), *stretched), True) if lead or stretched else grad
    return summed if summed.meta.shape == shape else ops.reshape(summed, shape)  # drop the leading 1s


def normalize_dim(dim: int, ndim: int) -> int:
    return dim % ndim if ndim else 0
