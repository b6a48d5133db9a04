"""`capture(fn, args, kwargs)`: run `fn` symbolically and return its graph and guards."""

from __future__ import annotations

import inspect
import linecache
import types
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import torch
from torch import nn

from minicompiler.capture.builder import CaptureState
from minicompiler.capture.errors import Unsupported
from minicompiler.capture.frame import Tracer
from minicompiler.capture.guards import Guard
from minicompiler.capture.objects import UserFunctionVariable
from minicompiler.capture.records import InstructionRecord
from minicompiler.capture.sources import Source, arg_source, fixed_source, kwarg_source
from minicompiler.capture.tensor import TensorVariable
from minicompiler.capture.variables import ConstantVariable, DictVariable, SequenceVariable, Variable
from minicompiler.ir import Graph, SourceLoc


@dataclass
class CaptureResult:
    graph: Graph  # torch-level ops; Python values the function returns sit in graph.outputs
    guards: list[Guard]  # all must pass for the graph to be reused on a new call
    input_sources: list[Source]  # one per graph placeholder, in order
    bytecode: list[InstructionRecord]  # every instruction run (inlined callees too), with status

    def fetch_inputs(self, args: tuple, kwargs: dict) -> list[torch.Tensor]:
        """The placeholders' tensors for a new call (parameters are re-read every time)."""
        return [source.get(args, kwargs) for source in self.input_sources]


def capture(fn: Callable[..., Any], args: tuple, kwargs: dict) -> CaptureResult:
    """Capture `fn(*args, **kwargs)` as one graph, or raise Unsupported (the caller then runs
    `fn` eagerly). `fn` may be a function, lambda, closure, bound method or nn.Module."""
    state = CaptureState()
    try:
        fn_var = _wrap_callable(state, fn)
        labels = _argument_labels(fn, args)
        with state.graph.provenance(_definition(fn)):  # the arguments' placeholders point at the `def`
            arg_vars = [state.wrap(a, arg_source(i, labels[i])) for i, a in enumerate(args)]
            kwarg_vars = {k: state.wrap(v, kwarg_source(k)) for k, v in kwargs.items()}
        result = fn_var.call(Tracer(state), arg_vars, kwarg_vars)
        state.graph.output(_as_output(result))
    except Unsupported as e:
        e.bytecode = state.log.records
        raise
    return CaptureResult(state.graph, state.guards, state.input_sources, state.log.records)


def _wrap_callable(state: CaptureState, fn: Any) -> Variable:
    if isinstance(fn, types.MethodType):  # obj.method: `self` is the object, read as "self"
        owner = state.wrap(fn.__self__, fixed_source(fn.__self__, "self"))
        return UserFunctionVariable(fn.__func__, self_var=owner)
    return state.wrap(fn, fixed_source(fn, "self" if isinstance(fn, nn.Module) else "fn"))


def _definition(fn: Any) -> SourceLoc | None:
    """Where the captured function is defined (its `def` line)."""
    target = type(fn).forward if isinstance(fn, nn.Module) else getattr(fn, "__func__", fn)
    code = getattr(target, "__code__", None)
    if code is None:
        return None
    line = linecache.getline(code.co_filename, code.co_firstlineno).strip()
    return SourceLoc(code.co_filename, code.co_firstlineno, line, -1, code.co_qualname)


def _argument_labels(fn: Any, args: tuple) -> list[str]:
    """Parameter names for the positional arguments: the graph's placeholders are named after them."""
    labels: list[str] = []
    try:
        signature = inspect.signature(fn.forward if isinstance(fn, nn.Module) else fn)
        parameters = list(signature.parameters.values())
    except (TypeError, ValueError):  # some builtins have no signature
        parameters = []
    for p in parameters:
        if p.kind in (inspect.Parameter.POSITIONAL_ONLY, inspect.Parameter.POSITIONAL_OR_KEYWORD):
            labels.append(p.name)
        elif p.kind is inspect.Parameter.VAR_POSITIONAL:
            labels += [f"{p.name}_{i}" for i in range(len(args) - len(labels))]
    labels += [f"arg{i}" for i in range(len(labels), len(args))]
    return labels[: len(args)]


def _as_output(value: Variable) -> Any:
    """The returned Variable as graph.output's structure: Nodes and Python constants."""
    if isinstance(value, TensorVariable):
        return value.node
    if isinstance(value, ConstantVariable):
        return value.value
    if isinstance(value, SequenceVariable):
        items = [_as_output(item) for item in value.items]
        return items if value.python_type() is list else tuple(items)
    if isinstance(value, DictVariable):
        return {k: _as_output(v) for k, v in value.items.items()}
    raise Unsupported(f"returning {value.describe()} from a captured function")
