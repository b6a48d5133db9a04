"""AOT autograd: differentiate a primitive graph ahead of time, split it into a forward and a
backward graph, and run the compiled pair under torch autograd.

    differentiate(graph, requires_grad) -> JointGraph        VJP rule per primitive (vjp.py, *_rules.py)
    partition(joint, strategy)          -> forward, backward, saved tensors   (save_all | min_cut)
    make_trainable(fwd_runner, bwd_runner, joint, saved) -> callable recorded by torch autograd
    compile_training(graph, requires_grad, compile_graph, strategy) does all three.
"""

from minicompiler.autograd.function import (
    CompiledTraining,
    Runner,
    TrainableGraph,
    compile_training,
    make_trainable,
)
from minicompiler.autograd.joint import JointGraph, differentiate
from minicompiler.autograd.partition import SavedTensor, Strategy, partition
from minicompiler.autograd.vjp import NO_GRADIENT, NOT_DIFFERENTIABLE, VJP_RULES, NotDifferentiable

__all__ = [
    "NOT_DIFFERENTIABLE", "NO_GRADIENT", "VJP_RULES", "CompiledTraining", "JointGraph", "NotDifferentiable",
    "Runner", "SavedTensor", "Strategy", "TrainableGraph", "compile_training", "differentiate",
    "make_trainable", "partition", "sum_to_size",
]
