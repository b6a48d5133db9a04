"""`capture(fn, args, kwargs)`: run `fn` symbolically and return its graph and guards.

With `allow_breaks=True` the graph may end at a graph break: the result then carries a
`ResumePoint`, and `capture_resume` captures the next segment from the real frame the runtime
rebuilt there (see resume.py).
"""

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
from minicompiler.capture.concrete import RealFrame
from minicompiler.capture.errors import Unsupported
from minicompiler.capture.frame import Tracer
from minicompiler.capture.guards import Guard, len_guard
from minicompiler.capture.objects import UserFunctionVariable
from minicompiler.capture.records import InstructionRecord
from minicompiler.capture.resume import REAL_NULL, FrameRecipe, RemainingItems, ResumePoint, write_recipe
from minicompiler.capture.sources import Source, arg_source, fixed_source, kwarg_source
from minicompiler.capture.tensor import TensorVariable
from minicompiler.capture.translator import FrameBreak, InstructionTranslator
from minicompiler.capture.variables import (
    NULL,
    CellVariable,
    ConstantVariable,
    DictVariable,
    IteratorVariable,
    SequenceVariable,
    Variable,
)
from minicompiler.ir import Graph, SourceLoc


@dataclass
class CaptureResult:
    graph: Graph  # torch-level ops; Python values the function returns sit in graph.outputs
    guards: list[Guard]  # all must pass for the graph to be reused on a new call
    input_sources: list[Source]  # one per graph placeholder, in order
    bytecode: list[InstructionRecord]  # every instruction run (inlined callees too), with status
    resume: ResumePoint | None = None  # set when the graph ends at a graph break
    # How to build the returned value from the graph's outputs when it is more than tensors and
    # constants (an object a graph break made, say); None: the outputs are the returned value.
    returned: FrameRecipe | None = None

    def fetch_inputs(self, args: tuple, kwargs: dict) -> list[torch.Tensor]:
        """The placeholders' tensors for a new call (parameters are re-read every time)."""
        return [source.get(args, kwargs) for source in self.input_sources]

    def returned_value(self, outputs: Any, args: tuple, kwargs: dict) -> Any:
        """What the function returns, given what its graph output."""
        if self.returned is None:
            return outputs
        stack, _ = self.returned.rebuild(outputs, args, kwargs)
        return stack[0]


def capture(fn: Callable[..., Any], args: tuple, kwargs: dict, allow_breaks: bool = False) -> CaptureResult:
    """Capture `fn(*args, **kwargs)` as one graph, or raise Unsupported (the caller then runs
    `fn` eagerly). `fn` may be a function, lambda, closure, bound method or nn.Module.
    With `allow_breaks`, the graph may instead end at a resumable graph break."""
    state = CaptureState()
    state.allow_breaks = allow_breaks

    def run() -> Variable:
        fn_var = _wrap_callable(state, fn)
        labels = _argument_labels(fn, args)
        with state.graph.provenance(_definition(fn)):  # the arguments' placeholders point at the `def`
            arg_vars = [state.wrap(a, arg_source(i, labels[i])) for i, a in enumerate(args)]
            kwarg_vars = {k: state.wrap(v, kwarg_source(k)) for k, v in kwargs.items()}
        return fn_var.call(Tracer(state), arg_vars, kwarg_vars)

    return _finish(state, run)


def capture_resume(point: ResumePoint, frame: RealFrame) -> CaptureResult:
    """Capture the next segment of a function that broke at `point`: its own frame continues at
    `frame.index` with `frame`'s real values, which are this segment's arguments."""
    state = CaptureState()
    state.allow_breaks = True

    def run() -> Variable:
        cells = {*point.function.__code__.co_cellvars, *point.function.__code__.co_freevars}
        sources = [arg_source(i, label) for i, label in enumerate(frame.labels())]
        values = [_wrap_slot(state, value, source, source.label in cells)
                  for value, source in zip(frame.arguments(), sources, strict=True)]
        depth = len(frame.stack)
        translator = InstructionTranslator(state, point.function, dict(zip(frame.locals, values[depth:],
                                                                           strict=True)), depth=1)
        translator.stack, translator.ip = values[:depth], frame.index
        return translator.run()

    return _finish(state, run)


def _wrap_slot(state: CaptureState, value: Any, source: Source, is_cell: bool) -> Variable:
    """One value of a rebuilt frame as a Variable of the resumed capture."""
    if value is REAL_NULL:
        return NULL
    if is_cell:  # a closure cell: its contents are read (and guarded) when used
        return CellVariable(real_cell=value, source=source.attr("cell_contents"))
    if isinstance(value, RemainingItems):  # a loop's iterator: the items it has not reached yet
        state.add_guard(len_guard(source.attr("items"), len(value.items)), source)
        items = source.attr("items")
        return IteratorVariable([state.wrap(v, items.item(i)) for i, v in enumerate(value.items)])
    return state.wrap(value, source)


def _finish(state: CaptureState, run: Callable[[], Variable]) -> CaptureResult:
    """Run the capture; the graph's outputs are what the function returned, or, at a graph
    break, the tensors the rest of the function needs."""
    resume, returned = None, None
    try:
        try:
            result = run()
        except FrameBreak as brk:
            resume = _resume_point(state, brk)
            state.graph.output(resume.frame.outputs)
        else:
            returned = _output_or_recipe(state, result)
    except Unsupported as e:
        e.bytecode = state.log.records
        raise
    return CaptureResult(state.graph, state.guards, state.input_sources, state.log.records, resume, returned)


def _output_or_recipe(state: CaptureState, result: Variable) -> FrameRecipe | None:
    """Output the returned value; if it is more than tensors and constants, output its tensors
    and return the recipe that builds it (only where graph breaks are allowed)."""
    try:
        state.graph.output(_as_output(result))
        return None
    except Unsupported:
        if not state.allow_breaks:
            raise
    recipe = write_recipe(state, [result], {})
    state.graph.output(recipe.outputs)
    return recipe


def _resume_point(state: CaptureState, brk: FrameBreak) -> ResumePoint:
    frame, error = brk.frame, brk.error
    try:
        recipe = write_recipe(state, frame.stack, frame.locals)
    except Unsupported as e:
        raise Unsupported(f"{error.reason}; the graph cannot resume after it: {e.reason}", error.loc,
                          error.instruction) from e
    return ResumePoint(frame.fn, brk.index, frame.instructions, frame.kw_names, recipe, error)


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
