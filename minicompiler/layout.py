"""Memory layout: channels-last tensors stay channels-last through compiled code, as in eager.

Compiled code allocates a buffer row-major unless its node's meta says otherwise, and the wrapper
copied every extern result (a convolution) to row-major so kernels could read it as such. For a
channels-last model that was a copy after each convolution, and an output in another memory
format than eager's. This pass, run on a graph just before it is lowered, gives a 4-d node the
channels-last layout wherever torch itself would produce one:

    extern     a convolution of a channels-last input or weight is channels-last (what oneDNN
               and cuDNN choose); other externs: torch's implementation on meta tensors
               with the inputs' strides
    pointwise  the same: TensorIterator's choice for those strides

The wrapper then asks for the extern's format (`.contiguous(memory_format=torch.channels_last)`,
which returns the tensor itself when it already is), kernels read and write through the strides,
and outputs are allocated channels-last. Reductions keep their row-major results; a view of a node
made channels-last gets the strides torch gives it then (worked out again on meta tensors).
"""

from __future__ import annotations

import dataclasses
from typing import Any

import torch

from minicompiler.fuse.rules import reduction_dims
from minicompiler.ir import OPS, Graph, Node, TensorMeta, map_structure
from minicompiler.ir.ops import INLINE, infer_meta
from minicompiler.replace.conv_bn import folded_weight

CHANNELS_LAST = torch.channels_last
CONVOLUTIONS = (torch.conv2d, torch.conv_transpose2d)
# A convolution's gradient for its input, in a backward graph: conv2d_input(input_size, weight, grad).
# Like a convolution, it answers channels-last for a channels-last weight (oneDNN; cuDNN also for
# a channels-last grad), so under the layout optimization its weight is converted too: otherwise
# every activation gradient came back row-major and the wrapper copied it (19 copies per ResNet-18
# training step on the H100).
GRADIENTS_FOR_INPUT = (torch.nn.grad.conv2d_input,)
# the tensor arguments each one reads (positions in a torch_call's args): a kernel writing one of
# them may as well write it channels-last; and where the weight is
OPERANDS = {torch.conv2d: (1, 2), torch.conv_transpose2d: (1, 2), torch.nn.grad.conv2d_input: (2, 3),
            torch.nn.grad.conv2d_weight: (1, 3)}
WEIGHT = 2
LAID_OUT = "laid_out"  # node.tags: an input that arrives laid out as its meta says (a saved tensor)


def assign_layouts(graph: Graph, convolutions_channels_last: bool = False, keep_last: int = 0,
                   training: bool = False, gradients_of: list[TensorMeta] | None = None,
                   replayed: bool = False) -> list[str]:
    """Give nodes that torch makes channels-last that layout (their metas change in place); one
    note per node changed. `convolutions_channels_last`: the layout optimization (see below);
    the graph's last `keep_last` outputs (a forward's saved tensors) may keep the layout chosen;
    `training`: the graph is a training step's forward, whose trained weights change every step;
    `gradients_of`: the graph is a backward, its outputs the gradients of inputs laid out so;
    `replayed`: the graph is replayed from a CUDA graph, where launches cost no host time."""
    every = _convolutions(graph, tuple(OPERANDS))
    laid_out = [conv for conv in every if replayed or not _reads_the_callers_layout(conv)]
    if not convolutions_channels_last or not laid_out:
        return _follow_torch(graph, set())
    original = {node: node.meta for node in graph.nodes}
    _follow_torch(graph, set())  # eager's layouts: what the graph's outputs must have
    eager = {node: node.meta for node in graph.output_nodes()}
    for node, meta in original.items():
        node.meta = meta
    notes = _convert_weights(graph, laid_out, keep_last, training) + _convert_images(graph, laid_out, keep_last)
    operands = _convolution_operands(laid_out)
    row_major = _convolution_operands([conv for conv in every if conv not in laid_out]) - operands
    convolutions = {conv for conv in laid_out if conv.args[0] in CONVOLUTIONS + GRADIENTS_FOR_INPUT}
    notes += _follow_torch(graph, operands, convolutions, row_major)
    notes += _reductions_of_one_window(graph)
    notes += _outputs_as_eager(graph, eager, keep_last)
    return notes + _gradients_as_their_inputs(graph, gradients_of or [])


def _follow_torch(graph: Graph, wanted: set[Node], convolutions: set[Node] = frozenset(),
                  row_major: set[Node] = frozenset()) -> list[str]:
    """Channels-last for each node torch would make so, for the `wanted` pointwise nodes and the
    `convolutions` made channels-last; the `row_major` ones stay so."""
    users = graph.users()
    formulas = _coordinate_formulas(graph)
    notes = []
    for node in graph.compute_nodes():
        kind = OPS[node.op].kind
        if kind not in ("pointwise", "extern", "reduction") or not _concrete_4d(node):
            continue
        if kind == "reduction" and node not in wanted:  # a reduction keeps its row-major result
            continue
        if node in row_major:  # what a convolution left row-major reads
            continue
        if node in wanted or _torch_makes_channels_last(node, convolutions, formulas):
            if _channels_last_with_its_views(node, users):
                why = "the convolution reading it runs" if node in wanted else "torch lays it out"
                notes.append(f"{node.name}: channels-last, as {why}")
    return notes


def _channels_last_with_its_views(node: Node, users: dict[Node, list[Node]]) -> bool:
    """Make `node` channels-last, and give the views that read it (and the views of those) the
    strides torch gives them then: a ConvNeXt block's `permute(0, 2, 3, 1)` of a channels-last
    convolution output is then row-major, as in eager, where it read the convolution's row-major
    copy with strides before. False, with nothing changed, where a reshape among those views would
    copy the new layout (a flatten before a Linear layer): the node stays row-major, which its
    kernel writes at no cost, and the reshape stays free."""
    before = {changed: changed.meta for changed in (node, *_views_reading(node, users))}
    node.meta = dataclasses.replace(node.meta, strides=channels_last_strides(node.meta.shape))
    if _views_follow(node, users):
        return True
    for changed, meta in before.items():
        changed.meta = meta
    return False


def _views_follow(node: Node, users: dict[Node, list[Node]]) -> bool:
    """The views that read `node` (and the views of those) get the strides torch gives them for
    `node`'s layout now; whether every reshape among them is still a view (not a copy)."""
    all_views = True
    for view in _views_reading(node, users):
        all_views = all_views and (view.op != "reshape" or _stays_a_view(view))
        view.meta = dataclasses.replace(view.meta, strides=infer_meta(view.op, view.args, view.kwargs).strides)
    return all_views


def _stays_a_view(reshape: Node) -> bool:
    """Whether the reshape is a view of what it reads, as that is laid out now."""
    try:
        reshape.args[0].meta.fake().view(reshape.args[1])
    except RuntimeError:
        return False
    return True


def _views_reading(node: Node, users: dict[Node, list[Node]]) -> list[Node]:
    """The views of `node`, and of those, each after the one it reads."""
    views = [user for user in users[node] if user.op != "output" and OPS[user.op].kind == "view"]
    return [found for view in views for found in (view, *_views_reading(view, users))]


# -- the layout optimization ----------------------------------------------------------------
# cuDNN's convolutions run fastest on channels-last tensors (NHWC: its tensor-core kernels want
# the channels innermost); given row-major ones it converts them itself, on every call. As
# torch.compile does on GPUs, every convolution is made to run channels-last: a weight (a
# parameter, so the same tensor every call) is converted once and the copy kept until the
# weight changes (`channels_last_copy`), or, trained (it changes every step), copied by a kernel
# in the forward, its gradient copied back by one in the backward; activations between
# convolutions are computed channels-last by the kernels that write them; and the graph's
# outputs get eager's layout back.


# TorchInductor's rule of thumb: a graph with fewer than one convolution per 300 nodes is not
# worth it. A ViT has one (its patch embedding) among hundreds of attention and MLP nodes: the
# copies in and out of channels-last cost more than the convolution saves, and on the H100 its
# channels-last cuDNN kernel was a TF32 one where eager's row-major one was not (1.5e-3 from
# eager's result instead of 1e-5).
NODES_PER_CONVOLUTION = 300


def worth_channels_last(graph: Graph) -> bool:
    """Whether the layout optimization pays on `graph`: it has convolutions, not too few of them."""
    convolutions = len(_convolutions(graph))
    return convolutions > 0 and len(graph.nodes) < NODES_PER_CONVOLUTION * convolutions


def too_few_convolutions(graph: Graph) -> list[str]:
    """The report's note when a graph has convolutions but too few for the optimization."""
    convolutions = len(_convolutions(graph))
    if convolutions == 0 or worth_channels_last(graph):
        return []
    return [f"layout optimization skipped: {convolutions} convolution(s) in {len(graph.nodes)} nodes, fewer "
            f"than one per {NODES_PER_CONVOLUTION} (channels-last copies would cost more than they save)"]


def _convolutions(graph: Graph, kinds: tuple = CONVOLUTIONS + GRADIENTS_FOR_INPUT) -> list[Node]:
    """The graph's convolutions, and (in a backward) their gradients for the input."""
    return [n for n in graph.compute_nodes() if n.op == "torch_call" and n.args[0] in kinds and _concrete_4d(n)]


def _convolution_operands(convolutions: list[Node]) -> set[Node]:
    """The pointwise nodes that `convolutions` and their gradients read (input, weight, gradient):
    laid out channels-last, their kernels may as well write them so. A reduction's too: a max pool
    (the maximum over each window) before a convolution, whose rows are then walked in
    channels-last order, neighbouring channels side by side (fuse/schedule.py `row_order`)."""
    operands = {conv.args[i] for conv in convolutions for i in OPERANDS[conv.args[0]]}
    return {n for n in operands if isinstance(n, Node) and n.op != "placeholder"
            and OPS[n.op].kind in ("pointwise", "reduction")}


def _reads_the_callers_layout(conv: Node) -> bool:
    """Is `conv` a convolution (or its weight's gradient) of a row-major graph input, a batch of
    images as a data loader gives it? Unless the program is replayed from a CUDA graph, such a
    convolution runs row-major, as in eager, and the kernel after it writes channels-last for the
    next one. Made channels-last, its input was converted on every call, forward and backward, and
    a trained weight copied by a kernel every step: on the H100, a ResNet-18 training step's stem
    took 0.09 ms of host time in the forward and 0.18 in the backward (other convolutions 0.03
    and 0.07); an H200's ResNet-18 b16 training step went from 1.05x eager to 1.14x without them.
    Replayed, the launches cost no host time, and cuDNN's own conversions of the row-major input
    and output cost more GPU time than the copies (H200, b16: 0.07 ms of inference, 0.2 of training)."""
    data = conv.args[1]
    return (conv.args[0] in (*CONVOLUTIONS, torch.nn.grad.conv2d_weight) and isinstance(data, Node)
            and data.op == "placeholder" and _concrete_4d(data) and not is_channels_last(data))


def _reductions_of_one_window(graph: Graph) -> list[str]:
    """A training max pool keeps its argmax for the backward, a reduction over the same windows
    as its channels-last maximum: laid out in the same order (channels innermost), the kernel
    computing both stores each row of both at neighbouring addresses; row-major, the argmax's
    stores land W*H elements apart."""
    users = graph.users()
    notes = []
    for node in graph.compute_nodes():
        if OPS[node.op].kind != "reduction" or not is_channels_last(node):
            continue
        for sibling in users[node.args[0]]:
            if (sibling is node or OPS[sibling.op].kind != "reduction" or sibling.meta.ndim < 4
                    or reduction_dims(sibling) != reduction_dims(node) or not _concrete(sibling)
                    or sibling.meta.shape[:4] != node.meta.shape or sibling.meta.stride() != row_major(sibling)
                    or any(OPS[u.op].kind == "view" for u in users[sibling] if u.op != "output")):
                continue
            n, c, h, w = node.meta.shape
            strides = (h * w * c, 1, w * c, c) + (1,) * (sibling.meta.ndim - 4)
            sibling.meta = dataclasses.replace(sibling.meta, strides=strides)
            notes.append(f"{sibling.name}: channels-last, as {node.name} over the same windows")
    return notes


def _convert_weights(graph: Graph, convolutions: list[Node], keep_last: int = 0,
                     training: bool = False) -> list[str]:
    """Weights that are graph inputs (parameters): read channels-last (the wrapper passes a
    converted copy, see `channels_last_copy`). Not a weight a view reads (its strides were worked
    out row-major), nor one the graph outputs for a caller (who would get the copy). A weight the
    forward saves for the backward (its last `keep_last` outputs) is converted: the backward then
    gets the copy, instead of converting the parameter again on every step."""
    users, outputs = graph.users(), graph.output_nodes()
    shown = set(outputs[: len(outputs) - keep_last])
    notes = []
    for conv in convolutions:
        if conv.args[0] not in CONVOLUTIONS + GRADIENTS_FOR_INPUT:
            continue
        weight = _parameter_of(conv.args[WEIGHT])
        if (not isinstance(weight, Node) or weight.op != "placeholder" or not _concrete_4d(weight)
                or is_channels_last(weight) or weight in shown
                or any(OPS[u.op].kind == "view" for u in users[weight] if u.op != "output")):
            continue
        # (a depthwise weight, (C, 1, kh, kw), is laid out alike either way: nothing to copy)
        if training and weight.meta.requires_grad and not weight.meta.fake().is_contiguous(memory_format=CHANNELS_LAST):
            notes.append(_converted_by_a_kernel(graph, weight, users[weight]))
            continue
        weight.meta = dataclasses.replace(weight.meta, strides=channels_last_strides(weight.meta.shape))
        notes.append(f"{weight.name}: converted to channels-last once, and again only when it changes")
    return notes


def _convert_images(graph: Graph, convolutions: list[Node], keep_last: int = 0) -> list[str]:
    """A row-major graph input that laid-out convolutions read (a batch of images, where the
    program is replayed from a CUDA graph: see `_reads_the_callers_layout`) is copied channels-last
    by a kernel, once per call; the convolutions read the copy, and so does the backward, where the
    forward saves it for the weight's gradient. Given the row-major batch and a channels-last
    weight, cuDNN converted the batch itself, in the forward and again in the backward: on the
    H200, ResNet-18 b16's training step spent 0.17 ms of GPU time in those conversions."""
    users, outputs = graph.users(), graph.output_nodes()
    shown = set(outputs[: len(outputs) - keep_last])
    reading = (*CONVOLUTIONS, torch.nn.grad.conv2d_weight)
    notes = []
    for data in dict.fromkeys(conv.args[1] for conv in convolutions if conv.args[0] in CONVOLUTIONS):
        if (not isinstance(data, Node) or data.op != "placeholder" or not _concrete_4d(data)
                or is_channels_last(data) or data in shown):
            continue
        _copied_channels_last(graph, data, [u for u in users[data] if u.op == "output" or (
            u.op == "torch_call" and u.args[0] in reading and u.args[1] is data)])
        notes.append(f"{data.name}: copied channels-last by a kernel, for the convolutions that read it")
    return notes


def _converted_by_a_kernel(graph: Graph, weight: Node, readers: list[Node]) -> str:
    """A trained weight changes at every step, so a copy kept until it changes was made again on
    every call, by torch's strided copy: on the H100 that took 0.19 ms of a ResNet-18 b16 training
    step for its 17 weights (TorchInductor's copy kernels, 0.07). The copy is a `clone` node laid
    out channels-last instead, a kernel of its own; the weight's readers (its convolutions, and the
    backward through the saved tensors) read the copy."""
    _copied_channels_last(graph, weight, readers)
    return f"{weight.name}: copied channels-last by a kernel on every step (a trained weight changes every step)"


def _copied_channels_last(graph: Graph, node: Node, readers: list[Node]) -> None:
    """A `clone` of `node` laid out channels-last, before its first reader; `readers` read it instead."""
    copy = graph.call_before(min(readers, key=graph.nodes.index), "clone", node)
    copy.meta = dataclasses.replace(copy.meta, strides=channels_last_strides(node.meta.shape))
    for reader in readers:
        _reads_instead(reader, node, copy)


def _reads_instead(reader: Node, old: Node, new: Node) -> None:
    """`reader` reads `new` wherever it read `old`."""
    reader.args = map_structure(lambda v: new if v is old else v, reader.args)
    reader.kwargs = map_structure(lambda v: new if v is old else v, reader.kwargs)


def _parameter_of(weight: Any) -> Any:
    """The tensor a convolution's weight comes from: a batch norm folded into it (replace/conv_bn.py)
    scales the parameter per channel, which keeps its layout, so converting the parameter is enough."""
    if isinstance(weight, Node) and weight.op == "torch_call" and weight.args[0] is folded_weight:
        return weight.args[1]
    return weight


def _outputs_as_eager(graph: Graph, eager: dict[Node, TensorMeta], keep_last: int) -> list[str]:
    """What the caller sees is laid out as eager's would be: a kernel writes its output so, an
    extern's result is copied (`.contiguous()` in the wrapper)."""
    outputs = graph.output_nodes()
    notes = []
    for node in dict.fromkeys(outputs[: len(outputs) - keep_last]):
        if node.op != "placeholder" and node.meta.stride() != eager[node].stride():
            node.meta = dataclasses.replace(node.meta, strides=eager[node].strides)
            notes.append(f"{node.name}: back to eager's layout, as a graph output")
    return notes


def _gradients_as_their_inputs(backward: Graph, inputs: list[TensorMeta]) -> list[str]:
    """AccumulateGrad keeps a gradient as `.grad` only if it is laid out as its parameter; else it
    copies it, with torch's strided copy. cuDNN computes a convolution weight's gradient laid out
    as the activations, channels-last, while the parameter is row-major: on the H100 those copies
    took 0.19 ms of a ResNet-18 b16 training step (20 of them). Each such gradient (`inputs`: the
    metas of the inputs the backward's outputs are the gradients of) is copied by a kernel of the
    backward instead, a `clone` node laid out as its input, which AccumulateGrad keeps."""
    grads = backward.outputs
    if not inputs or not isinstance(grads, tuple) or len(grads) != len(inputs):
        return []
    notes, copied = [], set()
    for grad, meta in zip(grads, inputs, strict=True):
        if not (isinstance(grad, Node) and grad.op == "torch_call" and is_channels_last(grad)
                and meta.ndim == 4 and meta.is_contiguous()) or grad in copied:
            continue
        copy = backward.call_before(backward.output_node, "clone", grad)
        copy.meta = dataclasses.replace(copy.meta, strides=meta.strides)
        _reads_instead(backward.output_node, grad, copy)
        copied.add(grad)
        notes.append(f"{grad.name}: copied row-major by a kernel, as its parameter is laid out")
    return notes


def follow_saved_layouts(forward: Graph, backward: Graph, count: int) -> None:
    """The backward's first `count` inputs are the forward's last `count` outputs (the saved
    tensors): give them the layouts the forward's pass chose, so the backward reads them right,
    and tag them `LAID_OUT`: the forward made them so, and the wrapper need not check (ResNet-18's
    backward called `channels_last_copy` 54 times a step on tensors already channels-last)."""
    if count:
        saved, users = forward.output_nodes()[-count:], backward.users()
        for placeholder, node in zip(backward.inputs[:count], saved, strict=True):
            placeholder.tags[LAID_OUT] = True
            if placeholder.meta.stride() != node.meta.stride():
                placeholder.meta = dataclasses.replace(placeholder.meta, strides=node.meta.strides)
                _views_follow(placeholder, users)  # a view the backward makes of it reads it as it is


def is_channels_last(node: Node) -> bool:
    """Is `node` laid out channels-last (and not also row-major, as a tensor with C == 1 is)?"""
    meta = node.meta
    return meta is not None and meta.ndim == 4 and not meta.is_contiguous() and (
        meta.stride() == channels_last_strides(meta.shape))


def channels_last_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    n, c, h, w = shape
    return (h * w * c, 1, w * c, c)


def _concrete(node: Node) -> bool:
    return node.meta is not None and all(isinstance(s, int) for s in node.meta.shape)


def row_major(node: Node) -> tuple[int, ...]:
    return TensorMeta(node.meta.shape, node.meta.dtype).stride()


def _concrete_4d(node: Node) -> bool:
    # symbolic sizes would be specialized (guarded) by running on meta tensors: left row-major
    return node.meta is not None and node.meta.ndim == 4 and all(isinstance(s, int) for s in node.meta.shape)


def _coordinate_formulas(graph: Graph) -> set[Node]:
    """The nodes computed from coordinates alone (iota, full and pointwise formulas of them): a
    pooling gradient's window arithmetic, say. A kernel computes such a node where it uses it, so
    its layout is no preference: taken as torch's row-major full-size tensor, it outvoted the
    channels-last gradient beside it, and the kernel masking that gradient read it with a
    stride of H*W between neighbouring threads (ResNet-18's stem, on the GPU)."""
    formulas: set[Node] = set()
    for node in graph.compute_nodes():
        if node.op in INLINE or (OPS[node.op].kind == "pointwise" and node.op != "load_at"
                                 and all(i in formulas for i in node.inputs())):
            formulas.add(node)
    return formulas


def _torch_makes_channels_last(node: Node, convolutions: set[Node] | frozenset[Node] = frozenset(),
                               formulas: frozenset[Node] | set[Node] = frozenset()) -> bool:
    if node in convolutions:
        return True  # its weight is (made) channels-last
    if not any(is_channels_last(a) for a in node.inputs()):
        return False  # no channels-last input: torch's result is row-major

    if node.op == "torch_call" and node.args[0] in CONVOLUTIONS:
        # meta tensors cannot say (the choice is the backend's), but oneDNN and cuDNN both answer
        # channels-last when the input or the weight is
        return True

    def fake(value: object) -> object:
        if not isinstance(value, Node):
            return value
        if value in formulas:  # no layout of its own: broadcast, so the other operands decide
            return torch.empty((), dtype=value.meta.dtype, device="meta").expand(value.meta.fake().shape)
        return value.meta.fake()

    result = OPS[node.op].impl(*map_structure(fake, node.args), **map_structure(fake, node.kwargs))
    return result.is_contiguous(memory_format=CHANNELS_LAST) and not result.is_contiguous()
