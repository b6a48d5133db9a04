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

from minicompiler.capture.tensor import call_torch_function
from minicompiler.capture.variables import Variable

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


def _identity(tx: Tracer, module: NNModuleVariable, input: Variable, *args: Any, **kwargs: Any) -> Variable:
    return input


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
}
