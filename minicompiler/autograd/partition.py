"""Split a joint graph into a forward graph and a backward graph.

    forward(*primals)             -> (*user outputs, *saved)
    backward(*saved, *tangents)   -> (*gradients of the inputs that require grad)

Everything the backward needs from the forward crosses over as a *saved* tensor, kept alive
between the two calls. Which values to save is a memory/compute trade-off:

  save_all  save every forward value the backward reads (what eager PyTorch does, and
            torch's `default_partition`).
  min_cut   save fewer bytes, recomputing cheap pointwise/view ops in the backward instead
            (torch's `min_cut_rematerialization_partition`, in spirit): a minimum cut in the
            data-flow graph, where cutting a value means saving it and costs its size.

Activation checkpointing (`torch.utils.checkpoint` in the user's code; capture tags the nodes
of each region) is a promise to recompute: min_cut never saves a value inside a checkpointed
region, and always saves what code after the region reads from it (as eager does, which saves
each region's input), so the backward recomputes one region at a time.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

import torch

from minicompiler.autograd.joint import JointGraph
from minicompiler.autograd.maxflow import Capacities, min_cut
from minicompiler.autograd.shape_rules import CONV_GRADIENTS, RANDOM_FUNCTIONS
from minicompiler.autograd.subgraph import ancestors, extract
from minicompiler.ir import OPS, Graph, Node, map_structure
from minicompiler.ir.symbolic import size_hint

CHECKPOINT = "checkpoint"  # node.tags[CHECKPOINT]: the checkpointed region (capture/checkpoint.py) it is in

Strategy = Literal["save_all", "min_cut"]


@dataclass(frozen=True)
class SavedTensor:
    """A value the forward graph hands to the backward graph."""

    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype
    nbytes: int

    @staticmethod
    def of(node: Node) -> SavedTensor:
        return SavedTensor(node.name, node.meta.shape, node.meta.dtype, _nbytes(node))


def partition(joint: JointGraph, strategy: Strategy = "min_cut") -> tuple[Graph, Graph, list[SavedTensor]]:
    """The forward graph, the backward graph and the tensors saved between them."""
    if strategy not in PARTITIONERS:
        raise ValueError(f"unknown partition strategy {strategy!r}; choose one of {', '.join(PARTITIONERS)}")
    saved = PARTITIONERS[strategy](joint)
    forward = extract(joint.graph, joint.primals, [*joint.forward_outputs, *saved])
    # what the backward recomputes is computed just before it is read, not all at the start: a
    # checkpointed region's activations then live while its own gradients are computed, as in eager
    late = set(joint.graph.nodes) - _reads_tangents(joint)
    backward = extract(joint.graph, [*saved, *joint.tangents], joint.gradients, late=late)
    _detaches_read_through(forward)
    return forward, backward, [SavedTensor.of(node) for node in saved]


def _detaches_read_through(graph: Graph) -> None:
    """Nothing differentiates the forward graph again, so a detach inside it is its input: its
    readers read that instead (a graph output keeps its detach, which is the tensor the caller
    sees). Otherwise the kernel computing a batch norm's mean stored it twice, detached and not,
    and the normalization read the second copy. (Not in the backward: there a detached and a
    plain x - mean, each computed in the kernel that reads it, would become one value that one
    kernel stores, activation-sized, for the other.)"""
    detached = {node: node.args[0] for node in graph.compute_nodes() if node.op == "detach"}
    for node in graph.compute_nodes():
        if node.op != "detach" and any(i in detached for i in node.inputs()):
            node.args = map_structure(lambda v: _undetached(v, detached), node.args)
            node.kwargs = map_structure(lambda v: _undetached(v, detached), node.kwargs)


def _undetached(value: object, detached: dict[Node, Node]) -> object:
    while isinstance(value, Node) and value in detached:
        value = detached[value]
    return value


def save_all(joint: JointGraph) -> list[Node]:
    """The values the forward computes anyway that the backward reads (in graph order)."""
    forward = _forward_region(joint)
    backward = ancestors(joint.gradients, stop_at=forward) - forward
    read = {i for node in backward for i in node.inputs()} | set(joint.gradients)
    return [node for node in joint.graph.nodes if node in forward and node in read]


def save_min_cut(joint: JointGraph) -> list[Node]:
    """The cheapest set of values to save so that the backward can compute all it needs.

    Flow network (each value v split in two, v.in -> v.out, so that the edge between them
    stands for v itself):
      source -> v.in      infinite  v must come from the forward: an input, or a forward
                                    reduction/extern (too costly to run twice)
      v.in -> v.out       bytes(v)  cutting this edge = saving v
      v.out -> u.in       infinite  u reads v (cutting data-flow edges is not an option)
      v.out -> sink       infinite  a backward node (one that reads a tangent) reads v
    A minimum cut separates the backward from the inputs at the lowest cost; values on the
    sink side of it are recomputed in the backward from the saved ones. Of the cuts that cost
    the same, the one nearest the sink recomputes least: BatchNorm's mean = sum / n is saved
    instead of sum, so the backward does not spend a kernel launch on the division.

    What a convolution's weight gradient reads (the convolution's input) is saved, as eager
    saves it: recomputed, it would come from the kernel that reads the input's gradient, after
    that gradient's call, and the wrapper could not get both gradients from one call
    (`convolution_grads`, codegen/wrapper.py). The forward stores it anyway, for the convolution.
    """
    after_tangents = _reads_tangents(joint)
    forward = _forward_region(joint)
    # Only values the backward needs that are computable from the primals alone matter.
    needed = ancestors(joint.gradients)
    candidates = [n for n in joint.graph.nodes if n in needed and n not in after_tangents]
    is_candidate = set(candidates)
    users = joint.graph.users()
    gradients = set(joint.gradients)
    recompute = must_recompute(joint, users, after_tangents)
    conv_inputs = _convolution_inputs(after_tangents)
    capacities: Capacities = {}
    for node in candidates:
        # a value that must be recomputed cannot be cut (saved), and is not bound to the forward
        capacities.setdefault((node, "in"), {})[(node, "out")] = math.inf if node in recompute else _save_cost(node)
        # a region's output (what later code reads from it) is saved, as eager checkpointing
        # saves each region's input: recomputed from further back, every region's activations
        # would be alive at once when the backward starts
        region = node.tags.get(CHECKPOINT)
        region_output = region is not None and node not in recompute and any(
            user in forward and user.tags.get(CHECKPOINT) != region for user in users[node])
        if node.op == "placeholder" or region_output or (node in forward and node not in recompute and (
                OPS[node.op].kind not in ("pointwise", "view") or node in conv_inputs)):
            capacities.setdefault("source", {})[(node, "in")] = math.inf
        out_edges = capacities.setdefault((node, "out"), {})
        if node in gradients or any(user in after_tangents for user in users[node]):
            out_edges["sink"] = math.inf
        for user in users[node]:
            if user in is_candidate:
                out_edges[(user, "in")] = math.inf
    source_side = min_cut(capacities, "source", "sink", nearest="sink")
    return [n for n in candidates if (n, "in") in source_side and (n, "out") not in source_side]


def must_recompute(joint: JointGraph, users: dict[Node, list[Node]], after_tangents: set[Node]) -> set[Node]:
    """The checkpointed values inside their region: every forward reader is in the same region.
    A random draw is kept out: recomputing it would draw new numbers (torch restores the RNG
    state for that; saving the draw gives the same values)."""
    recompute = set()
    outputs = set(joint.forward_outputs)
    for node in joint.graph.compute_nodes():
        region = node.tags.get(CHECKPOINT)
        if region is None or node in outputs or (node.op == "torch_call" and node.args[0] in RANDOM_FUNCTIONS):
            continue
        readers = [u for u in users[node] if u not in after_tangents]
        if all(u.tags.get(CHECKPOINT) == region for u in readers):
            recompute.add(node)
    return recompute


def _convolution_inputs(backward: set[Node]) -> set[Node]:
    """The values the backward's convolution weight gradients read: the convolutions' inputs."""
    weight_gradients = {grads[1] for grads in CONV_GRADIENTS.values()}
    return {node.args[1] for node in backward if node.op == "torch_call" and node.args[0] in weight_gradients
            and isinstance(node.args[1], Node)}


def recomputed_checkpoints(backward: Graph) -> list[str]:
    """The backward's nodes that run a checkpointed region's forward again (for the report)."""
    return [node.name for node in backward.compute_nodes() if CHECKPOINT in node.tags]


PARTITIONERS: dict[str, Callable[[JointGraph], list[Node]]] = {"save_all": save_all, "min_cut": save_min_cut}


def _forward_region(joint: JointGraph) -> set[Node]:
    """The primals and every value the user outputs need: the forward computes these."""
    return ancestors(joint.forward_outputs) | set(joint.primals)


def _reads_tangents(joint: JointGraph) -> set[Node]:
    """The tangents and every value computed from them: these only exist in the backward."""
    reached = set(joint.tangents)
    for node in joint.graph.compute_nodes():
        if any(i in reached for i in node.inputs()):
            reached.add(node)
    return reached


def _save_cost(node: Node) -> int:
    """What saving `node` costs the cut: its bytes, and one more for a view. A view and what it
    views are the same bytes; saved, the view is an output of the forward, which the forward's
    wrapper makes with torch's op (5.6 us on the H100 machine; a BatchNorm weight's reshape to
    (1, C, 1, 1), 40 of them per ResNet-18 step), where the backward makes it again from what it
    views in one cheap call (`reinterpret_tensor`, 1.6 us)."""
    return _nbytes(node) + (node.op in OPS and OPS[node.op].kind == "view")


def _nbytes(node: Node) -> int:
    # the size this call has (a hint, unguarded, when symbolic): it only steers which cut is
    # chosen, and every cut is a correct partition
    return size_hint(node.meta.numel) * node.meta.dtype.itemsize


def distinct_gradients(backward: Graph) -> list[str]:
    """Each of the backward's outputs (the inputs' gradients) its own tensor; one note per copy.

    Simplification merges equal computations, and two parameters can have equal gradients: in a
    residual block with a downsample, the block's last batch norm and the downsample's batch norm
    add up into one output, so their biases get the same gradient, one sum. Returned twice, that
    one tensor would be both `.grad`s; autograd's AccumulateGrad keeps a gradient only if nothing
    else holds it, and copies it otherwise, with a torch kernel launched at every step (three per
    ResNet-18 step). A `clone` for each repeat instead joins the kernel computing the value, which
    writes it twice. Where the gradient is a view (a bias's: the sum reshaped), the value viewed
    is copied, and the copy viewed alike: the kernel computes that value, in that shape."""
    outputs = backward.outputs
    if not isinstance(outputs, tuple):
        return []
    seen: set[Node] = set()
    distinct, notes = [], []
    for grad in outputs:
        if isinstance(grad, Node) and grad.op != "placeholder" and grad in seen:
            views = []
            while OPS[grad.op].kind == "view" and grad.args[0].op != "placeholder":
                views.append(grad)
                grad = grad.args[0]
            copy = backward.call_before(backward.output_node, "clone", grad)
            notes.append(f"{copy.name}: a copy of {grad.name}, which is also another input's gradient")
            for view in reversed(views):
                copy = backward.call_before(backward.output_node, view.op, copy, *view.args[1:], **view.kwargs)
            grad = copy
        seen.add(grad)
        distinct.append(grad)
    backward.output_node.args = (tuple(distinct),)
    return notes
