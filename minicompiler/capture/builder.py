"""`CaptureState`: what every frame of one capture shares.

It owns the graph being built, the guards, and the graph inputs with their sources. Its
`wrap` turns a real Python value met during translation (an argument, a global, a module
attribute) into a Variable, adding the guards that keep the graph valid: a tensor becomes a
graph placeholder guarded on its metadata; a number becomes a constant guarded on its value;
a module is guarded on its identity and its `training` flag.

It also keeps the books that make in-place ops safe to capture: which tensors share memory, and
which inputs the function changes in place (functionalization: `x.add_(1)` on an input becomes
`x_1 = x + 1` in the graph, and the runtime copies `x_1` back into the caller's tensor).
"""

from __future__ import annotations

import dataclasses
import functools
import itertools
import types
import weakref
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import torch
from torch import nn

from minicompiler.capture.builtins import is_builtin
from minicompiler.capture.errors import Unsupported
from minicompiler.capture.guards import (
    Guard,
    constant_guard,
    id_guard,
    keys_guard,
    len_guard,
    same_object_guard,
    tensor_guard,
    type_guard,
)
from minicompiler.capture.numpy_ops import NumpyFunctionVariable, is_ndarray, mark_numpy, numpy_function_name
from minicompiler.capture.objects import (
    BuiltinVariable,
    NNModuleVariable,
    ObjectVariable,
    PythonModuleVariable,
    TorchFunctionVariable,
    UserFunctionVariable,
    is_torch_function,
)
from minicompiler.capture.records import BytecodeLog, TraceLog
from minicompiler.capture.side_effects import SideEffects
from minicompiler.capture.sources import Source
from minicompiler.capture.tensor import TensorVariable, UnboundTensorMethodVariable, is_unbound_tensor_method
from minicompiler.capture.torch_queries import check as _registers_torch_queries  # noqa: F401 (its tables)
from minicompiler.capture.torch_views import needs_grad
from minicompiler.capture.variables import (
    ConstantVariable,
    DictVariable,
    ListVariable,
    PartialVariable,
    TupleVariable,
    Variable,
    constant,
    is_constant,
)
from minicompiler.capture.vmap import vmap as _registers_vmap  # noqa: F401 (its handlers)
from minicompiler.ir import Graph, Node, TensorMeta
from minicompiler.ir.symbolic import SizeEnv

# Ops whose torch counterpart can return a view of (or the very same memory as) its input.
ALIASING_OPS = {"detach", "reshape", "permute", "expand", "slice", "transpose", "unsqueeze", "squeeze", "select",
                "contiguous"}
MAX_INSTRUCTIONS = 200_000  # unrolling a loop past this is surely a mistake


def _memory_of(value: torch.Tensor) -> tuple[str, int] | None:
    """Where a real tensor's memory lives (its storage's device and address); None when it has
    no memory of its own to share (no elements, or no plain storage)."""
    try:
        storage = value.untyped_storage()
    except (RuntimeError, NotImplementedError):
        return None
    return (str(value.device), storage.data_ptr()) if storage.nbytes() else None


def _from_numpy(array: Any, source: Source | None) -> torch.Tensor:
    try:
        return torch.from_numpy(array)
    except (TypeError, ValueError) as error:  # e.g. a dtype torch lacks, or negative strides
        raise Unsupported(f"the NumPy array {source} cannot become a tensor: {error}") from error


def _is_record(value: Any) -> bool:
    """A dataclass or namedtuple instance: plain data whose fields capture reads one by one."""
    is_namedtuple = isinstance(value, tuple) and hasattr(type(value), "_fields")
    return is_namedtuple or (dataclasses.is_dataclass(value) and not isinstance(value, type))


class CaptureState:
    def __init__(self) -> None:
        self.graph = Graph()
        self.guards: list[Guard] = []
        self.input_sources: list[Source] = []
        self.log = BytecodeLog()
        self.trace = TraceLog()
        self.allow_breaks = False  # may the compiled function's own frame end at a graph break?
        self.no_grad_depth = 0  # inside how many `with torch.no_grad():` blocks the capture is now
        # Which dims of an input tensor are dynamic (guarded as "any size >= 2"), by its source path
        self.dynamic_dims: Callable[[str, torch.Tensor], tuple[int, ...]] = lambda path, tensor: ()
        self.dynamic_inputs: list[tuple[Source, tuple[int, ...]]] = []  # those that have any
        self.sizes: SizeEnv | None = None  # set when dynamic dims are symbols in the graph
        self.symbols: dict[str, tuple[Source, int | None]] = {}  # symbol -> the input dim (or int) it stands for
        self.root_frame: object | None = None  # that frame: the first one to run (see translator.py)
        self.instructions_run = 0
        self._guard_texts: set[str] = set()
        self._wrapped: dict[int, tuple[Variable, Source | None]] = {}  # id(value) -> its Variable
        self._alive: list[Any] = []  # keeps wrapped objects alive, so their ids stay unique
        self._storage_of: dict[Node, int] = {}
        # storage -> the tensors alive in it: one made for an expression (`m[:, :n] + a`) and then
        # dropped no longer blocks an in-place change of its base (see `mutate`)
        self._tensors_in_storage: defaultdict[int, weakref.WeakSet[TensorVariable]] = defaultdict(weakref.WeakSet)
        self.input_storages: set[int] = set()
        self._input_of: dict[int, tuple[Node, TensorVariable, Source]] = {}  # id(input's variable) -> it
        # the real memory an input lives in -> its storage number: inputs that alias each other
        # (a tensor and its view, both alive across a graph break) share one, as in eager
        self._storage_of_memory: dict[tuple[str, int], int] = {}
        # placeholder -> the variable that holds its new value, in the order eager changes them
        self.mutated_inputs: dict[Node, TensorVariable] = {}
        self.function_modes: list[Variable] = []  # TorchFunctionModes entered as no-ops (see vmap.py)
        self.side_effects = SideEffects()  # attribute writes on objects from outside, logging calls
        self._storages = itertools.count()

    def count_instruction(self) -> None:
        self.instructions_run += 1
        if self.instructions_run > MAX_INSTRUCTIONS:
            raise Unsupported(f"the function runs more than {MAX_INSTRUCTIONS} instructions (a long loop?)")

    def add_guard(self, guard: Guard, source: Source) -> None:
        """Keep `guard` (once), unless `source` always gives the same object anyway."""
        if not source.fixed:
            self.keep_guard(guard)

    def keep_guard(self, guard: Guard) -> None:
        """Keep `guard` once (also one on global state, e.g. grad mode, that the captured code read)."""
        if guard.description not in self._guard_texts:
            self._guard_texts.add(guard.description)
            self.guards.append(guard)

    # -- real values -> Variables ---------------------------------------------------------
    def wrap(self, value: Any, source: Source | None) -> Variable:
        if is_constant(value):
            if source is not None:
                self.add_guard(constant_guard(source, value), source)
            return ConstantVariable(value)
        if id(value) in self._wrapped:  # one object reached two ways stays one Variable
            var, first = self._wrapped[id(value)]
            if source is not None and first is not None and source.path != first.path:
                self.add_guard(same_object_guard(source, first), source)
            return var
        var = self._wrap_new(value, source)
        self._wrapped[id(value)] = (var, source)
        self._alive.append(value)
        return var

    def _wrap_new(self, value: Any, source: Source | None) -> Variable:
        if isinstance(value, torch.Tensor):
            return self._tensor_input(value, source)
        if is_ndarray(value):  # computed as a tensor sharing the array's memory (see numpy_ops.py)
            array = self._tensor_input(_from_numpy(value, source), source.as_tensor() if source else None)
            return mark_numpy(array)
        if (numpy_name := numpy_function_name(value)) is not None:
            return NumpyFunctionVariable(numpy_name)
        if isinstance(value, types.ModuleType):
            return PythonModuleVariable(value)  # not guarded: nobody rebinds `torch`
        if source is not None and type(value) in (tuple, list, dict):
            self.add_guard(type_guard(source, type(value)), source)
            if type(value) is dict:
                self.add_guard(keys_guard(source, list(value)), source)
            else:
                self.add_guard(len_guard(source, len(value)), source)
        if type(value) in (tuple, list):
            items = [self.wrap(v, source.item(i) if source else None) for i, v in enumerate(value)]
            return TupleVariable(items, source) if type(value) is tuple else ListVariable(items, source)
        if type(value) is dict:
            if not all(is_constant(k) for k in value):
                raise Unsupported("a dict with non-constant keys")
            items = {k: self.wrap(v, source.item(k) if source else None) for k, v in value.items()}
            return DictVariable(items, source)
        if source is not None and _is_record(value):  # a dataclass or namedtuple: fields are guarded when read
            self.add_guard(type_guard(source, type(value)), source)
        elif source is not None:  # the very same module / function / object next time
            self.add_guard(id_guard(source, value), source)
        if isinstance(value, nn.Module):
            if source is not None:
                training = source.attr("training")
                self.add_guard(constant_guard(training, value.training), training)
            return NNModuleVariable(value, source)
        if is_builtin(value):
            return BuiltinVariable(value)
        if is_unbound_tensor_method(value):  # before torch functions: torch._tensor holds some
            return UnboundTensorMethodVariable(value)
        if is_torch_function(value):
            return TorchFunctionVariable(value)
        if isinstance(value, types.FunctionType):
            return UserFunctionVariable(value)
        if isinstance(value, types.MethodType):
            owner = self.wrap(value.__self__, source.attr("__self__") if source else None)
            return UserFunctionVariable(value.__func__, self_var=owner)
        if type(value) is functools.partial:
            return self._partial(value, source)
        return ObjectVariable(value, source)

    def _partial(self, value: functools.partial, source: Source | None) -> PartialVariable:
        def part(name: str, key: Any = None) -> Source | None:  # partial.func, .args[i], .keywords[k]
            if source is None:
                return None
            return source.attr(name) if key is None else source.attr(name).item(key)

        args = [self.wrap(a, part("args", i)) for i, a in enumerate(value.args)]
        kwargs = {k: self.wrap(v, part("keywords", k)) for k, v in value.keywords.items()}
        return PartialVariable(self.wrap(value.func, part("func")), args, kwargs, value)

    def _tensor_input(self, value: torch.Tensor, source: Source | None) -> TensorVariable:
        if source is None:
            raise Unsupported("a tensor that comes from neither an argument, an attribute nor a global")
        if type(value) not in (torch.Tensor, nn.Parameter) or value.layout != torch.strided or value.is_nested:
            kind = "nested tensor" if value.is_nested else f"{type(value).__name__} with layout {value.layout}"
            raise Unsupported(f"{source} is a {kind}; only plain strided tensors are captured")
        dynamic = self.dynamic_dims(source.path, value)
        node = self.graph.placeholder(source.label or "input", self._input_meta(value, source, dynamic))
        if dynamic:
            self.dynamic_inputs.append((source, dynamic))
        self.add_guard(tensor_guard(source, value, dynamic), source)
        return self._register_input(node, source, _memory_of(value))

    def _input_meta(self, value: torch.Tensor, source: Source, dynamic: tuple[int, ...]) -> TensorMeta:
        """The placeholder's meta: with symbolic sizes, each dynamic dim is a new symbol."""
        meta = TensorMeta.of(value)
        if self.sizes is None or not dynamic:
            return meta
        shape = list(meta.shape)
        for d in dynamic:
            symbol = shape[d] = self.sizes.symbol(shape[d])
            self.symbols[symbol.code()] = (source, d)
        return TensorMeta(tuple(shape), meta.dtype, meta.device, None, meta.requires_grad)  # contiguous

    def float_input(self, source: Source, device: torch.device) -> TensorVariable:
        """A placeholder for a Python float read as a 0-d float64 tensor (see float_inputs.py;
        its guard is on the float's type, added there)."""
        node = self.graph.placeholder(source.label or "scalar", TensorMeta((), torch.float64, device))
        return self._register_input(node, source)

    def _register_input(self, node: Node, source: Source, memory: tuple[str, int] | None = None) -> TensorVariable:
        """A placeholder's variable. Inputs in the same real memory share a storage number, so
        changing one in place is refused (a break) instead of leaving the other's value stale."""
        self.input_sources.append(source)
        storage = self._storage_of_memory.get(memory) if memory is not None else None
        if storage is None:
            storage = next(self._storages)
            if memory is not None:
                self._storage_of_memory[memory] = storage
        self.input_storages.add(storage)
        self._storage_of[node] = storage
        var = TensorVariable(node, storage)
        self._tensors_in_storage[storage].add(var)
        self._input_of[id(var)] = (node, var, source)
        return var

    def input_source_of(self, var: TensorVariable) -> Source | None:
        """Where `var` came from if it is an input itself (changed in place or not), else None."""
        entry = self._input_of.get(id(var))
        return entry[2] if entry is not None else None

    def input_value(self, var: TensorVariable) -> tuple[torch.Tensor | None, Source | None]:
        """The real tensor behind the input `var` in this call, and its source, for an op that
        torch runs on the values themselves (tensor_split's indices); (None, None) when `var` is
        no input, or one changed in place since. Whoever reads the values must guard them."""
        entry = self._input_of.get(id(var))
        if entry is None or var.node is not entry[0]:
            return None, None
        for value in self._alive:
            if isinstance(value, torch.Tensor) and self._wrapped.get(id(value), (None,))[0] is var:
                return value, entry[2]
        return None, None

    def storage_root(self, var: TensorVariable) -> tuple[Node, list[Node]]:
        """The node that owns `var`'s memory and the view nodes that lead from it to `var`
        (innermost last; none when `var` is that node): how to make `var` again from its base."""
        chain, node = [], var.node
        while node.op in ALIASING_OPS and isinstance(node.args[0], Node) \
                and self._storage_of.get(node.args[0]) == var.storage:
            chain.append(node)
            node = node.args[0]
        return node, chain[::-1]

    def input_in_storage(self, storage: int, node: Node) -> Source | None:
        """The source of the input whose current value is `node` in `storage`, if any."""
        return next((source for _, input_var, source in self._input_of.values()
                     if input_var.storage == storage and input_var.node is node), None)

    # -- lowering results -> Variables ----------------------------------------------------
    def wrap_result(self, result: Any) -> Variable:
        if isinstance(result, Node):
            if self.no_grad_depth and needs_grad(result):  # made under no_grad: no gradient flows back through it
                result = self.graph.call("detach", result)
            return self._tensor_result(result)
        if isinstance(result, (tuple, list)):
            items = [self.wrap_result(r) for r in result]
            if isinstance(result, list):
                return ListVariable(items)
            return TupleVariable(items, names=getattr(result, "_fields", None))
        return constant(result)

    def _tensor_result(self, node: Node) -> TensorVariable:
        storage = self._storage_of.get(node)
        if storage is None:
            base = node  # a chain of views shares the memory of the first non-view
            while base not in self._storage_of and base.op in ALIASING_OPS and isinstance(base.args[0], Node):
                base = base.args[0]
            storage = self._storage_of[base] if base in self._storage_of else next(self._storages)
            self._storage_of[node] = storage
        var = TensorVariable(node, storage)
        self._tensors_in_storage[storage].add(var)
        return var

    def mutate(self, var: Variable, node: Node, what: str) -> Variable:
        """Capture an in-place op as a new value for `var`; only safe when nobody else can see
        the old value: no view shares its memory. A tensor from outside the function (argument,
        parameter, buffer, global) gets its new value written back after the graph runs."""
        if not isinstance(var, TensorVariable):
            raise Unsupported(f"{what} in place on {var.describe()}")
        if var.storage in self.input_storages:
            self._note_input_mutation(var, what)
        if self._others_in_storage(var):
            raise Unsupported(f"{what} changes a tensor in place while a view of its memory exists")
        old = var.node.meta
        if node.meta.shape != old.shape:
            raise Unsupported(f"{what} would change a tensor's shape in place")
        if node.meta.dtype != old.dtype:
            if not torch.can_cast(node.meta.dtype, old.dtype):
                raise Unsupported(f"{what}: a {node.meta.dtype} result cannot go into a {old.dtype} tensor")
            node = self.graph.call("convert", node, old.dtype)
        var.node = node
        self._storage_of[node] = var.storage
        return var

    def _others_in_storage(self, var: TensorVariable) -> bool:
        """Is another tensor in var's memory still alive (referred to by the code being captured)?
        (One dropped inside a reference cycle would count until a collection: refused, to be safe.)"""
        return any(t is not var for t in self._tensors_in_storage[var.storage])

    def _note_input_mutation(self, var: TensorVariable, what: str) -> None:
        entry = self._input_of.get(id(var))
        if entry is None:
            raise Unsupported(f"{what} changes a view of a tensor from outside the function in place")
        placeholder = entry[0]
        assert placeholder.meta is not None
        if placeholder.meta.requires_grad:  # eager refuses too, unless under no_grad
            raise Unsupported(f"{what} changes a tensor that requires grad in place")
        self.mutated_inputs.setdefault(placeholder, var)

    def input_mutations(self) -> list[tuple[int, Node]]:
        """(input index, node holding its new value) for each input the function changed."""
        return [(self.graph.inputs.index(placeholder), var.node)
                for placeholder, var in self.mutated_inputs.items() if var.node is not placeholder]
