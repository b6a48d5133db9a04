"""The Python wrapper: a readable `def call(inputs)` that runs a schedule's steps in order.

    def call(inputs):
        x, w, b = inputs
        # matmul = matmul  <- model.py:8  y = x @ w
        matmul = ops.matmul(x, w)
        maximum = torch.empty((64, 30), dtype=torch.float32, device='cpu')
        kernel_add_maximum(matmul.data_ptr(), b.data_ptr(), maximum.data_ptr())
        return maximum

With dynamic=True the kernels take their sizes as arguments, read from the tensors:

        size0, size1 = matmul.shape[0], matmul.shape[1]
        maximum = torch.empty((size0, size1), dtype=torch.float32, device='cpu')
        kernel_add_maximum(matmul.data_ptr(), b.data_ptr(), maximum.data_ptr(), size0, size1)

Each buffer is a local variable named after its node, deleted (`del matmul`) after the last step
that reads it, so its memory is free for the next ones. The text is compiled and run as is, so
what a learner reads is exactly what runs.
"""

from __future__ import annotations

import math
import re
from collections.abc import Callable
from typing import Any

import torch

from minicompiler.autograd.shape_rules import CONV_GRADIENTS
from minicompiler.codegen.body import input_params, output_params
from minicompiler.codegen.common import CodegenError, provenance_comment
from minicompiler.codegen.memory_plan import names_in, plan_memory
from minicompiler.codegen.sizes import KernelSizes
from minicompiler.fuse.schedule import Alias, ExternCall, Kernel, Schedule, Step
from minicompiler.ir.graph import Node
from minicompiler.ir.ops import OPS
from minicompiler.ir.printer import format_value
from minicompiler.ir.symbolic import SymSize, size_code, symbol_of
from minicompiler.layout import LAID_OUT, is_channels_last
from minicompiler.replace.conv_bn import folded_bias, folded_weight
from minicompiler.runtime.kept import KeptValues

# Extern ops whose result is always a fresh contiguous tensor. Any other extern (cat,
# torch_call) may hand back another layout, while kernels read it as contiguous.
CONTIGUOUS_EXTERNS = frozenset({"matmul", "addmm", "bmm", "reshape"})
# torch functions a graph calls that always answer a new tensor (not a view of an argument)
NEW_MEMORY_CALLS = frozenset({torch.conv1d, torch.conv2d, torch.conv3d, torch.conv_transpose1d, torch.conv_transpose2d,
                              torch.conv_transpose3d, torch.nn.grad.conv2d_input, torch.nn.grad.conv2d_weight,
                              torch._addmm_activation})
# torch.nn.grad's gradient function -> (its convolution's, which gradient it computes)
CONVOLUTION_GRADIENT = {fn: (convolution, role) for convolution, grads in CONV_GRADIENTS.items()
                        for fn, role in zip(grads, ("input", "weight"), strict=True)}
# functions that keep a result per argument tensor, known by identity and memory (replace/conv_bn.py):
# the memory of what they read must not take a new value within the call
CACHED_PER_TENSOR = (folded_weight, folded_bias)
RESERVED = frozenset({"torch", "ops", "inputs", "call", "float", "channels_last_copy", "reinterpret_tensor", "laid_out",
                      "empty_strided_cuda", "torch_call_vjps", "recorded_vjps", "convolution_grads", "kept",
                      "kept_values"})
# the gradient ops of a library call, and where each has the position of the argument it differentiates
VJP_ARGNUM = {"torch_call_vjp": 1, "recorded_vjp": 3}
GENERATED_NAME = re.compile(r"(const_|size|s)[0-9]+")
LITERALS = (type(None), bool, int, float, str, torch.dtype, torch.device)


class _Writer:
    def __init__(self, schedule: Schedule) -> None:
        self.names: dict[Node, str] = {}
        self.constants: dict[str, Any] = {}  # non-literal arguments, bound in the namespace
        self.lines: list[str] = []
        self.cuda_device = graph_cuda_device(schedule)
        taken = set(RESERVED) | {k.name for k in schedule.kernels}
        for node in schedule.buffers:
            # the wrapper makes names of its own (const_0, size0, s0): a buffer that looks like one
            # would be overwritten by it, so it moves aside (node names are identifiers already, graph.py)
            name = "v_" + node.name if GENERATED_NAME.fullmatch(node.name) else node.name
            while name in taken:
                name += "_"
            taken.add(name)
            self.names[node] = name

    def format(self, value: Any) -> str:
        """Python source for an argument or output: buffers by name, literals as text."""
        if isinstance(value, Node):
            return self.names[value]
        if isinstance(value, list):
            return f"[{', '.join(self.format(v) for v in value)}]"
        if isinstance(value, tuple) and not hasattr(value, "_fields"):
            inner = ", ".join(self.format(v) for v in value)
            return f"({inner},)" if len(value) == 1 else f"({inner})"
        if isinstance(value, dict) and all(isinstance(k, str) for k in value):
            return "{" + ", ".join(f"{k!r}: {self.format(v)}" for k, v in value.items()) + "}"
        if isinstance(value, LITERALS):
            return format_value(value)
        if isinstance(value, SymSize):
            return value.code()  # a symbolic size: computed from the symbols read at the top
        return self.bind(value)

    def bind(self, value: Any) -> str:
        name = f"const_{len(self.constants)}"
        self.constants[name] = value
        return name

    def call_args(self, args: tuple[Any, ...], kwargs: dict[str, Any]) -> str:
        keywords = [f"{k}={self.format(v)}" for k, v in kwargs.items()]
        return ", ".join([self.format(a) for a in args] + keywords)


Launch = Callable[[Kernel, list[str], list[str]], str]  # (kernel, buffers, sizes) -> the line that runs it


def graph_cuda_device(schedule: Schedule) -> torch.device | None:
    """The GPU a schedule's tensors are on, when they are all on one (its wrapper then runs with
    that GPU current, and makes its buffers there: runtime/allocation.py); else None."""
    devices = {n.meta.device for n in schedule.graph.nodes if n.meta is not None}
    return devices.pop() if len(devices) == 1 and next(iter(devices)).type == "cuda" else None


def wrapper_source(schedule: Schedule, launch: Launch, dynamic: bool = False,
                   consume_inputs: bool = False) -> tuple[str, dict[str, Any], list[str]]:
    """The wrapper's text, the constants its namespace must bind, and notes for the report (what
    the memory plan reuses, codegen/memory_plan.py; which calls it gathers). `launch(kernel, buffers,
    sizes)` is the backend's line that runs a kernel on the named buffers and runtime sizes.
    `dynamic`: kernels take their sizes as arguments, read from the tensors at call time.
    `consume_inputs`: after unpacking, the input list is emptied (`inputs.clear()`), so an input
    too is freed after its last use (a backward's saved activations, which the caller let go)."""
    w = _Writer(schedule)
    folds = _kept_folds(schedule.steps)
    kept_inputs = list(dict.fromkeys(p for node in folds for p in node.inputs()))
    kept_nodes = {*folds, *kept_inputs}
    prologue = _kept_values_lines(folds, kept_inputs, w)
    lines = [*prologue, "def call(inputs):"]
    if schedule.graph.inputs:
        unpacked = ", ".join(w.names[p] for p in schedule.graph.inputs)
        lines.append(f"    {unpacked}{',' if len(schedule.graph.inputs) == 1 else ''} = inputs")
        if consume_inputs:
            lines.append("    inputs.clear()")
        lines += _symbol_lines(schedule, w)
    for p in schedule.graph.inputs:  # read channels-last (layout.py): a weight's copy, made once
        if is_channels_last(p) and p not in kept_nodes and not p.tags.get(LAID_OUT):
            lines.append(f"    {w.names[p]} = channels_last_copy({w.names[p]})")
    symbolic = not all(_static(node) for node in schedule.graph.nodes if node.meta is not None)
    views = {} if dynamic or symbolic else direct_views(schedule)  # sizes known only at call time: torch's ops
    for node, root in kernel_only_views(schedule, views).items():  # no statement: the kernels read the root
        w.names[node] = w.names[root]
    gathered = {**_gathered_vjps(schedule.steps), **_gathered_convolution_grads(schedule.steps)}
    later = {node for first, nodes in gathered.items() for node in nodes if node is not first}  # with the first
    blocks = [_kept_call_lines(folds, kept_inputs, w)] if folds else []
    blocks += [_kernel_lines(step, w, launch, dynamic) if isinstance(step, Kernel)
               else [] if step.node in views and w.names[step.node] == w.names[views[step.node][0]]
               else _view_lines(step.node, views[step.node], w) if step.node in views
               else _gathered_lines(gathered[step.node], w) if step.node in gathered
               else [] if step.node in later or step.node in kept_nodes
               else _call_lines(step, w)
               for step in _without_unread_views(schedule, views)]
    kept = set(names_in(w.format(schedule.graph.outputs)))
    if not consume_inputs:  # the caller's list keeps them alive anyway: no `del` for them
        kept |= {w.names[n] for n in schedule.graph.inputs}
    externs = [step.node for step in schedule.steps if isinstance(step, ExternCall)]
    fresh = {w.names[node] for node in externs if _new_memory(node)}
    pinned = {w.names[arg] for node in externs if node.op == "torch_call" and node.args[0] in CACHED_PER_TENSOR
              for arg in node.inputs()}
    plan = plan_memory(blocks, set(w.names.values()), kept, fresh, pinned)
    lines += plan.lines
    lines.append(f"    return {w.format(schedule.graph.outputs)}")
    return "\n".join(lines) + "\n", w.constants, [note for note in (plan.summary(), _gathered_note(gathered)) if note]


def _kept_folds(steps: list[Step]) -> list[Node]:
    """The batch norm folds (replace/conv_bn.py) that read the graph's inputs only: their values
    are the same from call to call until a parameter changes (runtime/kept.py)."""
    return [step.node for step in steps if isinstance(step, ExternCall) and step.node.op == "torch_call"
            and step.node.args[0] in CACHED_PER_TENSOR and all(n.op == "placeholder" for n in step.node.inputs())]


def _kept_values_lines(folds: list[Node], inputs: list[Node], w: _Writer) -> list[str]:
    """`def kept_values(...)`: the folds, and the channels-last copies of the weights they read,
    as a function of those inputs, which the wrapper's `kept` calls again only when one changes."""
    if not folds:
        return []
    w.constants["kept"] = KeptValues()
    lines = [f"def kept_values({', '.join(w.names[p] for p in inputs)}):"]
    lines += [f"    {w.names[p]} = channels_last_copy({w.names[p]})" for p in inputs if is_channels_last(p)]
    for node in folds:
        lines += _call_lines(ExternCall(node, ""), w)
    return [*lines, f"    return {_kept_names(folds, inputs, w)}", "", ""]


def _kept_call_lines(folds: list[Node], inputs: list[Node], w: _Writer) -> list[str]:
    arguments = ", ".join(w.names[p] for p in inputs)
    return ["    # the batch norms' folds, made again only when a tensor they read changes (runtime/kept.py)",
            f"    {_kept_names(folds, inputs, w)} = kept(kept_values, {arguments})"]


def _kept_names(folds: list[Node], inputs: list[Node], w: _Writer) -> str:
    """What `kept_values` returns: the channels-last copies it makes, then the folds."""
    return ", ".join([w.names[p] for p in inputs if is_channels_last(p)] + [w.names[n] for n in folds])


def _new_memory(node: Node) -> bool:
    """Whether an extern's result is new memory for sure, never a view of an argument."""
    if node.op == "torch_call":
        return node.args[0] in NEW_MEMORY_CALLS
    return node.op in CONTIGUOUS_EXTERNS and node.op != "reshape"


def _gathered_vjps(steps: list[Step]) -> dict[Node, list[Node]]:
    """The vjps of one call (same function, gradient and arguments; one per input needing a
    gradient), by the first of them: the wrapper gets them from one backward."""
    groups: dict[tuple, list[Node]] = {}
    for node in (step.node for step in steps if isinstance(step, ExternCall) and step.node.op in VJP_ARGNUM):
        at = VJP_ARGNUM[node.op]
        rest = node.args[:at] + node.args[at + 1:]
        key = (node.op, *(a if isinstance(a, LITERALS) else id(a) for a in rest),
               *((k, v if isinstance(v, LITERALS) else id(v)) for k, v in node.kwargs.items()))
        groups.setdefault(key, []).append(node)
    return {nodes[0]: nodes for nodes in groups.values() if len(nodes) > 1}


def _gathered_convolution_grads(steps: list[Step]) -> dict[Node, list[Node]]:
    """A convolution's input gradient and weight gradient (torch.nn.grad's `conv2d_input` and
    `conv2d_weight` of one output gradient), by the first of the two: the wrapper gets both from
    one call where everything the two read is computed before the first (the convolution's input
    is saved by the forward for that, autograd/partition.py)."""
    computed_at = {node: i for i, step in enumerate(steps) for node in _step_nodes(step)}
    pairs: dict[tuple, dict[str, Node]] = {}
    for node in (step.node for step in steps if isinstance(step, ExternCall)):
        if node.op != "torch_call" or node.args[0] not in CONVOLUTION_GRADIENT:
            continue
        convolution, role = CONVOLUTION_GRADIENT[node.args[0]]
        _, first, second, grad, *settings = node.args
        # the same convolution: its input's and weight's sizes, output gradient and settings
        sizes = (first, second.meta.shape) if role == "input" else (first.meta.shape, second)
        pairs.setdefault((convolution, id(grad), sizes, *settings), {})[role] = node
    gathered = {}
    for pair in pairs.values():
        nodes = sorted(pair.values(), key=computed_at.__getitem__)
        if len(nodes) == 2 and all(computed_at.get(i, -1) < computed_at[nodes[0]] for n in nodes for i in n.inputs()):
            gathered[nodes[0]] = [pair["input"], pair["weight"]]
    return gathered


def _gathered_note(gathered: dict[Node, list[Node]]) -> str:
    """The report's note on the calls gathered into one ("" when none)."""
    convolutions = sum(first.op == "torch_call" for first in gathered)
    parts = [f"convolution_grads for {convolutions} convolution{'s' * (convolutions != 1)} (both gradients "
             "from one call)"] * bool(convolutions)
    for op in VJP_ARGNUM:
        if calls := sum(first.op == op for first in gathered):
            parts.append(f"{op}s for {calls} call{'s' * (calls != 1)} (all its gradients from one backward)")
    return "gathered: " + "; ".join(parts) if parts else ""


def _step_nodes(step: Step) -> list[Node]:
    return [b.node for b in step.outputs] if isinstance(step, Kernel) else [step.node]


def _gathered_lines(nodes: list[Node], w: _Writer) -> list[str]:
    """One call for several nodes, unpacked into their names, each laid out as its meta says:
    `a, b = torch_call_vjps(fn, (0, 1), grad, *args)` (one recomputation and one backward for a
    call's gradients), `grad_x, grad_w = convolution_grads(grad, x, w, *settings)`."""
    if nodes[0].op in VJP_ARGNUM:  # torch_call_vjps(fn, argnums, ...), recorded_vjps(name, result, fn, argnums, ...)
        at, args = VJP_ARGNUM[nodes[0].op], nodes[0].args
        call = f"{nodes[0].op}s({w.call_args(args[:at], {})}, {w.format(tuple(n.args[at] for n in nodes))}, " \
               f"{w.call_args(args[at + 1:], nodes[0].kwargs)})"
    else:
        (_, _, weight, grad, *settings), (_, input, *_) = nodes[0].args, nodes[1].args
        call = f"convolution_grads({w.call_args((grad, input, weight, *settings), {})})"
    lines = [f"    # {provenance_comment(n)}" for n in nodes] + [f"    {', '.join(w.names[n] for n in nodes)} = {call}"]
    return lines + [f"    {w.names[n]} = {_as_laid_out(w.names[n], n)}" for n in nodes]


def _layout(node: Node) -> str:
    return "memory_format=torch.channels_last" if is_channels_last(node) else ""


def _call_lines(step: Step, w: _Writer) -> list[str]:
    node = step.node
    if node.op == "torch_call":
        call = f"{w.bind(node.args[0])}({w.call_args(node.args[1:], node.kwargs)})"
    else:
        call = f"ops.{node.op}({w.call_args(node.args, node.kwargs)})"
    if isinstance(step, ExternCall) and node.op not in CONTIGUOUS_EXTERNS:
        # kernels read an extern's result in the layout its meta says (layout.py): a no-op when it is
        call = _as_laid_out(call, node)
    return [f"    # {provenance_comment(node)}", f"    {w.names[node]} = {call}"]


def _as_laid_out(call: str, node: Node) -> str:
    strides = node.meta.stride()
    if node.meta.is_contiguous() or is_channels_last(node) or not all(isinstance(s, int) for s in strides):
        return f"{call}.contiguous({_layout(node)})"
    return f"laid_out({call}, {strides})"  # a layout torch gives it other than those (ir/extern_layouts.py)


def direct_views(schedule: Schedule) -> dict[Node, tuple[Node, tuple[int, ...], tuple[int, ...], int]]:
    """Views the wrapper makes in one step from the buffer they view: node -> (that buffer, sizes,
    strides, offset into it). `x.reshape(...).permute(...)[0].reshape(...)` is four calls into
    torch, a few microseconds each, and a model's wrapper makes hundreds of views per call; the
    same view made at once from `x`'s memory is one cheap call (`reinterpret_tensor`, as
    TorchInductor's wrappers do). Worked out here on data-less tensors, by running the view ops
    themselves: a chain only qualifies if torch made a view (a reshape may copy) of sizes fixed
    at compile time. Views the graph returns are left to torch's own ops, which record them as
    views of their base for autograd."""
    outputs = set(_nodes_in(schedule.graph.outputs))
    aliases = {step.node for step in schedule.steps if isinstance(step, Alias)}
    fakes: dict[Node, tuple[Node, torch.Tensor]] = {}  # node -> (the buffer it views, a fake of it)
    views = {}
    for node in (step.node for step in schedule.steps if isinstance(step, Alias)):
        source = node.args[0]
        if source not in fakes and source not in aliases:
            fakes[source] = (source, source.meta.fake())
        if source not in fakes:
            continue
        root, fake = fakes[source]
        view = fake if node.op == "detach" else OPS[node.op].impl(fake, *node.args[1:], **node.kwargs)
        root_fake = fakes[root][1]
        if view is not root_fake and view._base is not root_fake:
            fakes[node] = (node, view)  # a copy after all: a buffer of its own, views of it start here
            continue
        fakes[node] = (root, view)
        if node not in outputs:
            views[node] = (root, tuple(view.shape), tuple(view.stride()), view.storage_offset())
    return views


def kernel_only_views(schedule: Schedule, views: dict[Node, tuple]) -> dict[Node, Node]:
    """The views only generated kernels read, each starting where its buffer starts: view -> that
    buffer. A kernel takes a pointer and indexes it with the strides it was generated for, so
    it is handed the buffer itself: the view's `reinterpret_tensor` (a few microseconds of host
    time: a training step of EfficientNet-B0 makes ~400) and its `del` are not written at all."""
    read_otherwise = set(_nodes_in(schedule.graph.outputs))
    for step in schedule.steps:
        if isinstance(step, Kernel):  # written in place into, or copied: the tensor itself is used
            read_otherwise |= {b.into or b.copy_of for b in step.outputs}
        elif not (isinstance(step, Alias) and step.node in views):  # a view made from the root reads no view
            read_otherwise |= set(_nodes_in((step.node.args, step.node.kwargs)))
    return {node: root for node, (root, _, _, offset) in views.items()
            if offset == 0 and node not in read_otherwise and node.meta.dtype == root.meta.dtype}


def _static(node: Node) -> bool:
    return node.meta is not None and all(type(n) is int for n in node.meta.shape + node.meta.stride())


def _view_lines(node: Node, view: tuple[Node, tuple[int, ...], tuple[int, ...], int], w: _Writer) -> list[str]:
    root, sizes, strides, offset = view  # the offset counts from where the buffer starts (it may be a slice)
    call = f"reinterpret_tensor({w.names[root]}, {w.format(sizes)}, {w.format(strides)}, {offset})"
    return [f"    # {provenance_comment(node)}", f"    {w.names[node]} = {call}"]


def _without_unread_views(schedule: Schedule, views: dict[Node, tuple]) -> list[Step]:
    """The steps, less the views no step reads any more: the links of a chain whose end is now
    made from the chain's buffer directly."""
    read: set[Node] = set()
    for step in schedule.steps:
        if isinstance(step, Kernel):
            read |= {b.node for b in step.inputs} | {b.into or b.copy_of for b in step.outputs
                                                       if (b.into or b.copy_of) is not None}
        elif step.node in views:
            read.add(views[step.node][0])
        else:
            read |= set(_nodes_in((step.node.args, step.node.kwargs)))
    return [step for step in schedule.steps if isinstance(step, Kernel) or step.node not in views
            or step.node in read]


def _nodes_in(value: Any) -> list[Node]:
    if isinstance(value, Node):
        return [value]
    if isinstance(value, (list, tuple)):
        return [n for v in value for n in _nodes_in(v)]
    if isinstance(value, dict):
        return [n for v in value.values() for n in _nodes_in(v)]
    return []


def _kernel_lines(kernel: Kernel, w: _Writer, launch: Launch, dynamic: bool) -> list[str]:
    sizes = KernelSizes(kernel, dynamic)
    arguments = sizes.arguments(input_params(kernel), output_params(kernel))
    read = [a for a in arguments if a.attribute == "shape"]
    lines = []
    if read:  # size0, size1 = x.shape[0], x.shape[1]
        sources = [a.source(None if a.buffer is None else w.names[a.buffer]) for a in read]
        lines.append(f"    {', '.join(a.param for a in read)} = {', '.join(sources)}")
    for buffer in kernel.outputs:
        if buffer.into is not None:  # the kernel overwrites the input with its new value (fuse/in_place.py)
            lines.append(f"    {w.names[buffer.node]} = {w.names[buffer.into]}  # written in place")
            continue
        if buffer.copy_of is not None:  # a scatter's base that is read elsewhere too: written into a copy
            lines.append(f"    {w.names[buffer.node]} = {w.names[buffer.copy_of]}.clone("
                         "memory_format=torch.contiguous_format)")
            continue
        device = f", device={str(buffer.node.meta.device)!r}"  # named even for the CPU: a user's
        # torch.set_default_device("cuda") must not hand a C++ kernel GPU memory
        shape = [size_code(size) for size in sizes.of_shape(buffer.shape)]  # numbers, size0, ... or s0
        shape_text = f"({shape[0]},)" if len(shape) == 1 else f"({', '.join(shape)})"
        dtype = format_value(buffer.dtype)
        if dynamic and buffer.node.meta.is_contiguous():
            lines.append(f"    {w.names[buffer.node]} = torch.empty({shape_text}, dtype={dtype}{device})")
        else:  # with its strides: a view the kernel stores (a row value expanded over its row) is laid
            # out as that view; and torch.empty_strided is the cheaper call of the two
            strides = [size_code(stride) for stride in buffer.strides]
            strides_text = f"({strides[0]},)" if len(strides) == 1 else f"({', '.join(strides)})"
            if buffer.node.meta.device == w.cuda_device:  # on the current GPU (runtime/allocation.py)
                lines.append(f"    {w.names[buffer.node]} = empty_strided_cuda({shape_text}, {strides_text}, {dtype})")
            else:
                lines.append(f"    {w.names[buffer.node]} = torch.empty_strided({shape_text}, {strides_text}, "
                             f"dtype={dtype}{device})")
    if any(math.prod(b.shape) > 0 for b in kernel.outputs):  # nothing to compute into empty outputs
        size_args = [a.param if a.attribute == "shape" else a.source(w.names[a.buffer]) for a in arguments]
        lines.append(f"    {launch(kernel, [w.names[b.node] for b in kernel.inputs + kernel.outputs], size_args)}")
    return lines


def _symbol_lines(schedule: Schedule, w: _Writer) -> list[str]:
    """With symbolic sizes: each symbol read from the first input that has it as a dim
    (`s0 = x.shape[1]`), so shapes can be written as `(16, s0, 256)`."""
    bound: dict[str, str] = {}
    for p in schedule.graph.inputs:
        for d, size in enumerate(p.meta.shape if p.meta is not None else ()):
            if (found := symbol_of(size)) is not None and found[0] not in bound:
                read = f"{w.names[p]}.shape[{d}]"
                bound[found[0]] = read if found[1] == 1 else f"{read} // {found[1]}"
    used = {name for node in schedule.graph.nodes if node.meta is not None
            for size in node.meta.shape + node.meta.stride() if isinstance(size, SymSize) for name in size.symbols()}
    if used - bound.keys():
        raise CodegenError(f"the symbolic sizes {sorted(used - bound.keys())} cannot be read from any input")
    return [f"    {name} = {read}" for name, read in sorted(bound.items())]
