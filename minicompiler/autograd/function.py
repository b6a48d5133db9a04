"""Run a compiled forward/backward pair as one `torch.autograd.Function`.

Torch autograd records the whole compiled graph as a single node: its forward runs the
forward graph and keeps the saved tensors, its backward runs the backward graph. So
`loss.backward()` and any optimizer work unchanged on compiled code. Each call has a tape of its
own beside its saved tensors: what the forward's library calls recorded for the backward
(ir/recorded_calls.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import torch
from torch.autograd.function import once_differentiable

from minicompiler.autograd.joint import JointGraph, differentiate
from minicompiler.autograd.partition import SavedTensor, Strategy, partition
from minicompiler.ir import Graph, Node, map_structure
from minicompiler.ir.recorded_calls import TAPE, Tape

# A compiled graph: list of input tensors -> tuple of output tensors (the graph's flat outputs).
Runner = Callable[[list[torch.Tensor]], Sequence[torch.Tensor]]


class TrainableGraph:
    """Call it with the list of input tensors; it returns what the original graph returns,
    differentiable with respect to the inputs that were compiled as requiring grad."""

    def __init__(self, forward_runner: Runner, backward_runner: Runner, joint: JointGraph, num_saved: int,
                 written_back: Sequence[int] = ()):
        self.forward_runner = forward_runner
        self.backward_runner = backward_runner
        self.input_names = [p.name for p in joint.primals]
        self.requires_grad = joint.requires_grad  # per input
        self.compiled_without_grad = [i for i, wanted in enumerate(self.requires_grad) if not wanted]
        self.differentiable = joint.differentiable  # per flat output
        self.output_structure = joint.output_structure
        self.num_saved = num_saved
        # the forward's outputs before the saved tensors end with new values of these inputs
        self.written_back = tuple(written_back)

    def __call__(self, inputs: Sequence[torch.Tensor]) -> Any:
        if len(inputs) != len(self.input_names):
            raise TypeError(f"graph takes {len(self.input_names)} inputs, got {len(inputs)}")
        if torch.is_grad_enabled():
            for index in self.compiled_without_grad:
                if inputs[index].requires_grad:
                    raise ValueError(
                        f"input {self.input_names[index]} requires grad, but this graph was compiled without "
                        "its gradient; recompile with requires_grad set for it"
                    )
        outputs = iter(_apply(self, inputs))
        return map_structure(lambda v: next(outputs) if isinstance(v, Node) else v, self.output_structure)


class _CompiledFunction(torch.autograd.Function):
    @staticmethod
    def forward(ctx: Any, graph: TrainableGraph, *inputs: torch.Tensor) -> tuple[torch.Tensor, ...]:
        ctx.tape = {}
        results = tuple(_with_tape(ctx.tape, graph.forward_runner, list(inputs)))
        split = len(results) - graph.num_saved
        outputs, saved = _in_place_writes_dropped(results[:split], inputs, graph), results[split:]
        ctx.graph = graph
        ctx.save_for_backward(*saved)
        # Integer/boolean outputs, and those no input gradient depends on, get no gradient.
        ctx.mark_non_differentiable(*(o for o, d in zip(outputs, graph.differentiable, strict=True)
                                      if not d and o is not None))
        # Autograd would fill a zero gradient for every output nothing differentiated (BatchNorm's
        # running statistics, an unused output): a kernel launch each. The backward makes the zeros
        # it needs itself, for differentiable outputs only.
        ctx.set_materialize_grads(False)
        ctx.differentiable_outputs = [(o.shape, o.dtype, o.device)
                                      for o, d in zip(outputs, graph.differentiable, strict=True) if d]
        return outputs

    @staticmethod
    @once_differentiable  # the backward graph is not itself differentiated (no double backward)
    def backward(ctx: Any, *output_grads: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        graph: TrainableGraph = ctx.graph
        # Compiled code assumes contiguous inputs; autograd may hand us e.g. an expanded ones().
        grads_in = [g for g, d in zip(output_grads, graph.differentiable, strict=True) if d]
        tangents = [torch.zeros(shape, dtype=dtype, device=device) if g is None else g.contiguous()
                    for g, (shape, dtype, device) in zip(grads_in, ctx.differentiable_outputs, strict=True)]
        inputs = [*ctx.saved_tensors, *tangents]
        # autograd keeps saved tensors until the backward returns; dropped here (unless the graph
        # is retained for another backward), the compiled backward frees each after its last use
        ctx.maybe_clear_saved_tensors()
        del tangents, grads_in, output_grads
        grads = iter(_with_tape(ctx.tape, graph.backward_runner, inputs))
        if not _keeps_graph():  # as the saved tensors: the recordings go, unless another backward comes
            ctx.tape = {}
        return (None, *(next(grads) if wanted else None for wanted in graph.requires_grad))


def _apply(graph: TrainableGraph, inputs: Sequence[torch.Tensor]) -> tuple[torch.Tensor, ...]:
    """`_CompiledFunction.apply(graph, *inputs)`, without the Python layer of `Function.apply`
    where it does nothing for us: no functorch transform is active (vmap, grad, ...), so it only
    unwraps tensors a finished transform left wrapped, which `unwrap_if_dead` does here too. Called
    once per training step, forward, it spent ~1 us per input on generator steps."""
    if torch._C._are_functorch_transforms_active():
        return _CompiledFunction.apply(graph, *inputs)
    return _APPLY(graph, *map(torch._C._functorch.unwrap_if_dead, inputs))


# torch's C implementation under Function.apply, bound to this class
_APPLY = torch._C._FunctionBase.__dict__["apply"].__get__(None, _CompiledFunction)


def _in_place_writes_dropped(outputs: Sequence[torch.Tensor], inputs: Sequence[torch.Tensor],
                             graph: TrainableGraph) -> tuple[torch.Tensor | None, ...]:
    """The outputs, with None for each new value a kernel wrote into its input's memory (a
    BatchNorm's running statistics): that output is the input itself, and autograd would make an
    output of it for nothing (api._write_back, seeing None, only bumps the input's version)."""
    first = len(outputs) - len(graph.written_back)
    dropped = list(outputs)
    for position, index in enumerate(graph.written_back, start=first):
        if dropped[position] is inputs[index] and not graph.differentiable[position]:
            dropped[position] = None
    return tuple(dropped)


def _with_tape(tape: Tape, runner: Runner, inputs: list[torch.Tensor]) -> Sequence[torch.Tensor]:
    token = TAPE.set(tape)
    try:
        return runner(inputs)
    finally:
        TAPE.reset(token)


def _keeps_graph() -> bool:
    """Whether the backward running now was asked to keep the graph (retain_graph=True)."""
    keeps = getattr(torch._C._autograd, "_get_current_graph_task_keep_graph", None)
    return True if keeps is None else bool(keeps())


def make_trainable(
    forward_runner: Runner, backward_runner: Runner, joint: JointGraph, saved: list[SavedTensor],
    written_back: Sequence[int] = (),
) -> TrainableGraph:
    """Wrap the runners of a partitioned joint graph (see `partition`) for torch autograd.
    `written_back`: the input each of the forward's last outputs (before the saved tensors) is a
    new value of."""
    return TrainableGraph(forward_runner, backward_runner, joint, len(saved), written_back)


@dataclass
class CompiledTraining:
    """The trainable callable, and the graphs made on the way (for the report)."""

    run: TrainableGraph
    joint: JointGraph
    forward: Graph
    backward: Graph
    saved: list[SavedTensor]


def compile_training(
    graph: Graph,
    requires_grad: Sequence[bool],
    compile_graph: Callable[[Graph], Runner],
    strategy: Strategy = "min_cut",
) -> CompiledTraining:
    """differentiate -> partition -> compile the forward and the backward -> make_trainable."""
    joint = differentiate(graph, requires_grad)
    forward, backward, saved = partition(joint, strategy)
    run = make_trainable(compile_graph(forward), compile_graph(backward), joint, saved)
    return CompiledTraining(run, joint, forward, backward, saved)
