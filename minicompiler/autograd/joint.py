"""Differentiate a primitive graph ahead of time: the joint forward + backward graph.

This is reverse-mode autodiff done on the graph instead of at run time (AOTAutograd's
idea). The joint graph first computes the forward exactly as the input graph does, then
walks the forward nodes in reverse, and for each one that receives a gradient appends its
VJP rule's nodes, summing the gradients that reach the same value along several paths:

    def forward(x: "float32[8]", tangent_0: "float32[8]"):   # joint graph of cos(cos(x))
        cos = ops.cos(x)               # forward
        cos_0 = ops.cos(cos)
        sin = ops.sin(cos)             # backward of cos_0: g * -sin(cos)
        mul = ops.mul(tangent_0, sin)
        neg = ops.neg(mul)
        sin_1 = ops.sin(x)             # backward of cos: g * -sin(x)
        mul_2 = ops.mul(neg, sin_1)
        neg_3 = ops.neg(mul_2)
        return (cos_0, neg_3)          # (*forward outputs, *input gradients)

Backward nodes keep the source line of the forward node they differentiate and carry
`tags["backward_of"]`, its name, so the report can show which user line each belongs to.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from minicompiler.autograd import pointwise_rules, shape_rules, special_rules  # noqa: F401  (they fill VJP_RULES)
from minicompiler.autograd.subgraph import copy_nodes, live_nodes
from minicompiler.autograd.vjp import GraphOps, NotDifferentiable, rule_for, sum_to_size, zeros
from minicompiler.ir import Graph, Node, TensorMeta, flatten, map_structure


@dataclass
class JointGraph:
    """One graph computing the forward outputs and the input gradients.

    Placeholders: the primals (the original inputs), then one tangent (the gradient of the
    loss w.r.t. that output) per differentiable forward output. Outputs: the flat tuple
    (*forward outputs, *gradients of the primals that require grad)."""

    graph: Graph
    requires_grad: list[bool]  # per primal
    differentiable: list[bool]  # per forward output: floating and depends on an input needing grad
    output_structure: Any  # the original output structure, with the joint graph's nodes in it

    @property
    def primals(self) -> list[Node]:
        return self.graph.inputs[: len(self.requires_grad)]

    @property
    def tangents(self) -> list[Node]:
        return self.graph.inputs[len(self.requires_grad) :]

    @property
    def forward_outputs(self) -> list[Node]:
        return list(self.graph.outputs[: len(self.differentiable)])

    @property
    def gradients(self) -> list[Node]:
        return list(self.graph.outputs[len(self.differentiable) :])


def differentiate(graph: Graph, requires_grad: Sequence[bool]) -> JointGraph:
    """The joint graph of a primitive `graph`; `requires_grad[i]` says whether input i needs a
    gradient. Raises NotDifferentiable if a value that needs a gradient comes from an op
    with no VJP rule (e.g. `torch_call`)."""
    _check_requires_grad(graph, requires_grad)
    joint = Graph()
    env = {
        p: joint.placeholder(p.name, dataclasses.replace(p.meta, requires_grad=bool(wanted)), p.source)
        for p, wanted in zip(graph.inputs, requires_grad, strict=True)
    }
    copy_nodes(joint, graph.compute_nodes(), env)  # the forward, unchanged
    primals = [env[p] for p in graph.inputs]
    structure = map_structure(lambda v: env[v] if isinstance(v, Node) else v, graph.outputs)
    outputs = [v for v in flatten(structure) if isinstance(v, Node)]
    needs_grad = _needs_grad(primals, requires_grad, [env[n] for n in graph.compute_nodes()])
    differentiable = [out in needs_grad for out in outputs]

    grads = _GradientSums(GraphOps(joint))
    for i, out in enumerate(o for o, d in zip(outputs, differentiable, strict=True) if d):
        meta = TensorMeta(out.meta.shape, out.meta.dtype, out.meta.device)  # contiguous, like a fresh grad
        grads.add(out, joint.placeholder(f"tangent_{i}", meta))
    for node in reversed(graph.compute_nodes()):  # users before producers: each sum is complete
        if env[node] in grads.of:
            _backpropagate(joint, env[node], grads, needs_grad)

    input_grads = []
    for primal in (p for p, wanted in zip(primals, requires_grad, strict=True) if wanted):
        if primal not in grads.of:  # no path reached it (or only through e.g. floor): zero
            with _tag_new_nodes(joint, primal):
                grads.of[primal] = zeros(grads.ops, primal.meta.shape, primal.meta.dtype, primal.meta.device)
        input_grads.append(grads.of[primal])
    joint.output((*outputs, *input_grads))
    live = live_nodes(joint)  # drop what no output reads, e.g. gradients of Python scalars
    joint.nodes = [n for n in joint.nodes if n in live]
    return JointGraph(joint, [bool(r) for r in requires_grad], differentiable, structure)


class _GradientSums:
    """The gradient of each value found so far, summed over the paths that reach it."""

    def __init__(self, ops: GraphOps) -> None:
        self.ops = ops
        self.of: dict[Node, Node] = {}

    def add(self, node: Node, grad: Node) -> None:
        grad = sum_to_size(self.ops, grad, node.meta.shape)  # undo broadcasting
        if grad.meta.dtype != node.meta.dtype:  # undo type promotion
            grad = self.ops.convert(grad, node.meta.dtype)
        self.of[node] = self.ops.add(self.of[node], grad) if node in self.of else grad


def _backpropagate(joint: Graph, node: Node, grads: _GradientSums, needs_grad: set[Node]) -> None:
    """Append `node`'s VJP rule, applied to its summed gradient, and pass the results on to
    the inputs that need them."""
    rule = rule_for(node.op)
    if rule is None:  # no gradient flows through this op
        return
    # A tensor passed by keyword (an attention mask, say) is an input like any other, but the rules
    # return gradients for positional arguments only: one that needs a gradient cannot have it
    if any(isinstance(v, Node) and v in needs_grad for v in flatten(node.kwargs)):
        raise NotDifferentiable(node.op, "a tensor that needs a gradient is passed by keyword "
                                         "(rules give gradients to positional arguments only)")
    with joint.provenance(node.source), _tag_new_nodes(joint, node):
        input_grads = rule(grads.ops, grads.of[node], node, *node.args, **node.kwargs)
        for arg, grad in _pair_up(node.args, input_grads):
            if arg in needs_grad:
                grads.add(arg, grad)


def _check_requires_grad(graph: Graph, requires_grad: Sequence[bool]) -> None:
    if len(requires_grad) != len(graph.inputs):
        raise ValueError(f"requires_grad has {len(requires_grad)} entries for {len(graph.inputs)} inputs")
    for node, wanted in zip(graph.inputs, requires_grad, strict=True):
        if wanted and not node.meta.dtype.is_floating_point:
            raise ValueError(f"input {node.name} is {node.meta}: only floating-point inputs can require grad")


def _needs_grad(primals: list[Node], requires_grad: Sequence[bool], nodes: list[Node]) -> set[Node]:
    """The values a gradient can flow into: floating-point values that depend on an input
    that requires grad (integer and boolean values never carry gradients, and `detach` is where
    the user cut the flow)."""
    needs = {p for p, wanted in zip(primals, requires_grad, strict=True) if wanted}
    for node in nodes:
        if node.op == "detach":
            continue
        if node.meta.dtype.is_floating_point and any(i in needs for i in node.inputs()):
            needs.add(node)
    return needs


def _pair_up(args: Sequence[Any], grads: Sequence[Any]) -> Iterator[tuple[Node, Node]]:
    """(argument, its gradient) for every tensor argument a rule gave a gradient to;
    recurses into lists of tensors (`cat`)."""
    for arg, grad in zip(args, grads, strict=False):  # rules may omit trailing non-tensor args
        if isinstance(arg, (tuple, list)) and isinstance(grad, (tuple, list)):
            yield from _pair_up(arg, grad)
        elif isinstance(arg, Node) and grad is not None:
            yield arg, grad


@contextlib.contextmanager
def _tag_new_nodes(graph: Graph, forward_node: Node) -> Iterator[None]:
    """Tag every node appended inside the block as part of `forward_node`'s backward."""
    start = len(graph.nodes)
    yield
    for node in graph.nodes[start:]:
        node.tags.setdefault("backward_of", forward_node.name)
