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
and outputs are allocated channels-last. Views and reductions keep their row-major results, and
a node that a view reads stays row-major: the view's strides were worked out for that.
"""

from __future__ import annotations

import dataclasses

import torch

from minicompiler.ir import OPS, Graph, Node, map_structure

CHANNELS_LAST = torch.channels_last
CONVOLUTIONS = (torch.conv2d, torch.conv_transpose2d)


def assign_layouts(graph: Graph) -> list[str]:
    """Give nodes that torch makes channels-last that layout (their metas change in place);
    one note per node changed."""
    users = graph.users()
    notes = []
    for node in graph.compute_nodes():
        if OPS[node.op].kind not in ("pointwise", "extern") or not _concrete_4d(node):
            continue
        if any(user.op != "output" and OPS[user.op].kind == "view" for user in users[node]):
            continue
        if _torch_makes_channels_last(node):
            node.meta = dataclasses.replace(node.meta, strides=channels_last_strides(node.meta.shape))
            notes.append(f"{node.name}: channels-last, as torch lays it out")
    return notes


def follow_saved_layouts(forward: Graph, backward: Graph, count: int) -> None:
    """The backward's first `count` inputs are the forward's last `count` outputs (the saved
    tensors): give them the layouts the forward's pass chose, so the backward reads them right."""
    if count:
        saved = forward.output_nodes()[-count:]
        for placeholder, node in zip(backward.inputs[:count], saved, strict=True):
            placeholder.meta = dataclasses.replace(placeholder.meta, strides=node.meta.strides)


def is_channels_last(node: Node) -> bool:
    """Is `node` laid out channels-last (and not also row-major, as a tensor with C == 1 is)?"""
    meta = node.meta
    return meta is not None and meta.ndim == 4 and not meta.is_contiguous() and (
        meta.stride() == channels_last_strides(meta.shape))


def channels_last_strides(shape: tuple[int, ...]) -> tuple[int, ...]:
    n, c, h, w = shape
    return (h * w * c, 1, w * c, c)


def _concrete_4d(node: Node) -> bool:
    # symbolic sizes would be specialized (guarded) by running on meta tensors: left row-major
    return node.meta is not None and node.meta.ndim == 4 and all(isinstance(s, int) for s in node.meta.shape)


def _torch_makes_channels_last(node: Node) -> bool:
    if not any(is_channels_last(a) for a in node.inputs()):
        return False  # no channels-last input: torch's result is row-major

    if node.op == "torch_call" and node.args[0] in CONVOLUTIONS:
        # meta tensors cannot say (the choice is the backend's), but oneDNN and cuDNN both answer
        # channels-last when the input or the weight is
        return True

    def fake(value: object) -> object:
        return value.meta.fake() if isinstance(value, Node) else value

    result = OPS[node.op].impl(*map_structure(fake, node.args), **map_structure(fake, node.kwargs))
    return result.is_contiguous(memory_format=CHANNELS_LAST) and not result.is_contiguous()
