"""`torch.autocast` regions, compiled: autocast's casts written into the graph.

Under `torch.autocast`, eager PyTorch picks a dtype per op as it runs: matmuls and
convolutions in float16/bfloat16, precision-hungry ops (softmax, log, sums, ... the list
depends on the device) in float32, every other op in whatever dtype its inputs have.
Generated kernels are specialized on dtypes, so that choice must be made before code
generation. `apply_autocast` runs the captured graph once with torch ops inside the same
autocast region, on the call's real inputs, and notes the dtype each op produced; then it
rebuilds the graph with a `convert` in front of each op whose inputs autocast cast. The
result is an ordinary graph: it decomposes, differentiates, fuses and compiles like any
other, and computes what eager autocast computes, op for op. Asking torch instead of copying
its op lists keeps the policy right for every device and torch version.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Iterator
from typing import Any

import torch

from minicompiler.ir import Graph, Node, flatten, infer_meta, map_structure, rewrite, run_graph
from minicompiler.ir.ops import OPS


class AutocastError(ValueError):
    """An op's autocast dtype cannot be reached by casting its inputs."""


def autocast_state(device_types: Iterable[str]) -> tuple[str, torch.dtype] | None:
    """(device type, dtype) of the autocast region enclosing this call, if any (the first of
    `device_types`, in their order, that has one)."""
    for device in device_types:
        if torch.is_autocast_enabled(device):
            return device, torch.get_autocast_dtype(device)
    return None


@contextlib.contextmanager
def autocast_off() -> Iterator[None]:
    """No autocast region active, on any device: a graph with autocast's casts written in is
    ordinary, and inferring its ops' dtypes must not see autocast cast their inputs again (fake
    CUDA tensors do: a matmul of float32 and float16 would look like float16, needing no cast)."""
    with contextlib.ExitStack() as stack:
        for device in ("cpu", "cuda"):
            if torch.is_autocast_enabled(device):
                stack.enter_context(torch.autocast(device, enabled=False))
        yield


def observed_dtypes(graph: Graph, inputs: list[torch.Tensor]) -> dict[Node, torch.dtype]:
    """The dtype of each tensor-valued node when `graph` runs under the current autocast."""
    dtypes: dict[Node, torch.dtype] = {}

    def note(node: Node, value: Any) -> None:
        if isinstance(value, torch.Tensor):
            dtypes[node] = value.dtype

    with torch.no_grad():
        run_graph(graph, *inputs, observe=note)
    return dtypes


def _mixed_library_call(op: str, args: tuple[Any, ...], kwargs: dict[str, Any], dtype: torch.dtype) -> bool:
    """A library call (matmul, linear, convolution, ...) with a floating input of another dtype than
    autocast gave its result. Such calls take one dtype; what their meta functions infer for mixed
    ones varies (torch 2.11 says float16 for a 4-d matmul of float32 and float16), so the cast is
    written whatever the inference says. Element-wise ops promote, and inference is exact there."""
    if OPS[op].kind in ("pointwise", "reduction", "view"):
        return False
    return any(isinstance(v, Node) and v.meta.dtype.is_floating_point and v.meta.dtype != dtype
               for v in flatten((args, kwargs)))


def apply_autocast(graph: Graph, inputs: list[torch.Tensor]) -> tuple[Graph, int]:
    """`graph` with the current autocast region's casts made explicit; and how many casts."""
    wanted = observed_dtypes(graph, inputs)
    casts = 0

    def rule(g: Graph, node: Node, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Node | None:
        nonlocal casts
        dtype = wanted.get(node)
        if dtype is None or not dtype.is_floating_point:
            return None
        if infer_meta(node.op, args, kwargs).dtype == dtype and not _mixed_library_call(node.op, args, kwargs, dtype):
            return None

        def cast(value: Any) -> Any:
            nonlocal casts
            if isinstance(value, Node) and value.meta.dtype.is_floating_point and value.meta.dtype != dtype:
                casts += 1
                return g.call("convert", value, dtype)
            return value

        result = g.call(node.op, *map_structure(cast, args), **map_structure(cast, kwargs))
        if result.meta.dtype != dtype:
            raise AutocastError(f"{node.name} = {node.op}(...) gives {result.meta.dtype} under autocast "
                                f"{dtype} even with its inputs cast")
        result.tags.update(node.tags)
        return result

    with autocast_off():
        return rewrite(graph, rule), casts
