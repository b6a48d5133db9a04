"""`minicompiler.backend`: TorchDynamo's capture in front of minicompiler's compiler.

    torch.compile(model, backend=minicompiler.backend)

TorchDynamo captures the function (its bytecode interpreter, guards and graph breaks) and hands
each graph to a backend as a `torch.fx.GraphModule`. This module translates that FX graph into
our IR and sends it down the same pipeline as our own capture (decompose, simplify, fuse,
codegen), so a learner can compare the two captures of one function. FX calls are translated
with the very lowering tables our bytecode capture uses (`capture/torch_ops.py`,
`capture/torch_views.py`): `torch.cos(x)`, `x.cos()` and `operator.add(x, y)` become the same
graph ops whichever frontend saw them.

Shapes are specialized: each distinct input signature (shapes, strides, dtypes; the values of
the integer inputs a dynamic-shape graph receives) gets its own compiled graph. An FX node we
cannot translate makes that graph run as Dynamo gave it (eagerly), with a warning naming it.
"""

from __future__ import annotations

import operator
import re
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch
import torch.fx

from minicompiler import logs
from minicompiler.capture.errors import Unsupported
from minicompiler.capture.operators import PYTHON_BINARY, PYTHON_COMPARE, TENSOR_BINARY, TENSOR_COMPARE
from minicompiler.capture.tensor import method_lowering
from minicompiler.capture.torch_ops import TENSOR_METHODS, TORCH_FUNCTIONS, InPlace, Lowering, extern
from minicompiler.capture.torch_views import index
from minicompiler.ir import Graph, Node, SourceLoc, TensorMeta, flatten
from minicompiler.pipeline import BACKENDS, CompiledGraph, compile_graph
from minicompiler.report import CompileReport

REPORTS: list[CompileReport] = []  # every compilation made through `backend`, oldest first
CACHE_SIZE_LIMIT = 8  # input signatures compiled per FX graph before it runs eagerly

# Python operators in FX graphs (`x + y` is traced as operator.add) and their torch functions.
OPERATOR_TO_TORCH: dict[Callable[..., Any], Callable[..., Any]] = {
    **{PYTHON_BINARY[symbol]: TENSOR_BINARY[symbol] for symbol in PYTHON_BINARY},
    **{PYTHON_COMPARE[symbol]: TENSOR_COMPARE[symbol] for symbol in PYTHON_COMPARE},
    operator.neg: torch.neg,
}
# aten ops (graphs made by AOTAutograd or make_fx) whose arguments read exactly like the Tensor
# method of the same name, so `aten.add.Tensor(x, y, alpha=2)` lowers as `x.add(y, alpha=2)`.
ATEN_AS_METHOD = {
    "add", "sub", "mul", "div", "neg", "abs", "exp", "log", "sqrt", "rsqrt", "sin", "cos", "tanh",
    "sigmoid", "relu", "gelu", "pow", "maximum", "minimum", "eq", "ne", "lt", "le", "gt", "ge",
    "sum", "mean", "amax", "amin", "mm", "bmm", "addmm", "view", "reshape", "permute", "transpose",
    "unsqueeze", "squeeze", "expand", "clone",
}


def list_backends() -> list[str]:
    """minicompiler's code generators, the names `minicompiler.compile(backend=...)` takes
    (as `torch._dynamo.list_backends()` lists torch.compile's); torch.compile itself knows
    minicompiler as one backend, "minicompiler"."""
    return list(BACKENDS)


class UnsupportedNode(Exception):
    """An FX node the translation cannot express in our IR; its graph runs eagerly."""


def backend(gm: torch.fx.GraphModule, example_inputs: list[Any], mode: str = "default",
            options: dict[str, Any] | None = None) -> Callable[..., Any]:
    """A TorchDynamo backend: `torch.compile(fn, backend=minicompiler.backend)`, or after
    `pip install`, `torch.compile(fn, backend="minicompiler")` (pyproject's `torch_dynamo_backends`
    entry point). torch.compile passes its `mode` and `options` on: those of minicompiler.compile,
    plus options={"backend": "cpp" | "triton" | "eager"} to choose the code generator.

    Returns a callable that takes the graph's inputs and returns what `gm.forward` returns.
    Compilation happens on the first call with each input signature (example_inputs are not
    needed: the first call's inputs are just as good, and they are real)."""
    from minicompiler.api import _switches

    options = dict(options or {})
    generator = options.pop("backend", "auto")
    if generator not in BACKENDS:
        raise ValueError(f"unknown options['backend'] {generator!r}; choose one of {', '.join(BACKENDS)}")
    cuda_graphs, autotune = _switches(mode, options)
    return DynamoGraph(gm, generator, cuda_graphs, autotune)


class DynamoGraph:
    """One FX graph from TorchDynamo, compiled once per input signature; `.reports` lists them."""

    def __init__(self, gm: torch.fx.GraphModule, generator: str = "auto", cuda_graphs: bool = False,
                 autotune: bool = False) -> None:
        self.gm = gm
        self.generator = generator  # "auto": C++ for CPU inputs, Triton for CUDA inputs
        self.cuda_graphs, self.autotune = cuda_graphs, autotune
        self.compiled: dict[tuple, tuple[CompiledGraph, list[torch.Tensor]]] = {}
        self.reports: list[CompileReport] = []
        self.eager_reason: str | None = None  # set once the graph is known to run eagerly

    def __call__(self, *inputs: Any) -> Any:
        if self.eager_reason is not None:
            return self.gm.forward(*inputs)
        key = _signature(inputs)
        if key in self.compiled:
            compiled, extra = self.compiled[key]
            return compiled.run(_graph_inputs(inputs, extra))
        if len(self.compiled) >= CACHE_SIZE_LIMIT:
            return self._run_eagerly(f"{CACHE_SIZE_LIMIT} input signatures compiled (cache size limit)", inputs)
        try:
            return self._compile_and_run(key, inputs)
        except UnsupportedNode as error:
            return self._run_eagerly(str(error), inputs)

    def _run_eagerly(self, reason: str, inputs: tuple) -> Any:
        warnings.warn(f"minicompiler.backend: {reason}; this graph runs eagerly", stacklevel=2)
        self.eager_reason = reason
        report = _new_report(self.gm)
        report.eager_fallback = reason
        self._record(report)
        return self.gm.forward(*inputs)

    def _record(self, report: CompileReport) -> None:
        self.reports.append(report)
        REPORTS.append(report)
        logs.emit_compilation(report)

    def _compile_and_run(self, key: tuple, inputs: tuple) -> Any:
        start = time.perf_counter()
        graph, extra = fx_to_graph(self.gm, inputs)
        backend_name = self.generator
        if backend_name == "auto":
            backend_name = "triton" if any(isinstance(x, torch.Tensor) and x.is_cuda for x in inputs) else "cpp"
        compiled = compile_graph(graph, backend_name, capture_seconds=time.perf_counter() - start,
                                 cuda_graphs=self.cuda_graphs, autotune=self.autotune)
        compiled.report.guards = _signature_guards(self.gm, inputs)
        report = _new_report(self.gm)
        report.graphs.append(compiled.report)
        if self.reports:  # Dynamo reused this graph for new input shapes: we specialize again
            report.recompile_reason = _signature_change(self.reports[-1].graphs[0].guards, compiled.report.guards)
        outputs = compiled.run(_graph_inputs(inputs, extra))  # fuse and codegen run on this first call
        report.compile_seconds = sum(stage.seconds for stage in compiled.report.stages)
        self.compiled[key] = (compiled, extra)
        self._record(report)
        return outputs


# --- FX graph -> IR graph ------------------------------------------------------------------
def fx_to_graph(gm: torch.fx.GraphModule, inputs: tuple) -> tuple[Graph, list[torch.Tensor]]:
    """Translate `gm` for these real inputs. Tensor inputs become placeholders; integer inputs
    (sizes in a dynamic-shape graph) become constants; `get_attr` tensors become extra inputs,
    returned second so that every run can pass them after the user's tensors."""
    graph = Graph()
    env: dict[torch.fx.Node, Any] = {}
    extra: list[torch.Tensor] = []
    placeholders = iter(inputs)
    for node in gm.graph.nodes:
        with graph.provenance(_source_of(node)):
            if node.op == "placeholder":
                value = next(placeholders)
                env[node] = graph.placeholder(node.name, TensorMeta.of(value)) if isinstance(
                    value, torch.Tensor) else value
            elif node.op == "get_attr":
                tensor = _attribute(gm, node)
                extra.append(tensor)
                env[node] = graph.placeholder(node.name, TensorMeta.of(tensor))
            elif node.op == "output":
                graph.output(_argument(node.args[0], env))
            else:
                env[node] = _translate_call(graph, node, env)
    return graph, extra


def _translate_call(graph: Graph, node: torch.fx.Node, env: dict[torch.fx.Node, Any]) -> Any:
    args, kwargs = _argument(node.args, env), _argument(node.kwargs, env)
    if node.op == "call_function" and node.target is operator.getitem:
        container, key = args
        return index(graph, container, key) if isinstance(container, Node) else container[key]
    if node.op == "call_function" and node.target in OPERATOR_TO_TORCH and not _has_tensor(args):
        return node.target(*args)  # arithmetic on sizes: known now
    lowering = _lowering(node)
    try:
        result = lowering(graph, *args, **kwargs)
    except (Unsupported, RuntimeError, TypeError, ValueError, IndexError, KeyError) as error:
        raise UnsupportedNode(f"cannot translate FX node {node.format_node()}: {error}") from error
    if isinstance(result, InPlace):
        raise UnsupportedNode(f"FX node {node.format_node()} changes a tensor in place")
    return result


def _lowering(node: torch.fx.Node) -> Lowering:
    """The lowering for one call node: from the capture's tables, else the call kept whole."""
    target = node.target
    if node.op == "call_method":
        lowering = method_lowering(target)
    elif node.op != "call_function":
        lowering = None  # call_module: Dynamo inlines modules, so this only comes from other tracers
    elif isinstance(target, torch._ops.OpOverload):
        lowering = _aten_lowering(target)
    else:
        fn = OPERATOR_TO_TORCH.get(target, target)
        lowering = TORCH_FUNCTIONS.get(fn)
        if lowering is None and not getattr(fn, "__name__", "").endswith("_"):  # x_(...) is in place
            lowering = _kept_whole(fn)
    if lowering is None:
        raise UnsupportedNode(f"no translation for FX node {node.format_node()}")
    return lowering


def _aten_lowering(op: torch._ops.OpOverload) -> Lowering | None:
    if op._schema.is_mutable:
        return None  # an op that writes into its arguments has no place in a pure graph
    name = op.overloadpacket.__name__
    return TENSOR_METHODS[name] if name in ATEN_AS_METHOD and name in TENSOR_METHODS else _kept_whole(op)


def _kept_whole(fn: Callable[..., Any]) -> Lowering:
    return lambda g, *args, **kwargs: extern(g, fn, *args, **kwargs)


def _argument(value: Any, env: dict[torch.fx.Node, Any]) -> Any:
    """An FX argument with its nodes replaced by our values, in plain lists, tuples and dicts."""
    if isinstance(value, torch.fx.Node):
        return env[value]
    if isinstance(value, slice):  # slice bounds may be sizes computed in the graph
        return slice(*(_argument(v, env) for v in (value.start, value.stop, value.step)))
    if isinstance(value, (tuple, list)):
        items = [_argument(v, env) for v in value]
        return tuple(items) if isinstance(value, tuple) else items
    if isinstance(value, dict):
        return {k: _argument(v, env) for k, v in value.items()}
    return value


def _has_tensor(args: Any) -> bool:
    return any(isinstance(a, Node) for a in flatten(args))


def _attribute(gm: torch.fx.GraphModule, node: torch.fx.Node) -> torch.Tensor:
    value: Any = gm
    for name in str(node.target).split("."):
        value = getattr(value, name)
    if not isinstance(value, torch.Tensor):
        raise UnsupportedNode(f"FX get_attr {node.target} is a {type(value).__name__}, not a tensor")
    return value


# Dynamo records each node's user frame: '  File "/a/b.py", line 12, in f\n    y = torch.cos(x)\n'
_FRAME = re.compile(r'File "(?P<file>[^"]+)", line (?P<line>\d+), in (?P<function>[^\n]+)\n(?P<text>[^\n]*)')


def _source_of(node: torch.fx.Node) -> SourceLoc | None:
    frames = list(_FRAME.finditer(node.meta.get("stack_trace") or ""))
    if not frames:
        return None
    last = frames[-1]  # the innermost frame: the user's own line
    return SourceLoc(last["file"], int(last["line"]), last["text"].strip(), function=last["function"])


# --- signatures and reports ------------------------------------------------------------------
def _signature(inputs: tuple) -> tuple:
    """What a compiled graph is specialized to: tensor metadata, and the values of other inputs."""
    return tuple(
        (tuple(x.shape), x.stride(), x.dtype, x.device, x.requires_grad) if isinstance(x, torch.Tensor) else x
        for x in inputs
    )


def _signature_guards(gm: torch.fx.GraphModule, inputs: tuple) -> list[str]:
    names = [n.name for n in gm.graph.nodes if n.op == "placeholder"]
    return [
        f"{name}: {TensorMeta.of(x)} stride {x.stride()} on {x.device}" if isinstance(x, torch.Tensor)
        else f"{name} == {x!r}"
        for name, x in zip(names, inputs, strict=True)
    ]


def _signature_change(old: list[str], new: list[str]) -> str:
    changes = [f"expected {before}, got {after}" for before, after in zip(old, new, strict=True) if before != after]
    return "input signature changed: " + "; ".join(changes)


def _graph_inputs(inputs: tuple, extra: list[torch.Tensor]) -> list[torch.Tensor]:
    return [x for x in inputs if isinstance(x, torch.Tensor)] + extra


def _new_report(gm: torch.fx.GraphModule) -> CompileReport:
    """A report for this graph, named after the user's function that Dynamo captured it from."""
    sources = [loc for n in gm.graph.nodes if (loc := _source_of(n)) is not None]
    first = sources[0] if sources else None
    return CompileReport(
        function=first.function if first else type(gm).__name__,
        filename=first.filename if first else "",
        frontend="dynamo",
    )
