"""Constant folding: pointwise ops and views whose tensor inputs are all constants (`full`
nodes) are computed now, at compile time, and become one `full` node.

A `full` tensor holds one value everywhere, so the op only needs computing once, on a
one-element stand-in: cheap, whatever the shape. The stand-in keeps the input's number of
dims, because PyTorch's type promotion treats 0-d tensors differently from the rest.
"""

from __future__ import annotations

from typing import Any

import torch

from minicompiler.ir import OPS, Graph, Node, flatten, map_structure, rewrite
from minicompiler.simplify.facts import full_value, location


def _one_element(node: Node) -> torch.Tensor:
    """A (1, 1, ...) tensor with the value, dtype and number of dims of a `full` node."""
    return torch.full((1,) * node.meta.ndim, full_value(node), dtype=node.meta.dtype)


def _folded_value(node: Node, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
    if OPS[node.op].kind == "view":  # a view of a constant is the same constant, reshaped
        return full_value(next(a for a in flatten(args) if isinstance(a, Node)))

    def stand_in(value: Any) -> Any:
        return _one_element(value) if isinstance(value, Node) else value

    result = OPS[node.op].impl(*map_structure(stand_in, args), **map_structure(stand_in, kwargs))
    return result.reshape(-1)[0].item()


def fold_constants(graph: Graph, log: list[str] | None = None) -> Graph:
    """A new graph where each pointwise op or view of constants is replaced by its value."""

    def rule(new: Graph, node: Node, args: tuple[Any, ...], kwargs: dict[str, Any]) -> Node | None:
        if node.op == "full" or OPS[node.op].kind not in ("pointwise", "view"):
            return None
        tensors = [a for a in flatten((args, kwargs)) if isinstance(a, Node)]
        if not tensors or any(t.op != "full" for t in tensors):
            return None
        value = _folded_value(node, args, kwargs)
        folded = new.call("full", node.meta.shape, value, node.meta.dtype, node.meta.device)
        folded.tags.update(node.tags)
        if log is not None:
            log.append(f"fold_constants: %{node.name}: -> full({value!r}){location(node)}")
        return folded

    return rewrite(graph, rule)
