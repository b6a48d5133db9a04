"""Library calls whose backward torch autograd records in the forward: `recorded_call`, `recorded_vjp`.

A `torch_call` (a function the compiler does not know: attention, say) has its gradients from torch
autograd. Left to itself the backward runs the call again under autograd and differentiates that
(`torch_call_vjps`, ops.py): attention's forward twice per training step. In a training program
(autograd/recorded.py) the forward's call is a `recorded_call` instead: it runs under autograd,
and what autograd recorded (the call's backward, with the tensors it saved, as eager keeps them)
goes on the step's *tape*, under the call's name. The backward's `recorded_vjp`s take the
gradients from it:

    forward:   attention = recorded_call("attention", (0, 1, 2), sdpa, q, k, v, mask)   # tape["attention"] = ...
    backward:  grad_q, grad_k, grad_v = recorded_vjps("attention", attention, sdpa, (0, 1, 2), g, q, k, v, mask)

Autograd records only the gradients the backward asks for, (0, 1, 2) here: a mask made to require
one would cost attention its fused kernels (torch then picks its math implementation, ~20 ops).

A tape is one training step's (autograd/function.py sets it around the forward and the backward
of one call and keeps it with the step's saved tensors). The recorded call's arguments and result
are graph values the backward reads, so the forward keeps them as saved tensors, and no kernel
writes over the memory autograd's recording shares with them. Where there is no recording (a graph
run by the reference interpreter, a step whose tape is gone) the backward runs the call again,
as `torch_call_vjps` does: slower, the same gradients.
"""

from __future__ import annotations

import contextvars
from collections.abc import Callable
from typing import Any

import torch

from minicompiler.ir.ops import register, torch_call_vjps

# name of a recorded call -> (its result as autograd recorded it, {argument index: the leaf it was taken of})
Tape = dict[str, tuple[torch.Tensor, dict[int, torch.Tensor]]]
TAPE: contextvars.ContextVar[Tape | None] = contextvars.ContextVar("minicompiler_tape", default=None)


def recorded_call(name: str, differentiable: tuple[int, ...], fn: Callable[..., torch.Tensor], *args: Any,
                  **kwargs: Any) -> torch.Tensor:
    """fn(*args, **kwargs); with a tape set, recorded by torch autograd onto it under `name`, for
    the gradients of the arguments at positions `differentiable`."""
    tape = TAPE.get()
    if tape is None or any(isinstance(a, torch.Tensor) and a.device.type == "meta" for a in args):
        return fn(*args, **kwargs)
    leaves = {i: args[i].detach().requires_grad_() for i in differentiable}
    try:
        with torch.enable_grad():
            result = fn(*(leaves.get(i, a) for i, a in enumerate(args)), **kwargs)
    except RuntimeError:  # autograd refused it (a call that writes into an argument): not recorded,
        return fn(*args, **kwargs)  # and the backward runs it again
    if not isinstance(result, torch.Tensor):
        return result
    tape[name] = (result, leaves)
    return result.detach()  # the graph's value: the same memory, outside autograd


def recorded_vjps(name: str, result: torch.Tensor, fn: Callable[..., torch.Tensor], argnums: tuple[int, ...],
                  grad: torch.Tensor, *args: Any, **kwargs: Any) -> tuple[torch.Tensor, ...]:
    """The gradients of the recorded call `name` w.r.t. each of args[argnums], from its recording
    (kept for the call's other gradients: the tape goes with the step)."""
    tape = TAPE.get()
    recording = tape.get(name) if tape is not None else None
    if recording is None:
        return torch_call_vjps(fn, argnums, grad, *args, **kwargs)
    recorded, leaves = recording
    if not recorded.requires_grad:  # x.new_tensor(...): made from x, not of it
        return tuple(torch.zeros_like(args[i]) for i in argnums)
    wanted = [leaves[i] for i in argnums]
    grads = _from_the_node(recorded, wanted, grad)
    if grads is None:
        grads = torch.autograd.grad(recorded, wanted, grad, retain_graph=True, allow_unused=True)
    return tuple(torch.zeros_like(args[i]) if g is None else g for i, g in zip(argnums, grads, strict=True))


def _from_the_node(recorded: torch.Tensor, leaves: list[torch.Tensor],
                   grad: torch.Tensor) -> list[torch.Tensor] | None:
    """The leaves' gradients from one call of the node autograd recorded for the result, where
    that node takes the call's arguments directly (attention's: its inputs are the leaves) and
    hands back gradients shaped as they are; else None. `torch.autograd.grad` gets the same
    gradients through the autograd engine, which costs ~100 us more per call (a graph task to set
    up and run), paid by every attention layer of a training step."""
    node = recorded.grad_fn
    if node is None or recorded.output_nr != 0 or len(getattr(node, "_input_metadata", ())) != 1:
        return None
    edges = [edge for edge, _ in node.next_functions]
    if any(edge is not None and not hasattr(edge, "variable") for edge in edges):
        return None  # another op between an argument and the node: the engine has to run both
    inputs = [id(edge.variable) if edge is not None else None for edge in edges]
    if any(id(leaf) not in inputs for leaf in leaves):
        return None
    grads = node(grad)
    grads = grads if isinstance(grads, tuple) else (grads,)  # one input: one gradient, or None
    by_leaf = dict(zip(inputs, grads, strict=True))
    found = [by_leaf[id(leaf)] for leaf in leaves]
    # None where the node computed nothing: inside `torch.autograd.grad(out, inputs)` the engine
    # tells every node which gradients its graph task needs, and this node is not in that task
    if any(g is None or g.shape != leaf.shape or g.dtype != leaf.dtype for g, leaf in zip(found, leaves, strict=True)):
        return None
    return found


def _recorded_vjp(name: str, result: torch.Tensor, fn: Callable[..., torch.Tensor], argnum: int,
                  grad: torch.Tensor, *args: Any, **kwargs: Any) -> torch.Tensor:
    if args[argnum].device.type == "meta":  # shape inference: the gradient looks like the input
        return torch.empty_like(args[argnum])
    return recorded_vjps(name, result, fn, (argnum,), grad, *args, **kwargs)[0]


register(
    "recorded_call", "extern", recorded_call,
    "recorded_call(name, differentiable, fn, *args): fn(*args), its backward (for the arguments at "
    "positions `differentiable`) recorded by torch autograd for the backward's recorded_vjp (a "
    "torch_call in a training forward)",
)
register(
    "recorded_vjp", "extern", _recorded_vjp,
    "recorded_vjp(name, result, fn, argnum, grad, *args): the gradient w.r.t. args[argnum] of the "
    "recorded call `name`, from its recording",
)
