"""torch functions that ask about the program rather than compute: answered at capture time.

Libraries test `torch.compiler.is_compiling()` to take paths that compile well (no hooks, no
Python-side caches, no data-dependent checks), as they do under torch.compile; during capture
the answer is True. `torch._check(cond)` and friends assert a Python condition: one that holds
at capture time holds for every call the guards admit, so it leaves nothing in the graph (it is
handled like a builtin, so that its message may be a function). Questions about global state
(is grad mode on? is autocast on?) are answered with the state at capture time, and a guard
checks on every call that the answer still holds.
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

import torch

from minicompiler.capture.builtins import handles
from minicompiler.capture.errors import Unsupported
from minicompiler.capture.guards import Guard
from minicompiler.capture.torch_ops import lowers
from minicompiler.capture.variables import ConstantVariable, Variable
from minicompiler.ir import Graph
from minicompiler.ir.symbolic import SymSize

if TYPE_CHECKING:
    from minicompiler.capture.frame import Tracer


def _compiling_functions() -> list[Any]:
    found = [torch.compiler.is_compiling, torch.compiler.is_dynamo_compiling]
    for module_name, name in (("torch._dynamo", "is_compiling"), ("torch._utils", "is_compiling"),
                              ("torch._dynamo.external_utils", "is_compiling")):
        module = __import__(module_name, fromlist=[name])
        if hasattr(module, name):
            found.append(getattr(module, name))
    return [fn for fn in found if callable(fn)]


@handles(*_compiling_functions())
def is_compiling(tx: Tracer) -> Variable:
    return ConstantVariable(not _packs_nested_batch(tx))


@lowers(torch.jit.is_scripting, torch.jit.is_tracing, torch.compiler.is_exporting)
def is_scripting(g: Graph) -> bool:
    return False


# torch functions written in Python first ask whether an argument overrides torch
# (`__torch_function__`, a tensor subclass) to hand the call over to it. Capture takes plain
# tensors only, and guards their type, so the answer is no.
@lowers(torch._C._has_torch_function, torch._C._has_torch_function_unary, torch._C._has_torch_function_variadic)
def has_torch_function(g: Graph, *args: Any) -> bool:
    return False


@handles(torch._check, torch._check_index, torch._check_value, torch._check_type, torch._check_not_implemented)
def check(tx: Tracer, condition: Variable, message: Variable | None = None) -> Variable:
    if condition.has_tensor():
        raise Unsupported("torch._check on a tensor's value (the graph cannot check it)")
    if not condition.truth():
        raise Unsupported("a torch._check fails at capture time (eager raises the error)")
    return ConstantVariable(None)  # the message (often a lambda) is only built when the check fails


@handles(torch._check_with)
def check_with(tx: Tracer, error_type: Variable, condition: Variable, message: Variable | None = None) -> Variable:
    return check(tx, condition)  # the error type only matters when the check fails


@handles(torch._check_is_size)
def check_is_size(tx: Tracer, size: Variable, message: Variable | None = None,
                  max: Variable | None = None) -> Variable:  # noqa: A002 - torch's keyword
    # a size is an int >= 0 (0 is one: the int itself is not the condition), at most `max` if given
    value = size.as_python() if isinstance(size, ConstantVariable) else None
    if type(value) is not int and not isinstance(value, SymSize):  # a symbolic size: compared with guards
        raise Unsupported(f"torch._check_is_size on {size.describe()}")
    if value < 0 or (max is not None and value > max.as_python()):
        raise Unsupported("a torch._check_is_size fails at capture time (eager raises the error)")
    return ConstantVariable(None)


@handles(torch.finfo, torch.iinfo)
def dtype_info(tx: Tracer, dtype: Variable | None = None) -> Variable:
    # torch.finfo(dtype).min: facts about a dtype, fixed (the dtype is a constant)
    info = torch.finfo if dtype is None or dtype.as_python().is_floating_point else torch.iinfo
    return tx.state.wrap(info(*([] if dtype is None else [dtype.as_python()])), None)


def _state_answer(tx: Tracer, question: str, read: Any) -> Variable:
    answer = read()
    tx.state.keep_guard(Guard("predicate", f"{question} is {answer}", "global state",
                                   lambda value: value == answer, lambda args, kwargs: read()))
    return ConstantVariable(answer)


@handles(torch.is_grad_enabled)
def is_grad_enabled(tx: Tracer) -> Variable:
    return _state_answer(tx, "torch.is_grad_enabled()", torch.is_grad_enabled)


@handles(torch.backends.mha.get_fastpath_enabled)
def mha_fastpath_enabled(tx: Tracer) -> Variable:
    # nn.MultiheadAttention and nn.TransformerEncoderLayer ask before their fused inference path: one
    # call (returning several tensors) that computes what their general path does. They are told no:
    # the general path's ops are what the compiler fuses.
    if _packs_nested_batch(tx):
        return _state_answer(tx, "torch.backends.mha.get_fastpath_enabled()",
                             torch.backends.mha.get_fastpath_enabled)
    return ConstantVariable(False)


def _packs_nested_batch(tx: Tracer) -> bool:
    """Whether this is nn.TransformerEncoder in inference with a padding mask, which eager packs into
    a nested tensor (its output is then zero at the padded positions; the general path computes
    them). There capture answers as eager would (the fast path is on, nothing is compiling), so
    the packing is met, runs for real at a graph break, and the call carries on eagerly from there
    (a graph cannot take a nested tensor). torch.compile takes the general path instead, and its
    padded positions differ from eager's."""
    if getattr(tx, "code", None) is not torch.nn.TransformerEncoder.forward.__code__:
        return False
    encoder, mask = tx.locals.get("self"), tx.locals.get("src_key_padding_mask")  # type: ignore[attr-defined]
    if not torch.backends.mha.get_fastpath_enabled() or mask is None or not mask.has_tensor():
        return False
    module = encoder.value  # type: ignore[union-attr]
    learns = torch.is_grad_enabled() and any(p.requires_grad for p in module.parameters())
    return getattr(module, "use_nested_tensor", False) and not (module.layers[0].training or learns)


@handles(torch.is_autocast_enabled)
def is_autocast_enabled(tx: Tracer, device_type: Variable | None = None) -> Variable:
    device = "cuda" if device_type is None else device_type.as_python()  # no argument: CUDA's, as torch
    return _state_answer(tx, f"torch.is_autocast_enabled({device!r})", lambda: torch.is_autocast_enabled(device))


@handles(torch.autocast)
def autocast(tx: Tracer, device_type: Variable, dtype: Variable | None = None, enabled: Variable | None = None,
             cache_enabled: Variable | None = None) -> Variable:
    # `with torch.autocast(device, enabled=False):` (Llama's rotary embedding, "force float32")
    # changes nothing where autocast is off already: a no-op block, guarded on autocast staying off
    if enabled is None or enabled.as_python() is not False:
        raise Unsupported("torch.autocast(enabled=True) is not captured (mixed precision)")
    if is_autocast_enabled(tx, device_type).as_python():
        raise Unsupported("torch.autocast(enabled=False) inside a region where autocast is on")
    return tx.state.wrap(contextlib.nullcontext, None).call(tx, [], {})  # made as the code would make it
