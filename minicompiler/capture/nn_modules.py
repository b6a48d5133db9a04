"""Built-in torch.nn modules, mapped to their functional form.

`nn.Linear(x)` is captured as `F.linear(x, self.weight, self.bias)` rather than by inlining
torch's own `forward` (which would work too, but drags in torch's internals). The module's
attributes are read through `NNModuleVariable.getattr`, so parameters become graph inputs
and settings like `eps` are guarded. A built-in module missing from this table is inlined.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import torch
import torch.nn.functional as F
from torch import nn

from minicompiler.capture.errors import Unsupported
from minicompiler.capture.tensor import TensorVariable, call_torch_function
from minicompiler.capture.variables import ConstantVariable, TupleVariable, Variable

if TYPE_CHECKING:
    from minicompiler.capture.frame import Tracer
    from minicompiler.capture.objects import NNModuleVariable

ModuleLowering = Callable[..., Variable]


def _calls(fn: Callable[..., Any], *attrs: str) -> ModuleLowering:
    """module(input) == fn(input, module.<attrs[0]>, module.<attrs[1]>, ...)"""

    def lowering(tx: Tracer, module: NNModuleVariable, input: Variable) -> Variable:
        return call_torch_function(tx, fn, [input, *(module.getattr(tx, a) for a in attrs)], {})

    return lowering


def _gelu(tx: Tracer, module: NNModuleVariable, input: Variable) -> Variable:
    return call_torch_function(tx, F.gelu, [input], {"approximate": module.getattr(tx, "approximate")})


def _batch_norm(tx: Tracer, module: NNModuleVariable, input: Variable) -> Variable:
    """`_BatchNorm.forward`, with one change: momentum=None (a cumulative average of the batch
    statistics) weighs the new batch by 1 / num_batches_tracked as a tensor, where torch reads the
    count back as a Python float (which would break the graph)."""
    def attr(name: str) -> Any:
        return module.getattr(tx, name).as_python()

    if isinstance(input, TensorVariable):
        try:
            module.value._check_input_dim(input.node.meta.fake())
        except ValueError as error:  # eager raises it, with the user's traceback
            raise Unsupported(f"{module.describe()}: {error}") from error
    momentum = module.getattr(tx, "momentum")
    training, track = attr("training"), attr("track_running_stats")
    count = module.getattr(tx, "num_batches_tracked")
    if training and track and isinstance(count, TensorVariable):
        count.call_method(tx, "add_", [ConstantVariable(1)], {})
        if attr("momentum") is None:
            momentum = call_torch_function(tx, torch.reciprocal, [count], {})
    if attr("momentum") is None and not isinstance(momentum, TensorVariable):
        momentum = ConstantVariable(0.0)
    running = [module.getattr(tx, name) for name in ("running_mean", "running_var")]
    use_batch_stats = training or all(isinstance(r, ConstantVariable) for r in running)  # no buffers
    if training and not track:  # batch statistics only; the buffers (if any) stay as they are
        running = [ConstantVariable(None), ConstantVariable(None)]
    return call_torch_function(tx, F.batch_norm, [input, *running, module.getattr(tx, "weight"),
                                                  module.getattr(tx, "bias"), ConstantVariable(use_batch_stats),
                                                  momentum, module.getattr(tx, "eps")], {})


def _identity(tx: Tracer, module: NNModuleVariable, input: Variable, *args: Any, **kwargs: Any) -> Variable:
    return input


class ChildrenVariable(Variable):
    """`module.children()` / `module.named_children()` (RegNet's stages loop over their blocks so):
    the submodules, or (name, submodule) pairs, each once, in order, as a tuple to iterate."""

    def __init__(self, module: NNModuleVariable, named: bool) -> None:
        self.module, self.named = module, named

    def describe(self) -> str:
        return f"{self.module.describe()}.{'named_children' if self.named else 'children'}"

    def call(self, tx: Tracer, args: list[Variable], kwargs: dict[str, Variable]) -> Variable:
        if args or kwargs:
            raise Unsupported(f"calling {self.describe()} with arguments")
        seen, items = set(), []
        for name, child in self.module.value._modules.items():
            if child is not None and id(child) not in seen:
                seen.add(id(child))
                child_var = self.module.getattr(tx, name)
                items.append(TupleVariable([ConstantVariable(name), child_var]) if self.named else child_var)
        return TupleVariable(items)


def check_no_hooks(module: nn.Module, where: str) -> None:
    from torch.nn.modules import module as module_globals

    hooks = [module._forward_hooks, module._forward_pre_hooks, module._backward_hooks,
             getattr(module_globals, "_global_forward_hooks", {}),
             getattr(module_globals, "_global_forward_pre_hooks", {})]
    if any(hooks):
        raise Unsupported(f"the module {where} has hooks, which capture does not run yet")


MODULE_LOWERINGS: dict[type[nn.Module], ModuleLowering] = {
    nn.Linear: _calls(F.linear, "weight", "bias"),
    nn.ReLU: _calls(F.relu, "inplace"),
    nn.GELU: _gelu,
    nn.SiLU: _calls(F.silu, "inplace"),
    nn.Sigmoid: _calls(torch.sigmoid),
    nn.Tanh: _calls(torch.tanh),
    nn.LeakyReLU: _calls(F.leaky_relu, "negative_slope", "inplace"),
    nn.LayerNorm: _calls(F.layer_norm, "normalized_shape", "weight", "bias", "eps"),
    nn.Dropout: _calls(F.dropout, "p", "training", "inplace"),
    nn.Softmax: _calls(F.softmax, "dim"),
    nn.LogSoftmax: _calls(F.log_softmax, "dim"),
    nn.Flatten: _calls(torch.flatten, "start_dim", "end_dim"),
    nn.Identity: _identity,
    nn.BatchNorm1d: _batch_norm,
    nn.BatchNorm2d: _batch_norm,
    nn.BatchNorm3d: _batch_norm,
}
