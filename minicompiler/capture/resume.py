"""Graph breaks that resume: the frame's state at a break, written down so it can be rebuilt.

When the function being compiled meets an instruction capture cannot put in a graph, the
graph ends just before it. To carry on for real, the runtime needs the frame as CPython
would hold it at that instruction: the value stack and the local variables. During capture
they hold Variables; a `FrameRecipe` says, for each one, how to make the real value once the
graph has run:

    a tensor the graph computed         -> one of the graph's outputs
    a view of another tensor            -> made again from its base (an output or an input) by
                                           the same view ops, so that both share memory as in eager
    a tensor or object from outside     -> read again through its Source (the very same object)
    a constant                          -> the constant
    a list / tuple / dict / iterator    -> built again from its items (one object, however
                                           many places hold it, so mutations stay shared)

The runtime then runs the breaking instruction for real (`concrete.py`) and captures the next
segment from the following instruction, with the rebuilt values as its inputs
(`capture_resume` in api.py). A value with no recipe (a function defined inside the captured
code, say) makes the break not resumable: the whole call then runs eagerly; if the segment after
an earlier break is the one that cannot be captured, the rest of the function runs for real from
that break on (`resume_function.py`).
"""

from __future__ import annotations

import dis
import types
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from minicompiler.capture.errors import Unsupported
from minicompiler.capture.float_inputs import FloatInputVariable
from minicompiler.capture.objects import (
    BuiltinVariable,
    ObjectVariable,
    PythonModuleVariable,
    TorchFunctionVariable,
    UserFunctionVariable,
)
from minicompiler.capture.records_dict import DataclassDictVariable
from minicompiler.capture.sources import Source
from minicompiler.capture.tensor import TensorVariable
from minicompiler.capture.user_objects import UserObjectVariable, make_for_real
from minicompiler.capture.variables import (
    NULL,
    CellVariable,
    ConstantVariable,
    DictVariable,
    IteratorVariable,
    ListVariable,
    MethodVariable,
    TupleVariable,
    Variable,
)
from minicompiler.ir import Node, map_structure
from minicompiler.ir.ops import OPS
from minicompiler.ir.symbolic import SymSize, is_symbolic

if TYPE_CHECKING:
    from minicompiler.capture.builder import CaptureState


class NullMarker:
    """The real stand-in for CALL's NULL slot on a rebuilt stack."""

    def __repr__(self) -> str:
        return "NULL"


REAL_NULL = NullMarker()


class RemainingItems:
    """A loop's iterator on a rebuilt stack: the items the loop has not reached yet."""

    def __init__(self, items: list[Any]) -> None:
        self.items = items

    def __iter__(self) -> RemainingItems:
        return self

    def __next__(self) -> Any:
        if not self.items:
            raise StopIteration
        return self.items.pop(0)


# -- recipes: how to make one real value after the graph ran ------------------------------------
class Recipe:
    def make(self, env: BuildEnv) -> Any:
        raise NotImplementedError


@dataclass(eq=False)
class GraphOutput(Recipe):
    index: int  # position in the graph's outputs

    def make(self, env: BuildEnv) -> Any:
        return env.outputs[self.index]


@dataclass(eq=False)
class FloatOutput(Recipe):
    index: int  # a float the graph computed from float inputs (a 0-d tensor), as a Python float

    def make(self, env: BuildEnv) -> Any:
        return env.outputs[self.index].item()


@dataclass(eq=False)
class Reread(Recipe):
    source: Source  # an argument, a global, a module attribute...: the very same object

    def make(self, env: BuildEnv) -> Any:
        return self.source.get(env.args, env.kwargs)


@dataclass(eq=False)
class ViewOf(Recipe):
    base: Recipe  # the tensor that owns the memory: a graph output or an input
    steps: list[tuple[str, tuple, dict]]  # view ops (op, args after the tensor, kwargs); sizes may be recipes

    def make(self, env: BuildEnv) -> Any:
        def value(arg: Any) -> Any:  # a symbolic size is a graph output: this call's number
            return env.build(arg) if isinstance(arg, Recipe) else arg

        tensor = env.build(self.base)
        for op, args, kwargs in self.steps:
            tensor = OPS[op].impl(tensor, *map_structure(value, args), **map_structure(value, kwargs))
        return tensor


@dataclass(eq=False)
class Fixed(Recipe):
    value: Any  # a constant, a function, a library module

    def make(self, env: BuildEnv) -> Any:
        return self.value


@dataclass(eq=False)
class Container(Recipe):
    kind: type  # list | tuple | dict | RemainingItems
    items: list[Recipe]
    keys: list[Any] | None = None  # for a dict

    def make(self, env: BuildEnv) -> Any:
        values = [env.build(item) for item in self.items]
        if self.kind is dict:
            return dict(zip(self.keys or [], values, strict=True))
        return self.kind(values)


@dataclass(eq=False)
class Cell(Recipe):
    content: Recipe | None  # a closure cell the captured code made; None while unset

    def make(self, env: BuildEnv) -> Any:
        return types.CellType() if self.content is None else types.CellType(env.build(self.content))


@dataclass(eq=False)
class Attribute(Recipe):
    obj: Recipe  # `obj.name`: a bound method such as `out.append` or `x.item`
    name: str

    def make(self, env: BuildEnv) -> Any:
        return getattr(env.build(self.obj), self.name)


@dataclass(eq=False)
class BoundMethod(Recipe):
    function: types.FunctionType
    owner: Recipe

    def make(self, env: BuildEnv) -> Any:
        return types.MethodType(self.function, env.build(self.owner))


@dataclass(eq=False)
class Construct(Recipe):
    cls: type  # an object the captured code made (a ModelOutput): the class called with its fields
    fields: dict[str, Recipe]

    def make(self, env: BuildEnv) -> Any:
        return self.cls(**{name: env.build(r) for name, r in self.fields.items()})


@dataclass(eq=False)
class NewObject(Recipe):
    cls: type  # an object of a user class the captured code made (a cache): made again, attributes set
    attrs: dict[str, Recipe]

    def make(self, env: BuildEnv) -> Any:
        return make_for_real(self.cls, {name: env.build(r) for name, r in self.attrs.items()})


@dataclass
class BuildEnv:
    """What recipes are made from: the graph's outputs and the segment's own arguments."""

    outputs: list[Any]
    args: tuple
    kwargs: dict
    made: dict[int, Any] = field(default_factory=dict)  # id(recipe) -> value: one object per recipe

    def build(self, recipe: Recipe) -> Any:
        if id(recipe) not in self.made:
            self.made[id(recipe)] = recipe.make(self)
        return self.made[id(recipe)]


# -- the frame at a break --------------------------------------------------------------------------
@dataclass
class FrameRecipe:
    """The frame just before the breaking instruction, and the tensors the graph must output."""

    stack: list[Recipe]
    locals: dict[str, Recipe]
    outputs: list[Any]  # Nodes, and symbolic sizes the frame holds

    def rebuild(self, outputs: list[Any], args: tuple, kwargs: dict) -> tuple[list[Any], dict[str, Any]]:
        env = BuildEnv(list(outputs), args, kwargs)
        return [env.build(r) for r in self.stack], {name: env.build(r) for name, r in self.locals.items()}


@dataclass
class ResumePoint:
    """Where a segment stopped, and everything needed to carry on for real."""

    function: types.FunctionType  # the compiled function's own code, globals and closure
    index: int  # position of the breaking instruction in `instructions`
    instructions: list[dis.Instruction]
    kw_names: tuple[str, ...]  # the keyword names KW_NAMES set for a breaking CALL (3.11, 3.12)
    frame: FrameRecipe
    error: Unsupported  # why the graph broke, and where

    @property
    def instruction(self) -> dis.Instruction:
        return self.instructions[self.index]


def write_recipe(state: CaptureState, stack: list[Variable], local: dict[str, Variable],
                 returning: bool = False) -> FrameRecipe:
    """Recipes for a frame's values; raises Unsupported for a value that cannot be rebuilt.
    `returning`: the function's returned value, after which no code of the function runs, so
    tensors that shared memory inside may come out as separate tensors (as the graph's outputs
    always do)."""
    writer = _RecipeWriter(state, keep_views=not returning)
    stack_recipes = [writer.recipe(v) for v in stack]
    local_recipes = {name: writer.recipe(v) for name, v in local.items()}
    return FrameRecipe(stack_recipes, local_recipes, writer.outputs)


class _RecipeWriter:
    def __init__(self, state: CaptureState, keep_views: bool) -> None:
        self.state = state
        self.keep_views = keep_views
        self.outputs: list[Any] = []  # Nodes, and symbolic sizes
        self._written: dict[int, Recipe] = {}  # id(Variable) -> its recipe: shared values stay shared

    def recipe(self, var: Variable) -> Recipe:
        if id(var) not in self._written:
            self._written[id(var)] = self._new_recipe(var)
        return self._written[id(var)]

    def _new_recipe(self, var: Variable) -> Recipe:
        if isinstance(var, TensorVariable):
            source = self.state.input_source_of(var)
            if source is not None:  # an input: the caller's own tensor (its new value written back), not a copy
                return Reread(source)
            if self.keep_views:
                return self._tensor(var)
            return GraphOutput(self._output_index(var.node))
        if isinstance(var, FloatInputVariable):  # an input as it was, or computed by the graph
            if var.source is not None:
                return Reread(var.source)
            return FloatOutput(self._output_index(var.tensor.node))
        if var is NULL:
            return Fixed(REAL_NULL)
        if isinstance(var, ConstantVariable):
            return self._constant(var.value)
        if isinstance(var, (TupleVariable, ListVariable, DictVariable)) and var.source is not None:
            return Reread(var.source)  # passed in, never changed by capture (that would have broken)
        if isinstance(var, TupleVariable) and var.names is None:
            return Container(tuple, [self.recipe(v) for v in var.items])
        if isinstance(var, ListVariable):
            return Container(list, [self.recipe(v) for v in var.items])
        if isinstance(var, DictVariable):
            return Container(dict, [self.recipe(v) for v in var.items.values()], list(var.items))
        if isinstance(var, IteratorVariable):
            return Container(RemainingItems, [self.recipe(v) for v in var.items[var.position:]])
        if isinstance(var, CellVariable):
            if var.real_cell is not None:
                return Fixed(var.real_cell)
            return Cell(None if var.content is None else self.recipe(var.content))
        if isinstance(var, DataclassDictVariable):
            return Construct(var.cls, {name: self.recipe(v) for name, v in var.fields.items()})
        if isinstance(var, UserObjectVariable):
            return NewObject(var.cls, {name: self.recipe(v) for name, v in var.attrs.items()})
        if isinstance(var, MethodVariable):
            return Attribute(self.recipe(var.obj), var.name)
        if isinstance(var, UserFunctionVariable):
            return self._function(var)
        if isinstance(var, ObjectVariable):
            return Reread(var.source) if var.source is not None else Fixed(var.value)
        if isinstance(var, (BuiltinVariable, TorchFunctionVariable, PythonModuleVariable)):
            return Fixed(var.as_python())
        raise Unsupported(f"{var.describe()} is alive at the graph break and cannot be rebuilt")

    def _tensor(self, var: TensorVariable) -> Recipe:
        """A tensor the graph computed, alive where code runs on: a view is made again from the
        tensor that owns its memory, so that a change through either one (the breaking
        instruction, or code after it) shows in the other, as in eager. (Graph outputs are
        separate tensors; in-place ops on a view are breaks in capture, so they happen for real.)"""
        root, chain = self.state.storage_root(var)
        if not chain:
            return GraphOutput(self._output_index(var.node))
        if var.storage in self.state.input_storages:  # a view of an input: made from the input itself
            source = self.state.input_in_storage(var.storage, root)
            if source is None:
                raise Unsupported("a view of an input that the graph changed since is alive at the graph break")
            base: Recipe = Reread(source)
        else:
            base = GraphOutput(self._output_index(root))
        steps = [(node.op, map_structure(self._size, node.args[1:]), map_structure(self._size, node.kwargs))
                 for node in chain]
        return ViewOf(base, steps)

    def _size(self, arg: Any) -> Any:
        if isinstance(arg, Node):
            raise Unsupported("a view whose arguments are tensors is alive at the graph break")
        return self._constant(arg) if isinstance(arg, SymSize) else arg

    def _output_index(self, node: Node) -> int:
        if node not in self.outputs:
            self.outputs.append(node)
        return self.outputs.index(node)

    def _constant(self, value: Any) -> Recipe:
        """A constant as it is; a symbolic size (`B = x.shape[0]`, alive at the break) becomes a
        graph output, which the compiled code returns as this call's number."""
        if isinstance(value, SymSize):
            self.outputs.append(value)
            return GraphOutput(len(self.outputs) - 1)
        if type(value) is tuple and is_symbolic(value):
            return Container(tuple, [self._constant(v) for v in value])
        return Fixed(value)

    def _function(self, var: UserFunctionVariable) -> Recipe:
        defaults = [*(var.fn.__defaults__ or ()), *(var.fn.__kwdefaults__ or {}).values()]
        if var.closure is not None or any(isinstance(d, Variable) for d in defaults):
            raise Unsupported(f"{var.describe()}, defined inside the captured code, is alive at the graph break")
        if var.self_var is None:
            return Fixed(var.fn)
        return BoundMethod(var.fn, self.recipe(var.self_var))
