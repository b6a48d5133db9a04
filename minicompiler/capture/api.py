"""`capture(fn, args, kwargs)`: run `fn` symbolically and return its graph and guards.

With `allow_breaks=True` the graph may end at a graph break: the result then carries a
`ResumePoint`, and `capture_resume` captures the next segment from the real frame the runtime
rebuilt there (see resume.py).
"""

from __future__ import annotations

import inspect
import itertools
import linecache
import types
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch
from torch import nn

from minicompiler.capture.builder import CaptureState
from minicompiler.capture.concrete import RealFrame
from minicompiler.capture.errors import Unsupported
from minicompiler.capture.float_inputs import float_input
from minicompiler.capture.frame import Tracer
from minicompiler.capture.guards import Guard, call_shape_guard, len_guard, separate_memory_guard, type_guard
from minicompiler.capture.objects import UserFunctionVariable
from minicompiler.capture.records import InstructionRecord, TraceLog
from minicompiler.capture.resume import REAL_NULL, FrameRecipe, RemainingItems, ResumePoint, write_recipe
from minicompiler.capture.side_effects import Effect, replay
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
from minicompiler.ir import Graph, SourceLoc, map_structure
from minicompiler.ir.symbolic import SizeEnv, SizeGuard, SymSize


@dataclass
class CaptureResult:
    graph: Graph  # torch-level ops; Python values the function returns sit in graph.outputs
    guards: list[Guard]  # all must pass for the graph to be reused on a new call
    input_sources: list[Source]  # one per graph placeholder, in order
    bytecode: list[InstructionRecord]  # every instruction run (inlined callees too), with status
    trace: TraceLog  # the interpreter's state after each instruction (for the bytecode stepper)
    resume: ResumePoint | None = None  # set when the graph ends at a graph break
    # How to build the returned value from the graph's outputs when it is more than tensors and
    # constants (an object a graph break made, say); None: the outputs are the returned value.
    returned: FrameRecipe | None = None
    # Inputs the function changes in place, by placeholder index, in eager's order. When there are
    # any, the graph outputs `(outputs, new value of each)` and the runtime copies them back.
    mutated_inputs: list[int] = field(default_factory=list)
    # Positions (among the flattened returned values) of the tensors that are NumPy arrays in the
    # user's code: the runtime hands them back as arrays.
    numpy_outputs: set[int] = field(default_factory=set)
    # Inputs with dynamic dims (their guards accept any size >= 2 there; the graph itself was
    # captured for this call's sizes): the runtime keys the graphs of one entry by those sizes.
    dynamic_inputs: list[tuple[Source, tuple[int, ...]]] = field(default_factory=list)
    # With symbolic sizes: the symbols (each a dynamic dim of an input: source and dim) and the
    # guards that decisions on them recorded, through capture and every later stage
    sizes: SizeEnv | None = None
    symbols: dict[str, tuple[Source, int | None]] = field(default_factory=dict)  # dim None: an int itself
    # attribute writes on objects from outside and logging calls (see side_effects.py), made after each run
    side_effects: list[Effect] = field(default_factory=list)

    def symbol_values(self, args: tuple, kwargs: dict) -> dict[str, int]:
        """What each symbol is in a call."""
        return {name: source.get(args, kwargs) if dim is None else source.get(args, kwargs).shape[dim]
                for name, (source, dim) in self.symbols.items()}

    def dynamic_sizes(self, args: tuple, kwargs: dict) -> tuple[int, ...]:
        """The sizes of the dynamic dims in a call: what tells this entry's graphs apart."""
        sizes = []
        for source, dims in self.dynamic_inputs:
            shape = source.get(args, kwargs).shape
            sizes += [shape[d] for d in dims]
        return tuple(sizes)

    def fetch_inputs(self, args: tuple, kwargs: dict) -> list[torch.Tensor]:
        """The placeholders' tensors for a new call (parameters are re-read every time)."""
        return [source.get(args, kwargs) for source in self.input_sources]

    def replay_side_effects(self) -> None:
        replay(self.side_effects)

    def split_mutations(self, outputs: Any) -> tuple[Any, list[torch.Tensor]]:
        """(what the function's graph outputs, the new values of the inputs it changed)."""
        if not self.mutated_inputs:
            return outputs, []
        return outputs[0], list(outputs[1:])

    def returned_value(self, outputs: Any, args: tuple, kwargs: dict) -> Any:
        """What the function returns, given what its graph output."""
        if self.returned is None:
            return self._as_numpy(outputs) if self.numpy_outputs else outputs
        stack, _ = self.returned.rebuild(outputs, args, kwargs)
        return stack[0]


    def _as_numpy(self, outputs: Any) -> Any:
        positions = itertools.count()
        return map_structure(lambda v: v.numpy() if next(positions) in self.numpy_outputs else v, outputs)


DynamicDims = Callable[[str, torch.Tensor], tuple[int, ...]]


def capture(fn: Callable[..., Any], args: tuple, kwargs: dict, allow_breaks: bool = False,
            dynamic_dims: DynamicDims | None = None, symbolic: bool = False) -> CaptureResult:
    """Capture `fn(*args, **kwargs)` as one graph, or raise Unsupported (the caller then runs
    `fn` eagerly). `fn` may be a function, lambda, closure, bound method or nn.Module.
    With `allow_breaks`, the graph may instead end at a resumable graph break.
    `dynamic_dims(source path, tensor)` names the dims of an input whose guard accepts any size;
    with `symbolic`, those dims are symbols in the graph (see ir/symbolic.py), not this call's sizes."""
    body = fn.forward if isinstance(fn, torch.nn.Module) else fn
    if inspect.isgeneratorfunction(body) or inspect.iscoroutinefunction(body) or inspect.isasyncgenfunction(body):
        # calling one runs none of its body: that happens later, as the caller iterates or awaits
        raise Unsupported("a generator or coroutine function is not supported: its body runs only as "
                          "the caller iterates or awaits the object the call returns")
    state = CaptureState()
    state.allow_breaks = allow_breaks
    if dynamic_dims is not None:
        state.dynamic_dims = dynamic_dims
    if symbolic:
        state.sizes = SizeEnv()

    def run() -> Variable:
        fn_var = _wrap_callable(state, fn)
        labels = _argument_labels(fn, args)
        with state.graph.provenance(_definition(fn)):  # the arguments' placeholders point at the `def`
            arg_vars = [state.wrap(a, arg_source(i, labels[i])) for i, a in enumerate(args)]
            kwarg_vars = {k: state.wrap(v, kwarg_source(k)) for k, v in kwargs.items()}
        return fn_var.call(Tracer(state), arg_vars, kwarg_vars)

    result = _finish(state, run, args, kwargs)
    result.guards.append(call_shape_guard(args, kwargs))  # last: a missing argument's own guard says more
    return result


def capture_resume(point: ResumePoint, frame: RealFrame, float_inputs: frozenset[str] = frozenset(),
                   dynamic_dims: DynamicDims | None = None, symbolic: bool = False) -> CaptureResult:
    """Capture the next segment of a function that broke at `point`: its own frame continues at
    `frame.index` with `frame`'s real values, which are this segment's arguments. The float
    slots named in `float_inputs` ("args[2]") become graph inputs instead of constants.
    `dynamic_dims` and `symbolic` as for `capture`."""
    state = CaptureState()
    state.allow_breaks = True
    if dynamic_dims is not None and symbolic:  # dynamic dims only with symbols: a segment has no per-size variants
        state.dynamic_dims, state.sizes = dynamic_dims, SizeEnv()
    arguments = frame.arguments()
    device = next((v.device for v in arguments if isinstance(v, torch.Tensor)), torch.device("cpu"))

    def run() -> Variable:
        cells = {*point.function.__code__.co_cellvars, *point.function.__code__.co_freevars}
        sources = [arg_source(i, label) for i, label in enumerate(frame.labels())]
        slots = list(zip(arguments, sources, strict=True))
        # tensors first: an int slot that equals one of their symbolic dims is read as that symbol
        wrapped = {i: float_input(state, value, source, device) if type(value) is float and source.path in float_inputs
                   else _wrap_slot(state, value, source, source.label in cells)
                   for i, (value, source) in enumerate(slots) if not _is_size_slot(state, value)}
        wrapped.update({i: _size_slot(state, value, source) for i, (value, source) in enumerate(slots)
                        if _is_size_slot(state, value)})
        values = [wrapped[i] for i in range(len(slots))]
        depth = len(frame.stack)
        translator = InstructionTranslator(state, point.function, dict(zip(frame.locals, values[depth:],
                                                                           strict=True)), depth=1)
        translator.stack, translator.ip = values[:depth], frame.index
        return translator.run()

    return _finish(state, run, arguments, {})


def _is_size_slot(state: CaptureState, value: Any) -> bool:
    return state.sizes is not None and type(value) is int and value >= 2


def _size_slot(state: CaptureState, value: int, source: Source) -> Variable:
    """An int in a rebuilt frame (`b = x.shape[0]`, alive across the break) that equals a symbolic
    dim of one of the frame's tensors is that dim's symbol, guarded to stay equal to it; any other
    int is a constant, guarded by its value."""
    assert state.sizes is not None
    dim_symbol = next((SymSize({(name,): 1}, state.sizes) for name, (_, dim) in state.symbols.items()
                       if dim is not None and state.sizes.hints[name] == value), None)
    if dim_symbol is None:
        return state.wrap(value, source)
    own = state.sizes.symbol(value)
    state.symbols[own.code()] = (source, None)
    state.sizes.record(SizeGuard(own, "==", dim_symbol))
    state.add_guard(type_guard(source, int), source)
    return ConstantVariable(dim_symbol)


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


def _finish(state: CaptureState, run: Callable[[], Variable], args: tuple, kwargs: dict) -> CaptureResult:
    """Run the capture (of a call with `args` and `kwargs`); the graph's outputs are what the
    function returned, or, at a graph break, the tensors the rest of the function needs, and
    then the new values of the inputs it changed in place."""
    resume, returned, numpy_outputs = None, None, set()
    try:
        try:
            result = run()
        except FrameBreak as brk:
            resume = _resume_point(state, brk)
            outputs = resume.frame.outputs
        else:
            outputs, returned = _output_or_recipe(state, result)
            numpy_outputs = {i for i, is_array in enumerate(_numpy_leaves(result)) if is_array}
        mutations = state.input_mutations()
        if mutations:  # functionalized in-place updates of inputs: their new values are outputs too
            outputs = (outputs, *(node for _, node in mutations))
            state.guards.append(_separate_memory(state, [index for index, _ in mutations], args, kwargs))
    except Unsupported as e:
        e.bytecode, e.trace = state.log.records, state.trace
        raise
    state.graph.output(outputs)
    return CaptureResult(state.graph, state.guards, state.input_sources, state.log.records, state.trace, resume,
                         returned, [index for index, _ in mutations], numpy_outputs, state.dynamic_inputs,
                         state.sizes, state.symbols, state.side_effects.final_effects())


def _separate_memory(state: CaptureState, changed: list[int], args: tuple, kwargs: dict) -> Guard:
    """The guard that no input shares memory with one the graph changes; raises Unsupported if
    this very call's inputs do (the graph would read the other input's old value)."""
    guard = separate_memory_guard([state.input_sources[i] for i in changed], state.input_sources)
    if not guard.check(args, kwargs):
        raise Unsupported("a tensor changed in place shares memory with another input")
    return guard


def _output_or_recipe(state: CaptureState, result: Variable) -> tuple[Any, FrameRecipe | None]:
    """The returned value as graph outputs; if it is more than tensors and constants, its tensors
    and the recipe that builds it (only where graph breaks are allowed)."""
    try:
        return _as_output(result), None
    except Unsupported:
        if not state.allow_breaks:
            raise
    recipe = write_recipe(state, [result], {}, returning=True)
    return recipe.outputs, recipe


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


def _numpy_leaves(value: Variable) -> list[bool]:
    """For each leaf `_as_output` makes of `value`, in order: is it a NumPy array?"""
    if isinstance(value, SequenceVariable):
        return [flag for item in value.items for flag in _numpy_leaves(item)]
    if isinstance(value, DictVariable):
        return [flag for item in value.items.values() for flag in _numpy_leaves(item)]
    return [isinstance(value, TensorVariable) and value.numpy]


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
